"""Before bring-up: read every host of an inventory, change nothing, and say whether bring-up can run there.

Not a pyinfra deploy: a program `hgxkit doctor` runs (hgxkit/cli/doctor.py), here because it hands the
library the roles' knob defaults (the library never imports roles).

    hgxkit doctor inventories/h200.py [--data key=value] [--json]
    python deploys/doctor.py inventories/h200.py            # the same
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: roles/ (and hgxkit when not installed)

import roles.docker.defaults
import roles.model.defaults
import roles.nvidia_driver.defaults
import roles.preflight.defaults
import roles.serve.defaults
from hgxkit.cli.doctor import main
from hgxkit.knobs import SHARED_DEFAULTS

# The knobs the doctor reads, as the roles default them (the last role wins a name two define: they agree).
KNOB_DEFAULTS = {
    **SHARED_DEFAULTS,
    **roles.docker.defaults.DEFAULTS,
    **roles.model.defaults.DEFAULTS,
    **roles.nvidia_driver.defaults.DEFAULTS,
    **roles.preflight.defaults.DEFAULTS,
    **roles.serve.defaults.DEFAULTS,
}

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], KNOB_DEFAULTS))
