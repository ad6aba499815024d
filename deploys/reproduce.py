"""Reproduce any recipe end to end: preflight -> bring-up -> model -> serve -> (router) -> verify.

    hgxkit recipe import post.txt -o recipes/my-post.yaml
    pyinfra -y inventories/h200.py deploys/reproduce.py --data recipe=recipes/my-post.yaml
    pyinfra -y inventories/sim.py deploys/reproduce.py --data recipe=recipes/my-post.yaml   # simulated node
    pyinfra -y inventories/h200.py deploys/reproduce.py --data recipe=… --data bench=full  # the whole matrix

The recipe is validated before anything on the node changes. Every knob is in roles/<role>/defaults.py
(shared ones in hgxkit/knobs.py); `--data verify=false` serves without benchmarking, `--data router=true`
puts a router in front of the groups (a split's in PD mode), `--data monitoring=true` leaves exporters,
Prometheus and its alert rules watching the node (deploys/monitoring.py).
"""

from pyinfra import host

from hgxkit.hostlock import hold_host_lock
from hgxkit.include import include_sibling
from hgxkit.knobs import knob
from hgxkit.node.bringup import plan_reads as bringup_reads
from hgxkit.planfacts import prefetch
from hgxkit.recipe.host_recipe import recipe_for
from hgxkit.runfailure import install as answer_failures
from hgxkit.serving.steps import judged_for
from hgxkit.serving.steps import plan_reads as judge_reads
from roles import check_knob_names
from roles.docker import warm_image_cache
from roles.docker.defaults import DockerKnobs
from roles.model import model
from roles.model import plan_reads as model_reads
from roles.model.defaults import ModelKnobs
from roles.router import router
from roles.router.defaults import RouterKnobs
from roles.serve import plan_reads as serve_reads
from roles.serve import prefetch_image, serve
from roles.serve.defaults import ServeKnobs
from roles.serve.group import multinode_preflight
from roles.serve.split import split_preflight

if not host.data.get("recipe"):
    from pyinfra.api.exceptions import DeployError

    raise DeployError(
        f"{host.name}: deploys/reproduce.py needs a recipe: --data recipe=recipes/FILE.yaml (or `recipe:` in the "
        "inventory); `hgxkit recipe import POST.txt -o recipes/FILE.yaml` makes one from a post"
    )
check_knob_names(host, DockerKnobs, ModelKnobs, ServeKnobs, RouterKnobs)  # a misspelt or ill-typed knob stops here
recipe_for(host)  # load and validate it now: a bad recipe stops the run before bring-up changes anything
answer_failures()  # hgxkit's errors end the run as one block per host, not a traceback
# What the judgement, bring-up, the model and serving read while planning, in one batch instead of a round trip per
# fact: run on the run lock's own SSH channel as soon as the lock is held, so the no-op's reads cost no round trip of
# their own. Nothing before this line may read the node, or its read goes ahead of the lock on a channel of its own.
single = recipe_for(host).node_count() == 1
reads = [*judge_reads(host), *bringup_reads(host), *model_reads(), *(serve_reads() if single else [])]
hold_host_lock(host, reads)  # one hgxkit run per node at a time (hgxkit/hostlock.py)
prefetch(host, reads)  # whatever the lock's channel could not read (nothing, normally)
judged_for(host)  # the recipe's judgement under this host's allowances, before anything changes
multinode_preflight()  # a server spanning nodes: placement, equal members, head reachable; before any change
split_preflight()  # a split laid over hosts: each decode host reaches its prefills' bootstrap ports; before any change

include_sibling(__file__, "bringup.py")
warm_image_cache()  # with image_cache on: the cache host pulls first, so each layer crosses the uplink once
prefetch_image()  # the image downloads in the background while the model does
model()
serve()
router()  # only where `router: true`
if knob(host, "monitoring"):
    include_sibling(__file__, "monitoring.py")  # before verify: the alerts watch the benchmark too
if knob(host, "verify"):
    from roles.verify import verify  # here: its results/numpy imports cost every run that does not verify

    verify()
