"""The deployability sweep's pure parts (hgxkit.sim.sweep) and the simulated node's runc wrapper, which fits a
container's rlimits and capabilities to what the node has (`--ulimit memlock=-1` on a node
without CAP_SYS_RESOURCE failed with "error setting rlimit type 8")."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import resource
from pathlib import Path

import pytest

from hgxkit.errors import InputError
from hgxkit.importing.importer import import_post
from hgxkit.sim.sweep import FAKE_SECRET, STANDINS, Case, Result, load_case, mount_sources, placements

RUNC = Path(__file__).resolve().parents[3] / "hgxkit" / "sim" / "data" / "rootfs" / "usr" / "local" / "sbin" / "runc"


def _runc():
    loader = importlib.machinery.SourceFileLoader("hgxkit_sim_runc", str(RUNC))
    spec = importlib.util.spec_from_loader("hgxkit_sim_runc", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_runc_wrapper_finds_the_bundle_of_create_and_run_only() -> None:
    runc = _runc()
    assert (
        runc.bundle_of(["--root", "/r", "--log", "x", "create", "--bundle", "/b/1", "--pid-file", "p", "id"]) == "/b/1"
    )
    assert runc.bundle_of(["run", "-b", "/b/2", "id"]) == "/b/2"
    assert runc.bundle_of(["create", "--bundle=/b/3", "id"]) == "/b/3"
    assert runc.bundle_of(["--root", "/r", "start", "id"]) is None
    assert runc.bundle_of(["state", "id"]) is None


def test_runc_wrapper_lowers_limits_above_the_nodes_and_says_so() -> None:
    runc = _runc()
    hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]
    node = runc.UNLIMITED if hard == resource.RLIM_INFINITY else hard
    config = {
        "process": {
            "env": ["PATH=/bin"],
            "rlimits": [
                {"type": "RLIMIT_MEMLOCK", "hard": runc.UNLIMITED, "soft": runc.UNLIMITED},
                {"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024},
            ],
        }
    }
    changed = runc.fit(config)
    limits = config["process"]["rlimits"]
    assert limits[1] == {"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024}  # within the node's: unchanged
    assert limits[0]["hard"] == node and limits[0]["soft"] == node
    if node < runc.UNLIMITED:  # the CI machine: 8 MiB
        assert changed == [f"memlock=-1:-1>{node}:{node}"]
        assert config["process"]["env"][-1] == f"HGXKIT_SIM_CLAMPED=memlock=-1:-1>{node}:{node}"
    else:
        assert changed == [] and config["process"]["env"] == ["PATH=/bin"]


def test_runc_wrapper_drops_capabilities_outside_the_nodes_bounding_set(monkeypatch) -> None:
    runc = _runc()
    monkeypatch.setattr(runc, "bounding", lambda: {"CAP_CHOWN", "CAP_SYS_ADMIN"})
    config = {
        "process": {
            "capabilities": {
                "bounding": ["CAP_CHOWN", "CAP_SYS_RESOURCE", "CAP_SYS_ADMIN"],
                "effective": ["CAP_CHOWN", "CAP_SYS_RESOURCE"],
            }
        }
    }
    assert runc.fit(config) == ["caps=SYS_RESOURCE"]
    assert config["process"]["capabilities"] == {"bounding": ["CAP_CHOWN", "CAP_SYS_ADMIN"], "effective": ["CAP_CHOWN"]}
    assert config["process"]["env"] == ["HGXKIT_SIM_CLAMPED=caps=SYS_RESOURCE"]


def test_runc_wrapper_finds_the_process_file_of_exec_only() -> None:
    runc = _runc()
    # containerd-shim's `docker exec`: runc --root R --log L --log-format json exec --process FILE --detach …
    shim = [
        "--root",
        "/r",
        "--log",
        "l",
        "--log-format",
        "json",
        "exec",
        "--process",
        "/tmp/runc-process1",
        "--detach",
        "--pid-file",
        "p",
        "id",
    ]
    assert runc.process_of(shim) == "/tmp/runc-process1"
    assert runc.process_of(["exec", "-p", "/tmp/p2", "id"]) == "/tmp/p2"
    assert runc.process_of(["exec", "--process=/tmp/p3", "id"]) == "/tmp/p3"
    assert runc.process_of(["exec", "id", "sh"]) is None  # the container's own (already fitted) process
    assert runc.process_of(["create", "--bundle", "/b", "id"]) is None
    assert runc.bundle_of(shim) is None


def test_runc_wrapper_fits_an_exec_process_like_the_container(tmp_path, monkeypatch) -> None:
    """`docker exec` into a `--ulimit memlock=-1` container: Docker copies the container's rlimits into the exec'd
    process, which the node's kernel refused ("error setting rlimit type 8") while the container itself ran."""
    runc = _runc()
    monkeypatch.setattr(runc.resource, "getrlimit", lambda number: (8388608, 8388608))
    monkeypatch.setattr(runc, "bounding", lambda: {"CAP_CHOWN"})
    path = tmp_path / "runc-process1"
    path.write_text(
        json.dumps(
            {
                "args": ["python3"],
                "env": ["PATH=/bin"],
                "rlimits": [{"type": "RLIMIT_MEMLOCK", "hard": runc.UNLIMITED, "soft": runc.UNLIMITED}],
                "capabilities": {"effective": ["CAP_CHOWN", "CAP_IPC_LOCK"]},
            }
        )
    )
    runc.rewrite(str(path), runc.fit_process)
    assert json.loads(path.read_text()) == {
        "args": ["python3"],
        "env": ["PATH=/bin", "HGXKIT_SIM_CLAMPED=memlock=-1:-1>8388608:8388608,caps=IPC_LOCK"],
        "rlimits": [{"type": "RLIMIT_MEMLOCK", "hard": 8388608, "soft": 8388608}],
        "capabilities": {"effective": ["CAP_CHOWN"]},
    }
    within = tmp_path / "runc-process2"
    within.write_text('{"args": ["true"], "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024}]}')
    runc.rewrite(str(within), runc.fit_process)
    assert (
        within.read_text() == '{"args": ["true"], "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024}]}'
    )


