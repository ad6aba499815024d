"""`python -m hgxkit.model.fetch`: the downloader run from the repository (the node runs the built file)."""

import sys

from hgxkit.model.fetch.cli import main

sys.exit(main())
