import sys

from hgxkit.cli import main

sys.exit(main())