def test_runc_wrapper_fits_the_process_file_of_an_exec_too(monkeypatch, tmp_path) -> None:
    """`docker exec` into a `--privileged` container: its process file asks every capability; the node's runc
    failed it ("unable to apply caps") until the exec was fitted like the container."""
    runc = _runc()
    assert runc.process_of(["--root", "/r", "exec", "--process", "/s/p.json", "--detach", "id"]) == "/s/p.json"
    assert runc.process_of(["exec", "-p", "/s/q.json", "id"]) == "/s/q.json"
    assert runc.process_of(["exec", "--process=/s/r.json", "id"]) == "/s/r.json"
    assert runc.process_of(["create", "--bundle", "/b", "id"]) is None
    monkeypatch.setattr(runc, "bounding", lambda: {"CAP_CHOWN"})
    process = tmp_path / "process.json"
    process.write_text(
        json.dumps(
            {"args": ["python3"], "env": ["A=1"], "capabilities": {"bounding": ["CAP_CHOWN", "CAP_SYS_RESOURCE"]}}
        )
    )
    runc.rewrite(str(process), runc.fit_process)
    assert json.loads(process.read_text()) == {
        "args": ["python3"],
        "env": ["A=1", "HGXKIT_SIM_CLAMPED=caps=SYS_RESOURCE"],
        "capabilities": {"bounding": ["CAP_CHOWN"]},
    }


def test_runc_wrapper_reads_the_cap_numbers_of_the_kernel_table() -> None:
    runc = _runc()
    assert runc.CAPS.index("SYS_RESOURCE") == 24 and runc.CAPS.index("IPC_LOCK") == 14
    assert runc.CAPS.index("CHECKPOINT_RESTORE") == 40


# --- the sweep's placement of one post ---

POST = """```
docker run --gpus all --shm-size 32g --ulimit memlock=-1 --ulimit stack=67108864 --ipc=host -p 30000:30000 \\
  -e HF_TOKEN=$HF_TOKEN --mount type=bind,source=/mnt/data,target=/data \\
  lmsysorg/sglang:v0.5.2 python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B --host 0.0.0.0
```
"""


