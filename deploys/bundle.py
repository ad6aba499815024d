"""The roles' knob defaults for `hgxkit bundle create` (hgxkit/cli/bundle.py reads KNOB_DEFAULTS from here,
because the library never imports roles): the versions and repositories bring-up pins, the model's wheels.

Not a pyinfra deploy; the `bundle` knob that makes the roles read a bundle is documented in hgxkit/knobs.py.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: roles/ (and hgxkit when not installed)

import roles.container_toolkit.defaults
import roles.gpu_health.defaults
import roles.model.defaults
import roles.nvidia_driver.defaults
from hgxkit.knobs import SHARED_DEFAULTS

KNOB_DEFAULTS = {
    **SHARED_DEFAULTS,
    **roles.nvidia_driver.defaults.DEFAULTS,
    **roles.container_toolkit.defaults.DEFAULTS,
    **roles.gpu_health.defaults.DEFAULTS,
    **roles.model.defaults.DEFAULTS,
}
