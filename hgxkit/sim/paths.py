"""Where the simulation keeps its state on the machine that runs `hgxkit sim` (keys, per-node files, the
built apt repositories, the Hub store, the registry storage).

Example:
    >>> import os; os.environ["HGXKIT_SIM_HOME"] = "/tmp/sim"; str(state_dir())
    '/tmp/sim'
"""

from __future__ import annotations

import os
from pathlib import Path


def state_dir() -> Path:
    """Where keys, per-node files and the built repositories live ($HGXKIT_SIM_HOME overrides)."""
    if os.environ.get("HGXKIT_SIM_HOME"):
        return Path(os.environ["HGXKIT_SIM_HOME"])
    base = Path(os.environ.get("XDG_STATE_HOME", Path.home() / ".local" / "state"))
    return base / "hgxkit" / "sim"
