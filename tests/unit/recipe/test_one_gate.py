"""One judgement for every consumer: check, the node, every export, bundle create and verify give one verdict.

The corpus is every recipe the project ships or reads (recipes/, export fixtures, every post and orchestrator
file the importer accepts) plus one recipe per threat class of the hostile review, each judged under several
sets of allowances. For each, the CLI's `recipe check` (exit status and error codes), the node's judgement
(`judged_for`, which every role takes its recipe from, on a host whose inventory holds the same knobs) and
`recipe export --to T` for each target must agree: all accept, or all refuse with the same problems.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pyinfra.api.exceptions import DeployError

from hgxkit.cli import main
from hgxkit.importing.importer import ImportOptions, import_post
from hgxkit.node.facts_gpu import GpuInfo, NvidiaSmi, SmiResult
from hgxkit.node.facts_system import MemTotalBytes
from hgxkit.recipe.dump import dump_recipe
from hgxkit.recipe.read import load_recipe, parse_recipe_text
from hgxkit.serving import steps

# One worker runs this module (pyproject's `--dist loadgroup`): its corpus, every post imported, is built once.
pytestmark = pytest.mark.xdist_group("one-gate-corpus")
ROOT = Path(__file__).resolve().parents[3]
POSTS = ROOT / "tests" / "fixtures" / "posts"
TARGETS = ("compose", "k8s", "skypilot", "slurm")

# One recipe per threat class (the hostile review's), each a `docker run` as a post would write it.
THREATS = {
    "privileged": "docker run --gpus all --privileged -v /data/models:/m:ro img:1 sglang serve --model-path /m/x",
    "host-root": "docker run --gpus all -v /:/host img:1 sglang serve --model-path org/m",
    "docker-socket": "docker run --gpus all -v /var/run/docker.sock:/s img:1 sglang serve --model-path org/m",
    "pid-host": "docker run --gpus all --pid host img:1 sglang serve --model-path org/m",
    "credentials-file": "docker run --gpus all -v /root/.aws:/creds:ro img:1 sglang serve --model-path org/m",
    "keyless-host-network": "docker run --gpus all --network host img:1 sglang serve --model-path org/m --host 0.0.0.0",
    "wrapped-host-network-two-nodes": (
        "docker run --gpus all --network host img:1 sh -c 'python3 -m sglang.launch_server --model-path org/m "
        "--tp 16 --nnodes 2 --node-rank 0 --dist-init-addr 10.0.0.1:5000 --host 0.0.0.0'"
    ),
    "publish-all": "docker run --gpus all -P img:1 sglang serve --model-path org/m",
    "env-secret-as-model-name": (
        "docker run --gpus all img:1 sglang serve --model-path org/m --served-model-name {{env:AWS_SECRET_ACCESS_KEY}}"
    ),
    "vllm-keyless-host-network": "docker run --gpus all --network host vllm/vllm-openai:v0.11.0 --model org/m",
}

# Threats an import refuses, so written by hand: (a post, an argument added to its recipe's server.args).
EDITED = {"engine-unknown-flag": ("docker run --gpus all vllm/vllm-openai:latest --model org/m", "--no-such-flag")}

# Allowance sets: (knobs of a node's inventory, the same as `recipe check` / `recipe export` flags).
ALLOWANCES: dict[str, tuple[dict[str, Any], list[str]]] = {
    "defaults": ({}, []),
    "api-key-auto": ({"api_key": "auto"}, ["--api-key", "auto"]),
    "host-network": ({"allow_docker_options": ["--network=host"]}, ["--allow-docker-option=--network=host"]),
    "open": (
        {"bind_address": "0.0.0.0", "allow_unauthenticated": True, "allow_docker_options": ["--network=host"]},
        ["--bind", "0.0.0.0", "--allow-unauthenticated", "--allow-docker-option=--network=host"],
    ),
}


@dataclass
class FakeHost:
    """What `judged_for` reads of a pyinfra host: its name, its inventory data and two facts (8 GPUs, 2 TiB)."""

    name: str
    data: dict[str, Any] = field(default_factory=dict)

    def get_fact(self, fact: type, **_: Any) -> Any:
        if fact is NvidiaSmi:
            return SmiResult(
                gpus=[GpuInfo(i, "NVIDIA H200", f"GPU-{i}", f"0000:{i:02x}:00.0", "570.0") for i in range(8)]
            )
        if fact is MemTotalBytes:
            return 2 * 1024**4
        raise AssertionError(f"judged_for read an unexpected fact: {fact.__name__}")


def _corpus(tmp: Path) -> dict[str, Path]:
    found = {p.name: p for p in sorted((ROOT / "recipes").glob("*.yaml"))}
    found |= {p.name: p for p in sorted((ROOT / "tests" / "fixtures" / "export").glob("*.yaml"))}
    posts = sorted(POSTS.glob("[0-9]*.txt")) + sorted((POSTS / "formats").glob("[a-z][0-9]*"))
    sources = [(p.name, p.read_text()) for p in posts] + [(f"{k}.txt", v) for k, v in THREATS.items()]
    for name, text in sources:
        try:
            recipe = import_post([(name, text)], ImportOptions()).recipe
            written = dump_recipe(recipe)
            parse_recipe_text(written, source=name)  # `recipe import` writes only what loads back
        except Exception:  # refused at import: no recipe to judge
            continue
        path = tmp / f"{Path(name).stem}.yaml"
        path.write_text(written)
        found[path.name] = path
    for name, (post, argument) in EDITED.items():
        text = dump_recipe(import_post([(f"{name}.txt", post)], ImportOptions()).recipe)
        assert "\n  args:\n" in text
        (tmp / f"{name}.yaml").write_text(text.replace("\n  args:\n", f"\n  args:\n  - {argument}\n", 1))
        found[f"{name}.yaml"] = tmp / f"{name}.yaml"
    return found


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return _corpus(tmp_path_factory.mktemp("corpus"))


def _check(path: Path, flags: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[bool, list[str]]:
    code = main(["recipe", "check", str(path), "--json", *flags])
    document = json.loads(capsys.readouterr().out)
    assert code == (0 if document["ok"] else 1)
    return document["ok"], sorted(f["code"] for f in document["findings"] if f["level"] == "error")


def _node(path: Path, knobs: dict[str, Any]) -> tuple[bool, list[str]]:
    host = FakeHost("node1", {"recipe": str(path), **knobs})
    try:
        steps.judged_for(host)
    except DeployError as err:
        return False, sorted(line.split("]")[0].removeprefix("  - [") for line in str(err).splitlines()[1:])
    return True, []


def test_the_corpus_is_large_and_holds_every_threat_class(corpus: dict[str, Path]) -> None:
    assert len(corpus) >= 50
    assert {*THREATS, *EDITED} <= {Path(name).stem for name in corpus}


@pytest.mark.parametrize("allowed", sorted(ALLOWANCES))
def test_check_and_node_give_the_same_verdict_on_every_recipe(
    allowed: str, corpus: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    knobs, flags = ALLOWANCES[allowed]
    verdicts = {name: (_check(path, flags, capsys), _node(path, knobs)) for name, path in corpus.items()}
    disagree = {name: pair for name, pair in verdicts.items() if pair[0] != pair[1]}
    assert disagree == {}
    refused = {name for name, ((ok, _), _) in verdicts.items() if not ok}
    assert {f"{threat}.yaml" for threat in THREATS} & refused  # the threats are refused under every allowance set


@pytest.mark.parametrize("threat", sorted([*THREATS, *EDITED]))
def test_every_threat_is_refused_by_check_node_and_every_export_alike(
    threat: str, corpus: dict[str, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = corpus[f"{threat}.yaml"]
    check = _check(path, [], capsys)
    assert check == _node(path, {}) and check[0] is False
    # An export hands a kind with a key variable (vLLM) its key from the engine's secrets: `api_key: auto`.
    keyed = load_recipe(str(path)).server.server_kind.api_key_env is not None
    as_exported = _check(path, ["--api-key", "auto"] if keyed else [], capsys)
    for target in TARGETS:
        code = main(["recipe", "export", str(path), "--to", target, "-o", str(tmp_path / target)])
        err = capsys.readouterr().err
        assert code == 2 and not (tmp_path / target).exists(), (target, err)
        assert _codes(err) == sorted(set(as_exported[1]))
    # A bundle carries only what the inventory's node would serve: judged before anything is fetched.
    assert main(["bundle", "create", "--recipe", str(path), "-o", str(tmp_path / "bundle")]) == 2
    assert _codes(capsys.readouterr().err) == sorted(set(check[1])) and not (tmp_path / "bundle").exists()
    # Nor is it verified against an endpoint: judged before the endpoint is asked anything (nothing listens here).
    endpoint = ["verify", "--endpoint", "http://127.0.0.1:9", "--recipe", str(path), "--tokenizer", str(tmp_path)]
    assert main([*endpoint, "--results-dir", str(tmp_path / "results")]) == 2
    assert _codes(capsys.readouterr().err) == sorted(set(check[1])) and not (tmp_path / "results").exists()


def _codes(err: str) -> list[str]:
    return sorted({line.split("]")[0].split("[")[-1] for line in err.splitlines() if "  - [" in line})


def test_an_allowed_danger_is_exported_visibly_and_the_keyless_api_is_not_opened(
    corpus: dict[str, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = corpus["privileged.yaml"]
    assert _node(path, {"allow_docker_options": ["--privileged"]}) == (True, [])
    for target in TARGETS:
        out = tmp_path / target
        assert (
            main(["recipe", "export", str(path), "--to", target, "-o", str(out), "--allow-docker-option", "privileges"])
            == 0
        )
        assert "carried allowed by allow_docker_options: --privileged" in capsys.readouterr().err
        text = "".join(f.read_text() for f in sorted(out.iterdir()))
        assert "ALLOWED ON PURPOSE, allowed by allow_docker_options: --privileged" in text, target
        if target == "skypilot":
            assert "ports:" not in text  # SGLang with no key: never opened to the world


# How each engine's file spells the option: a docker flag, or a key of its own format.
SPELLINGS = {"pid-host": r"--pid|hostPID|pid: host", "privileged": r"--privileged|privileged: true"}


@pytest.mark.parametrize(("threat", "allow"), [("pid-host", "--pid=host"), ("privileged", "privileges")])
def test_an_export_never_says_not_carried_of_what_it_runs(
    threat: str, allow: str, corpus: dict[str, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path, spelled = corpus[f"{threat}.yaml"], re.compile(SPELLINGS[threat])
    word = allow.split("=")[0] if threat == "pid-host" else "--privileged"
    for target in TARGETS:
        out = tmp_path / target
        assert (
            main(["recipe", "export", str(path), "--to", target, "-o", str(out), f"--allow-docker-option={allow}"]) == 0
        )
        err = capsys.readouterr().err
        said_dropped = any(line.startswith("not carried:") and word in line for line in err.splitlines())
        text = "".join(f.read_text() for f in sorted(out.iterdir()))
        text = re.sub(r"allowed by allow_docker_options: [^'\n]*", "", text)  # the label that says it was allowed
        runs = any(spelled.search(line) for line in text.splitlines() if not line.lstrip().startswith("#"))
        assert said_dropped != runs, (target, err)
