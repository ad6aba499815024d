"""Monitoring that stays after the benchmark: DCGM and node exporters, Prometheus with alert rules, dashboards.

    pyinfra -y inventories/h200.py deploys/monitoring.py --data monitoring=true
    pyinfra -y inventories/sim.py deploys/monitoring.py --data monitoring=true    # simulated node

deploys/reproduce.py (and deploys/dspark.py) include this file when `monitoring: true`. What is scraped comes
from the inventory and each host's recipe (its serving groups). Knobs: roles/monitoring/defaults.py.
"""

from pyinfra import host

from hgxkit.hostlock import hold_host_lock
from roles import check_knob_names
from roles.monitoring import monitoring
from roles.monitoring.defaults import MonitoringKnobs

check_knob_names(host, MonitoringKnobs)  # a misspelt or ill-typed knob stops the run here, naming it
hold_host_lock(host)  # one hgxkit run per node at a time (hgxkit/hostlock.py)

monitoring()
