"""Verify what is served and archive a benchmark run, without changing the deployment.

    pyinfra -y inventories/sim.py deploys/verify.py                    # smoke benchmark
    pyinfra -y inventories/sim.py deploys/verify.py --data bench=full  # the post's whole matrix
    pyinfra -y inventories/h200.py deploys/verify.py --data bench=none # health, generation and gates only

Runs land in results/<host>/<UTC time>_<recipe>/; see `hgxkit results ls`.
"""

from pyinfra import host

from hgxkit.hostlock import hold_host_lock
from hgxkit.runfailure import install as answer_failures
from roles import check_knob_names
from roles.verify import verify
from roles.verify.defaults import VerifyKnobs

answer_failures()  # hgxkit's errors end the run as one block per host, not a traceback
check_knob_names(host, VerifyKnobs)  # a misspelt or ill-typed knob stops the run here, naming it
hold_host_lock(host)  # one hgxkit run per node at a time (hgxkit/hostlock.py)

verify()
