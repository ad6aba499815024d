"""Sync the recipe's model to each node: pinned to a commit, resumable, verified (roles/model).

    pyinfra -y inventories/h200.py deploys/model.py
    pyinfra -y inventories/sim.py deploys/model.py --data recipe=recipes/deepseek-v4-flash-dspark-flashinfer.yaml
    HF_TOKEN=hf_... pyinfra -y inventories/h200.py deploys/model.py        # gated repos

The recipe comes from the `recipe` knob (default: the seed post's recipe; hgxkit/knobs.py); every other knob
is in roles/model/defaults.py.
"""

from pyinfra import host

from hgxkit.hostlock import hold_host_lock
from hgxkit.runfailure import install as answer_failures
from roles import check_knob_names
from roles.model import model
from roles.model.defaults import ModelKnobs

answer_failures()  # hgxkit's errors end the run as one block per host, not a traceback
check_knob_names(host, ModelKnobs)  # a misspelt or ill-typed knob stops the run here, naming it
hold_host_lock(host)  # one hgxkit run per node at a time (hgxkit/hostlock.py)

model()
