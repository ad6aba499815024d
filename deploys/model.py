"""Sync the recipe's model to each node: pinned to a commit, resumable, verified (roles/model).

    pyinfra -y inventories/h200.py deploys/model.py
    pyinfra -y inventories/sim.py deploys/model.py --data recipe=recipes/deepseek-v4-flash-dspark-flashinfer.yaml
    HF_TOKEN=hf_... pyinfra -y inventories/h200.py deploys/model.py        # gated repos

The recipe comes from the `recipe` knob (default: the seed post's recipe; hgxkit/knobs.py); every other knob
is in roles/model/defaults.py.
"""

from roles.model import model

model()
