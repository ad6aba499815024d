"""The baseline of bench/noop_rerun.py: the least a pyinfra deploy can do (one fact, one no-op operation)."""

from pyinfra import host
from pyinfra.facts.server import Hostname
from pyinfra.operations import files

host.get_fact(Hostname)
files.directory(name="A directory that already exists", path="/tmp")
