"""`python -m hgxkit`: the `hgxkit` command line (hgxkit/cli/__init__.py), for an environment without its script."""

import sys

from hgxkit.cli import main

sys.exit(main())
