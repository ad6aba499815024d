"""A third server kind is one module: a made-up engine, defined only in this file and registered, is imported
from a post, rendered, checked, planned for verify (its client's arguments and output) and its /metrics read,
without any other module knowing its name."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from hgxkit.importing.importer import ImportOptions, import_post
from hgxkit.kinds import KINDS, register_kind, unregister_kind
from hgxkit.kinds.base import BenchCell, BenchClient, KindMetrics, PostedClient, ServerKind
from hgxkit.kinds.lengths import SPREAD
from hgxkit.recipe.check import check_recipe
from hgxkit.recipe.render import render_recipe
from hgxkit.results.bench import BenchRecord
from hgxkit.results.telemetry import summarise_cell_telemetry
from hgxkit.serving.containers import container_specs
from hgxkit.verify.plan import cells_from_output, client_argv, plan_cells


def _toy_argv(cell: BenchCell, output_dir: str, warmups: str) -> list[str]:
    return [
        "--url",
        f"http://127.0.0.1:{cell.port}",
        "--input-len",
        str(cell.input_len),
        "--concurrency",
        str(cell.concurrency),
        "--num-prompts",
        str(cell.num_prompts),
        "--warmup",
        warmups,
        "--out",
        f"{output_dir}/{cell.file}",
    ]


def _toy_parse(text: str, cell: BenchCell) -> list[BenchRecord]:
    return [
        BenchRecord(completed=doc["ok"], max_concurrency=doc["concurrency"], tool="toybench")
        for doc in map(json.loads, text.splitlines())
    ]


TOY = ServerKind(
    name="toyserve",
    title="ToyServe",
    images=("example/toyserve",),
    programs=(("toyserve", "run"),),
    flag_aliases={"-t": "--tensor-parallel"},
    underscores_are_dashes=False,
    positional_model=False,
    model_flag="--model",
    tp_flag="--tensor-parallel",
    pp_flag="--pipeline-parallel",
    dp_flag="--data-parallel",
    default_host="0.0.0.0",
    default_port=7000,
    health_path="/healthz",
    ready_path="/ready",
    info_path="/about",
    metrics_path="/metrics",
    metrics_flag=None,
    api_key_env="TOYSERVE_KEY",
    client="toybench",
    client_backend="toy",
    flush_cache=False,
    default_image="example/toyserve:1",
    bench=BenchClient(
        modules=(("toyserve.bench", ()),), suffix="ndjson", lengths=SPREAD, argv=_toy_argv, parse=_toy_parse
    ),
    metrics=KindMetrics(
        running="toy_running",
        waiting="toy_waiting",
        generation_tokens="toy_generated_total",
        prompt_tokens="toy_prompt_total",
        kv_usage=("toy_kv",),
    ),
    posted_clients=(
        PostedClient(
            "toybench",
            (("toybench",),),
            {
                "input_len": ("--input-len",),
                "concurrency": ("--concurrency",),
                "num_prompts": ("--num-prompts",),
                "output_len": ("--output-len",),
            },
            {"output_len": 64},
            frozenset(),
            {"model": ("--model",), "url": ("--url",)},
            version="toyserve 1",
        ),
    ),
)

POST = """\
ToyServe on two GPUs:

```
docker run --gpus '"device=0,1"' -p 7000:7000 example/toyserve:1 \\
    toyserve run --model org/Toy-1B -t 2 --port 7000
```

Then, from another shell:

```
toybench --model org/Toy-1B --url http://127.0.0.1:7000 --input-len 256 --concurrency 4 --num-prompts 32
```
"""


@pytest.fixture
def toy() -> Iterator[ServerKind]:
    register_kind(TOY)
    yield TOY
    unregister_kind(TOY.name)


def test_a_registered_engine_is_imported_rendered_checked_and_planned(toy: ServerKind) -> None:
    result = import_post([("toy.md", POST)], ImportOptions(name="toy"))
    recipe = result.recipe
    assert recipe.server.kind == "toyserve" and recipe.server.server_kind is toy
    assert recipe.server.flag("-t") == "2" and recipe.server.parallel_size() == 2
    assert recipe.model.repo_id == "org/Toy-1B"

    (group,) = render_recipe(recipe, total_gpus=8)
    assert group.port == 7000 and group.argv[-1] != "run"  # the server's own arguments follow its program
    assert not [f for f in check_recipe(recipe, 8) if f.level == "error"]
    (spec,) = container_specs(
        recipe, total_gpus=8, bind_address="127.0.0.1", api_key=None, image="example/toyserve@sha256:" + "0" * 64
    )
    assert spec.health_url == "http://127.0.0.1:7000/healthz"

    assert recipe.matrix is not None
    (cell,) = plan_cells(recipe, "full", [(0, spec.name)], repeats=1)
    assert (cell.kind, cell.client, cell.input_len, cell.concurrency, cell.output_len) == (
        "toyserve",
        "toybench",
        256,
        4,
        64,
    )
    assert cell.file.endswith(".ndjson")
    assert client_argv(cell, "/out") == [
        "--url",
        "http://127.0.0.1:7000",
        "--input-len",
        "256",
        "--concurrency",
        "4",
        "--num-prompts",
        "32",
        "--warmup",
        "4",
        "--out",
        f"/out/{cell.file}",
    ]
    results, problems = cells_from_output([cell], {cell.file: '{"ok": 32, "concurrency": 4}\n'})
    assert not problems and results[0].completed == 32

    scrapes = (
        "# hgxkit-scrape 1.0\ntoy_running 3\ntoy_generated_total 10\n# hgxkit-scrape 2.0\ntoy_running 5\n"
        "toy_generated_total 110\n"
    )
    server = summarise_cell_telemetry(
        "toyserve", KINDS["toyserve"].metrics, metrics_text=scrapes, simulated=True
    ).server
    assert server is not None and (server.running_max, server.output_throughput) == (5.0, 100.0)


def test_the_engine_is_gone_once_unregistered() -> None:
    assert TOY.name not in KINDS
