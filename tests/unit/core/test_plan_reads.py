"""deploys/reproduce.py's batched plan-time reads: building the list reads nothing from the node, so every read
(the judgement's memory and GPUs included) rides in the run lock's batch instead of a channel of its own ahead of it."""

from __future__ import annotations

from pyinfra.api import Config, Inventory, State
from pyinfra.api.connect import connect_all
from pyinfra.api.deploy import add_deploy
from pyinfra.api.facts import FactBase

from hgxkit.node.bringup import plan_reads as bringup_reads
from hgxkit.node.facts_gpu import NvidiaSmi
from hgxkit.node.facts_system import MemTotalBytes
from hgxkit.serving.steps import plan_reads as judge_reads
from roles.model import plan_reads as model_reads
from roles.serve import plan_reads as serve_reads

MARLIN = "recipes/deepseek-v4-flash-dspark-marlin.yaml"


def reads_and_commands(**data: object) -> tuple[set[type[FactBase]], list[str]]:
    """The fact classes reproduce.py's list names on one @fake host, and the commands building it ran there."""
    inventory = Inventory(([("@fake/h200-1", {"fake_delay": 0, "fake_delay_jitter": 0, "recipe": MARLIN, **data})], {}))
    state = State(inventory=inventory, config=Config())
    connect_all(state)
    host = inventory.get_host("@fake/h200-1")
    reads: list[tuple[type[FactBase], dict]] = []

    def collect() -> None:
        from pyinfra import host as current

        reads.extend([*judge_reads(current), *bringup_reads(current), *model_reads(), *serve_reads()])

    add_deploy(state, collect)
    return {fact for fact, _ in reads}, [str(c) for c in host.connector.executed_commands]


def test_the_list_reads_nothing_and_names_what_the_judgement_reads() -> None:
    facts, commands = reads_and_commands()
    assert commands == []  # the model's spec came from the recipe as loaded, not from judging it (which reads)
    assert {MemTotalBytes, NvidiaSmi} <= facts
    assert len(facts) > 5  # the model's and serving's reads are there too


def judge_reads_for(**data: object) -> list[type[FactBase]]:
    inventory = Inventory(([("@fake/h200-1", {"recipe": MARLIN, **data})], {}))
    State(inventory=inventory, config=Config())
    return [fact for fact, _ in judge_reads(inventory.get_host("@fake/h200-1"))]


def test_a_fixed_gpu_count_leaves_nvidia_smi_out_of_the_judgements_reads() -> None:
    assert judge_reads_for() == [MemTotalBytes, NvidiaSmi]
    assert judge_reads_for(serve_total_gpus=8) == [MemTotalBytes]
