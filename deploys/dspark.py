"""The forum post's setup, end to end: deploys/reproduce.py with the post's recipe unless you name another.

    pyinfra -y inventories/h200.py deploys/dspark.py
    pyinfra -y inventories/sim.py deploys/dspark.py                         # simulated node (`hgxkit sim up`)
    pyinfra -y inventories/sim.py deploys/dspark.py --data recipe=recipes/deepseek-v4-flash-dspark-flashinfer.yaml

Every knob is in roles/<role>/defaults.py (shared ones in hgxkit/knobs.py); `--data verify=false` skips the
verify step, `--data bench=full` runs the recipe's whole benchmark matrix.
"""

from pyinfra import host

from hgxkit.include import include_sibling
from hgxkit.knobs import SEED_RECIPE

if not host.data.get("recipe"):
    host.data.recipe = SEED_RECIPE  # the post's marlin recipe; the inventory or --data may name another

include_sibling(__file__, "reproduce.py")