def test_a_post_is_placed_with_the_standin_image_and_nothing_else_changed() -> None:
    recipe = load_case(Case("p.md", POST))
    ((node, (spec,)),) = placements(recipe, nodes=2, head="10.0.0.1")
    argv = spec.final_argv()
    assert node == 0 and STANDINS["sglang"] in argv and "lmsysorg/sglang:v0.5.2" not in argv
    posted = render_words(recipe)
    image = argv.index(STANDINS["sglang"])
    assert argv[image + 1 :] == posted[posted.index("lmsysorg/sglang:v0.5.2") + 1 :]
    for option in (
        "--shm-size",
        "32g",
        "memlock=-1",
        "stack=67108864",
        "--ipc=host",
        "type=bind,source=/mnt/data,target=/data",
    ):
        assert option in argv, option
    assert spec.secret_files() == {"secrets.env": f"HF_TOKEN={FAKE_SECRET}\n"}
    assert spec.health_url == "http://127.0.0.1:30000/health_generate"
    assert mount_sources(argv) == ["/mnt/data"]


def render_words(recipe) -> list[str]:
    from hgxkit.recipe.render import render_recipe

    return render_recipe(recipe)[0].shell_argv


def test_a_server_over_two_nodes_puts_rank_one_on_the_second_with_the_first_as_head() -> None:
    post = """```
python3 -m sglang.launch_server --model-path org/m --tp 16 --dist-init-addr 10.1.1.1:5000 --nnodes 2 --node-rank 0
python3 -m sglang.launch_server --model-path org/m --tp 16 --dist-init-addr 10.1.1.1:5000 --nnodes 2 --node-rank 1
```
"""
    recipe = import_post([("p.md", post)]).recipe
    placed = placements(recipe, nodes=2, head="172.30.0.2")
    assert [(node, len(specs)) for node, specs in placed] == [(0, 1), (1, 1)]
    rank1 = placed[1][1][0].final_argv()
    assert rank1[rank1.index("--dist-init-addr") + 1] == "172.30.0.2:5000"
    assert rank1[rank1.index("--node-rank") + 1] == "1"


def test_a_recipe_the_import_refuses_is_a_failure_naming_it() -> None:
    post = "docker run --gpus all -v ~/data:/data vllm/vllm-openai:v0.9.0 --model Qwen/Qwen3-8B\n"
    with pytest.raises(InputError) as caught:
        load_case(Case("p.md", post))
    assert caught.value.message.startswith("p.md: line 1, column 26: --volume ~/data:/data: the host side ~/data ")


def test_result_lines() -> None:
    assert Result("a.txt", True, "", 2, 4.06).line() == "ok     a.txt: 2 container(s) answered health in 4.1 s"
    assert Result("b.txt", False, "node1: docker run x: boom").line() == "FAIL   b.txt: node1: docker run x: boom"


def test_the_sglang_standin_accepts_the_flags_the_sweep_found_it_lacking() -> None:
    """006 (`--torch-compile-max-bs 8`) and 027 (`--tool-call-parser glm47`) failed on the stand-in only."""
    from hgxkit.sim.standin.sglang.args import build_parser

    ns = build_parser("sglang").parse_args(
        ["--model-path", "/m", "--enable-torch-compile", "--torch-compile-max-bs", "8", "--tool-call-parser", "glm47"]
    )
    assert (ns.torch_compile_max_bs, ns.tool_call_parser) == (8, "glm47")


def test_every_post_the_corpus_says_imports_is_a_case_the_sweep_can_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sweep's cases are made as the corpus tests import each post (its index's options): each loads as a node
    would get it, so `make sweep` and its CI sample start from what the corpus promises."""
    root = Path(__file__).resolve().parents[3]
    monkeypatch.syspath_prepend(str(root / "bench"))
    monkeypatch.syspath_prepend(str(root / "tests" / "unit" / "importing"))
    import deploy_sweep

    cases = deploy_sweep.corpus_cases()
    assert len(cases) > 60 and any(case.image for case in cases)
    for case in cases:
        load_case(case)  # InputError names the post and why
