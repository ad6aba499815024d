"""Shared by every test session: remembered verdicts (hgxkit/verdicts.py) go to a folder of the session's own, not
the user's ~/.cache/hgxkit, and are gone with it."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

from hgxkit.verdicts import CACHE_DIR_ENV

if not os.environ.get(CACHE_DIR_ENV):
    _CACHE = tempfile.mkdtemp(prefix="hgxkit-test-cache-")
    os.environ[CACHE_DIR_ENV] = _CACHE  # inherited by the CLIs and pyinfra runs the tests start
    atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)
