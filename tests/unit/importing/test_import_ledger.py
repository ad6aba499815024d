"""Nothing a shell or Docker would read is lost without a word: the line account (`--explain`, `--json`), a
refusal's place, and the property that deleting any one continuation backslash from any corpus post makes the
import refuse or give the same recipe, never a different one."""

from __future__ import annotations

import json
import os
import re
import subprocess
from functools import cache
from typing import TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_post_corpus import ENTRIES, PICKS, POSTS

from hgxkit.cli import main
from hgxkit.errors import InputError
from hgxkit.importing.importer import ImportOptions, import_post
from hgxkit.importing.outcome import LEDGER_SCHEMA_VERSION, ImportRefused
from hgxkit.recipe.spec import Recipe

T = TypeVar("T")
LOST = """Serve:
```
vllm serve org/m --port 8001 \\
  --max-model-len 4096
  --gpu-memory-utilization 0.9
```
"""


def _recipe(name: str, text: str, pick: int | None) -> Recipe | None:
    """The recipe, or None where the import refuses the post or sets a benchmark aside for a line it lost (exit 3,
    naming the line): either way the loss is said, not a recipe that silently differs."""
    try:
        outcome = import_post([(name, text)], ImportOptions(pick=pick))
    except InputError:
        return None
    return None if any("reads as its continuation" in part for part in outcome.set_aside) else outcome.recipe


@cache
def _posted(number: str) -> tuple[str, Recipe | None]:
    entry = ENTRIES[number]
    text = (POSTS / entry["file"]).read_text()
    return text, _recipe(entry["file"], text, PICKS.get(number))


# Every continuation backslash of the corpus that continues a command onto a line: (post, offset of the
# backslash). One with only blank lines or its code fence's end after it continues nothing the post holds (its copy
# was cut there, which the import refuses), so deleting it loses no line.
SITES = [
    (number, m.start())
    for number in sorted(ENTRIES)
    for m in re.finditer(r"\\[ \t]*\n(?=\s*\S)(?![ \t]*(?:`{3,}|~{3,}))", (POSTS / ENTRIES[number]["file"]).read_text())
]


def _without_backslash(number: str, offset: int) -> tuple[Recipe | None, Recipe | None]:
    text, recipe = _posted(number)
    return recipe, _recipe(ENTRIES[number]["file"], text[:offset] + text[offset + 1 :], PICKS.get(number))


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(SITES))
def test_a_lost_backslash_refuses_or_changes_nothing(site: tuple[str, int]) -> None:
    posted, mutated = _without_backslash(*site)
    assert mutated is None or mutated == posted, site


def share(sites: list[T]) -> list[T]:
    """The sites this run checks: all with HGXKIT_WHOLE_CORPUS=1 (`make corpus`), else the tenth whose index ends in
    this commit's digit (its hash modulo 10; 0 outside a git checkout), so successive commits check different
    tenths, as tests/mutation/test_sample.py samples mutants: the whole takes minutes of CPU."""
    if os.environ.get("HGXKIT_WHOLE_CORPUS") == "1":
        return sites
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=POSTS, capture_output=True, text=True, check=False)
    digit = int(head.stdout.strip() or "0", 16) % 10
    return sites[digit::10]


def test_every_lost_backslash_of_the_corpus_refuses_or_changes_nothing() -> None:
    assert len(SITES) > 500
    different = [site for site in share(SITES) if (r := _without_backslash(*site))[1] is not None and r[1] != r[0]]
    assert different == []


def test_a_flag_line_after_an_ended_command_is_refused_with_its_place() -> None:
    with pytest.raises(ImportRefused) as caught:
        import_post([("p.md", LOST)], ImportOptions(image="vllm/vllm-openai:v0.33.0"))
    refused = caught.value
    assert refused.message.startswith(
        "p.md: line 5, column 3: '--gpu-memory-utilization' follows the command at line 3"
    )
    assert "a continuation backslash may be missing" in refused.message
    assert refused.place == ("p.md", 5, 3)
    assert [(a.line, a.fate) for a in refused.lines][2:5] == [(3, "set aside"), (4, "set aside"), (5, "refused")]


def test_explain_prints_every_line_with_its_fate(tmp_path, capsys) -> None:
    post = tmp_path / "p.md"
    post.write_text(LOST.replace("4096\n", "4096 \\\n"))
    assert main(["recipe", "import", str(post), "--explain", "--image", "vllm/vllm-openai:v0.33.0"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{post}:1: set aside (prose, comments or output)"
    assert out[2].startswith(f"{post}:3: changed -> image, docker, server, model")
    assert out[4].startswith(f"{post}:5: taken -> image, docker, server, model")
    assert len(out) == len(post.read_text().split("\n"))


def test_json_gives_the_account_and_a_refusal_with_line_and_column(tmp_path, capsys) -> None:
    post = tmp_path / "p.md"
    post.write_text(LOST)
    assert main(["recipe", "import", str(post), "--json"]) == 2
    ledger = json.loads(capsys.readouterr().out)
    assert ledger["schema_version"] == LEDGER_SCHEMA_VERSION
    assert ledger["imported"] is False
    assert ledger["refusal"]["file"] == str(post)
    assert (ledger["refusal"]["line"], ledger["refusal"]["column"]) == (5, 3)
    assert ledger["lines"][4]["fate"] == "refused"


def test_a_refusal_naming_only_a_line_gets_the_column_of_its_first_word(tmp_path, capsys) -> None:
    number = "127"  # `FILE:4: NVIDIA NIM (nim) is not supported`
    assert main(["recipe", "import", str(POSTS / ENTRIES[number]["file"]), "--json"]) == 2
    refusal = json.loads(capsys.readouterr().out)["refusal"]
    assert (refusal["line"], refusal["column"]) == (4, 1)
    assert "NVIDIA NIM" in refusal["message"]


def test_an_image_built_by_the_post_is_refused_at_the_image_word(capsys) -> None:
    number = "009"  # the image of the `docker run` at line 9, written on its line 11
    assert main(["recipe", "import", str(POSTS / ENTRIES[number]["file"]), "--json"]) == 2
    refusal = json.loads(capsys.readouterr().out)["refusal"]
    assert (refusal["line"], refusal["column"]) == (11, 5)
    assert "built by `docker build`" in refusal["message"]


# --- placeholders in any argument ---


def test_a_placeholder_in_a_docker_option_or_server_flag_is_refused_naming_its_flag() -> None:
    post = "docker run --gpus all -v /path/to/models:/models vllm/vllm-openai:v0.9.0 --model /models/m\n"
    with pytest.raises(InputError) as caught:
        import_post([("p.md", post)])
    assert caught.value.message == (
        "p.md: line 1, column 26: /path/to/models is a placeholder (the value of -v); write its value, or give it: "
        "--fill '/path/to/models=VALUE'"
    )
    with pytest.raises(InputError) as caught:
        import_post([("p.md", "vllm serve org/m --served-model-name YOUR_MODEL_NAME\n")])
    assert "YOUR_MODEL_NAME is a placeholder (the value of --served-model-name)" in caught.value.message


def test_a_benchmark_with_a_placeholder_is_set_aside_saying_which() -> None:
    post = (
        "vllm serve org/m\n"
        "vllm bench serve --model org/m --dataset-name sharegpt --dataset-path <your data path>/file.json "
        "--num-prompts 10\n"
    )
    outcome = import_post([("p.md", post)], ImportOptions(image="vllm/vllm-openai:v0.9.0"))
    assert outcome.recipe.matrix is None or not outcome.recipe.matrix.cells()
    assert any("<your data path> is a placeholder (the value of --dataset-path)" in n for n in outcome.notes)
    assert outcome.lines[1].fate == "set aside" and "placeholder" in outcome.lines[1].why


# --- images: normalized names, `docker pull` as the post's choice ---


def test_a_built_image_is_recognized_however_its_tag_is_spelled() -> None:
    post = "docker build -t vllm-custom .\ndocker run --gpus all docker.io/library/vllm-custom:latest --model org/m\n"
    with pytest.raises(InputError) as caught:
        import_post([("p.md", post)], ImportOptions(kind="vllm"))
    assert "built by `docker build` (p.md:1 (tagged vllm-custom))" in caught.value.message


def test_a_build_shown_after_the_run_is_an_alternative_not_the_image() -> None:
    post = "docker run --gpus all vllm/vllm-openai:latest --model org/m\ndocker build . --tag vllm/vllm-openai\n"
    assert import_post([("p.md", post)]).recipe.image.reference == "vllm/vllm-openai:latest"


PULLS = """```
# H200
docker pull lmsysorg/sglang:dsv32

# MI350
docker pull lmsysorg/sglang:dsv32-rocm

# NPUs
docker pull lmsysorg/sglang:dsv32-a2
```
python -m sglang.launch_server --model deepseek-ai/DeepSeek-V3.2-Exp --tp 8 --dp 8 --enable-dp-attention
"""


def test_a_bare_launch_runs_in_the_image_the_post_pulls_for_h200() -> None:
    outcome = import_post([("p.md", PULLS)])
    assert outcome.recipe.image.reference == "lmsysorg/sglang:dsv32"
    assert any("lmsysorg/sglang:dsv32 is the one for an H200 (Hopper) node" in n for n in outcome.notes)


def test_several_pulls_that_do_not_say_their_hardware_are_refused_naming_them() -> None:
    post = "docker pull lmsysorg/sglang:v0.5.1\ndocker pull lmsysorg/sglang:v0.5.2\npython -m sglang.launch_server --model-path org/m\n"
    with pytest.raises(InputError) as caught:
        import_post([("p.md", post)])
    message = caught.value.message
    assert "pulls 2 sglang images (lmsysorg/sglang:v0.5.1 (p.md:1), lmsysorg/sglang:v0.5.2 (p.md:2))" in message
    assert "give --image REF" in message


# --- network-dependent environment ---


def test_a_bare_launch_naming_a_host_interface_gets_the_hosts_network() -> None:
    post = (
        "export NCCL_SOCKET_IFNAME=bond0\n"
        "GLOO_SOCKET_IFNAME=bond0 python3 -m sglang.launch_server --model-path org/m --tp 8 --port 30000\n"
    )
    outcome = import_post([("p.md", post)], ImportOptions(image="lmsysorg/sglang:v0.5.0"))
    docker = outcome.recipe.docker
    assert docker.last("--network") == "host" and docker.ports() == []
    assert {(e.name, e.value) for e in docker.env()} >= {
        ("NCCL_SOCKET_IFNAME", "bond0"),
        ("GLOO_SOCKET_IFNAME", "bond0"),
    }
    assert any("names a host network interface, so the container uses the host's network" in n for n in outcome.notes)


def test_a_posted_bridge_container_naming_a_host_interface_is_imported_as_written_with_a_note() -> None:
    post = "docker run --gpus all -p 8000:8000 -e NCCL_SOCKET_IFNAME=bond0 vllm/vllm-openai:v0.9.0 --model org/m\n"
    outcome = import_post([("p.md", post)])
    assert outcome.recipe.docker.last("--network") is None
    assert any("-e NCCL_SOCKET_IFNAME=bond0 names a host network interface" in n for n in outcome.notes)


def test_a_one_node_container_naming_rdma_devices_gets_no_note() -> None:
    post = "docker run --gpus all -p 8000:8000 -e NCCL_IB_HCA=mlx5_0 vllm/vllm-openai:v0.9.0 --model org/m\n"
    outcome = import_post([("p.md", post)])
    assert outcome.recipe.docker.last("--network") is None
    assert not any("names a host network interface" in n for n in outcome.notes)


# --- `docker run -itd` then `docker exec … LAUNCH` ---

ITD = """```
docker run -itd --gpus all --shm-size 32g --ipc=host -p 30000:30000 -v /data/models:/models --name sg \\
    lmsysorg/sglang:v0.5.2
docker exec -it -e SGLANG_X=1 sg python3 -m sglang.launch_server --model-path /models/Qwen3-8B --tp 2 --host 0.0.0.0
```
"""


def test_a_detached_container_and_an_exec_launch_are_one_container() -> None:
    outcome = import_post([("p.md", ITD)])
    recipe = outcome.recipe
    options = [" ".join(e.words) for e in recipe.docker.entries]
    assert options[:7] == [
        "-itd",
        "--gpus all",
        "--shm-size 32g",
        "--ipc=host",
        "-p 30000:30000",
        "-v /data/models:/models",
        "--name sg",
    ]
    assert "-e SGLANG_X=1" in options
    assert recipe.server.words()[:3] == ["python3", "-m", "sglang.launch_server"] and recipe.server.flag("--tp") == "2"
    assert [(a.line, a.fate) for a in outcome.lines[1:4]] == [(2, "taken"), (3, "taken"), (4, "changed")]


def test_a_detached_container_with_no_exec_launch_is_refused() -> None:
    with pytest.raises(InputError) as caught:
        import_post([("p.md", ITD.split("docker exec")[0])], ImportOptions(model_repo="Qwen/Qwen3-8B"))
    assert (
        "no serving command" in caught.value.message and "the post does not say what runs in it" in caught.value.message
    )


def test_an_exec_launch_into_a_container_the_post_does_not_start_is_refused() -> None:
    with pytest.raises(InputError) as caught:
        import_post([("p.md", "docker exec sg python3 -m sglang.launch_server --model-path org/m\n")])
    assert "`docker exec sg` runs the server in a container the post does not start" in caught.value.message


# --- `cd` is the base of later relative paths ---


def test_cd_is_the_base_of_relative_host_paths_and_a_bare_env_file_is_a_file() -> None:
    post = (
        "cd /srv/sglang\n"
        "docker run --gpus all --env-file docker.env -v ./cache:/cache -v hf-cache:/root/.cache/huggingface "
        "-p 30000:30000 lmsysorg/sglang:v0.5.2 python3 -m sglang.launch_server --model-path org/m --host 0.0.0.0\n"
    )
    outcome = import_post([("p.md", post)])
    options = [" ".join(e.words) for e in outcome.recipe.docker.entries]
    assert "--env-file /srv/sglang/docker.env" in options and "-v /srv/sglang/cache:/cache" in options
    assert "-v hf-cache:/root/.cache/huggingface" not in options  # a named volume (here the HF cache: dropped)
    assert outcome.lines[0].fate == "read"
    assert [r.action for r in outcome.report if r.where == "p.md:1"] == ["read"]  # once, not also "skipped"
    unbased = post.split("\n", 1)[1]  # no `cd`: the mount's host side is the node's working directory: refused
    with pytest.raises(
        InputError,
        match=r"^p\.md: line 1, column 48: --volume \./cache:/cache: the host side \./cache "
        r"is not a fixed directory \(a relative path .*\); write the absolute host directory$",
    ):
        import_post([("p.md", unbased)])
    notes = import_post([("p.md", unbased.replace("-v ./cache:/cache ", ""))]).notes  # the file: relative, said so
    assert any(note.startswith("dangerous option --env-file=docker.env: reads the host file") for note in notes)


# --- results stay with their benchmark command ---

SET_ASIDE = ENTRIES["106"]["file"]  # a benchmark with a /path/to/ dataset, its results printed under it
DATASET = "/path/to/ShareGPT_V3_unfiltered_cleaned_split.json"


def test_results_under_a_benchmark_set_aside_stay_with_it_and_the_exit_status_says_so(tmp_path, capsys) -> None:
    outcome = import_post([(SET_ASIDE, (POSTS / SET_ASIDE).read_text())])
    assert outcome.recipe.matrix is None and outcome.recipe.reference is None
    hint = f"line 5, column 89: {DATASET} is a placeholder (the value of --dataset-path); write its value, or give it: "
    hint += f"--fill '{DATASET}=VALUE'"
    assert outcome.set_aside == (
        f"{SET_ASIDE}:5: the benchmark command: {hint}",
        f"{SET_ASIDE}:6-21: the result block at lines 6-21 belongs to the benchmark command at line 5, set aside "
        f"with it: {hint}",
    )
    assert ("6-21", "skipped", f"result block: its command ({SET_ASIDE}:5) was set aside") in [
        (r.where.rsplit(":", 1)[1], r.action, r.what) for r in outcome.report
    ]
    out = tmp_path / "r.yaml"
    assert main(["recipe", "import", str(POSTS / SET_ASIDE), "-o", str(out)]) == 3  # written, a part set aside
    assert out.exists()
    assert "exit status 3" in capsys.readouterr().err
    assert main(["recipe", "import", str(POSTS / SET_ASIDE), "--json"]) == 3
    assert len(json.loads(capsys.readouterr().out)["set_aside"]) == 2


def test_the_fill_brings_in_the_benchmark_and_its_results() -> None:
    options = ImportOptions(fill=((DATASET, "/data/ShareGPT_V3_unfiltered_cleaned_split.json"),))
    outcome = import_post([(SET_ASIDE, (POSTS / SET_ASIDE).read_text())], options)
    assert outcome.set_aside == ()
    (cell,) = outcome.recipe.matrix.cells()
    (numbers,) = outcome.recipe.reference.cells
    assert (numbers.cell.id, numbers.ttft_mean_ms, cell.num_prompts) == (cell.id, 412.55, 100)


# --- results printed apart from their benchmark command ---


def _glm5_apart() -> list[tuple[str, str]]:
    """027 (the GLM-5 server) and 029 (its benchmarks) with 029's two result blocks moved into a file of their
    own, in the opposite order (as a reader pastes results separately)."""
    server = ENTRIES["027"]["file"]
    lines = (POSTS / ENTRIES["029"]["file"]).read_text().split("\n")
    commands = lines[:25] + lines[64:80]
    results = ["Throughput:", "```", *lines[81:119], "```", "", "Latency:", "```", *lines[26:64], "```"]
    return [
        (server, (POSTS / server).read_text()),
        ("bench.md", "\n".join(commands)),
        ("results.md", "\n".join(results)),
    ]


def test_results_printed_apart_join_the_benchmark_their_settings_match() -> None:
    outcome = import_post(_glm5_apart(), ImportOptions(pick=PICKS.get("027")))
    reference = outcome.recipe.reference
    assert reference is not None
    by_cell = {c.cell.id: c for c in reference.cells}
    assert set(by_cell) == {"1000x1", "1000x100"}
    assert by_cell["1000x1"].completed == 10 and by_cell["1000x1"].sources == ("results.md:45-82",)
    took = [r.line() for r in outcome.report if r.where.startswith("results.md") and r.action == "took"]
    assert took == [
        "results.md:3-40: took result block -> reference for cell 1000x100",
        "results.md:45-82: took result block -> reference for cell 1000x1",
    ]
    assert any(
        n.startswith("results.md:3-40: a result block printed apart; it belongs to the benchmark command at")
        for n in outcome.notes
    )


def test_results_printed_apart_that_fit_several_commands_are_refused_naming_them() -> None:
    files = _glm5_apart()
    latency = files[1][1].split("#### 5.1.2")[0]  # the concurrency-1 command, then the same with another seed
    again = latency.split("```bash", 1)[1].replace("--request-rate inf", "--request-rate inf \\\n  --seed 7")
    files[1] = ("bench.md", f"{latency}\n```bash{again}")
    files[2] = ("results.md", files[2][1].split("Latency:")[1])
    with pytest.raises(InputError) as caught:
        import_post(files, ImportOptions(pick=PICKS.get("027")))
    message = caught.value.message
    assert message.startswith("results.md:3-40: a result block printed apart from its benchmark command fits 2 of them")
    assert (
        "(bench.md:15 (cell 1000x1), bench.md:30 (cell 1000x1-out1000))" in message
        and "put it after the command it belongs to" in message
    )


def test_a_sentence_continuing_after_inline_code_is_not_a_lost_continuation() -> None:
    post = "- Serve it with `vllm serve org/m --port 8001`\n    --port is the one clients use.\n"
    outcome = import_post([("p.md", post)], ImportOptions(image="vllm/vllm-openai:v0.9.0"))
    assert outcome.recipe.server.flag("--port") == "8001"


def test_every_corpus_refusal_names_its_line_and_column_unless_the_post_has_no_server() -> None:
    unplaced = []
    for number, entry in sorted(ENTRIES.items()):
        if entry["expect"] != "refuse" or "gap" in entry:  # a gap's wrong refusal is recorded in the index
            continue
        with pytest.raises(ImportRefused) as caught:
            import_post([(entry["file"], (POSTS / entry["file"]).read_text())], ImportOptions(pick=PICKS.get(number)))
        refused = caught.value
        if refused.place is None:
            unplaced.append(number)
            assert "no serving command found" in refused.message, refused.message
        else:
            assert refused.place[0] == entry["file"] and refused.place[1] >= 1 and refused.place[2] >= 1
    # 055, 057, 063, 073, 139, 177, 198, 236, 240, 248, 282, 293, 302, 312, 316, 468 (a Vast.ai template's console
    # steps), 469 (a CoreWeave `helm install` of a chart whose values the post does not show), 484 (a Hugging Face model
    # card cut before its docker build: flags only as bullets, the image a table cell), 500 (a vLLM forum bot's answer
    # with `--tensor-parallel-size 8 --pipeline-parallel-size 12` in a prose line), 528 (an LWS pull request's review
    # threads: diff hunks of a LeaderWorkerSet whose vLLM container names an image and no command), 603, 604, 605 (web
    # pages in Vietnamese, Spanish and Japanese cut before any command), 608 (a model discussion's JSON `"command"` string
    # of arguments, no image, no program), 612 (a lone `--model=` line, the image only in the title), 620 (a DGX Spark
    # playbook for Hermes Agent cut where it points to another playbook), 621 (Open WebUI's vLLM page: the server
    # assumed running), 628 (AWS's SageMaker quick start: the launch is the container's SM_VLLM_* environment, given as
    # Python dicts), 633 (ALCF's PBS job of offline vLLM inference: `mpiexec … python ./mpi_llm_inference.py`, no
    # server), 643 (a NixOS module of vLLM instances that sets none), 644 (an Unraid template with an empty
    # PostArgs), 659 (AutoAWQ's vLLM example: an in-process `AsyncLLMEngine` in Python, no launch), 666 (a Packer
    # template whose provisioners only run install scripts not in the post), 676 (a Polish README linking the scripts
    # that launch vLLM), 677 (OpenClaw's pt-BR page on a vLLM provider: a client's config), 668 (a VM prep script
    # whose one launch is `… api_server --help`, an install check), 681 (a devcontainer.json whose image is built from a
    # Dockerfile the post does not show, its launch a postStartCommand), 703 (SpecForge's PR-test workflow: an SGLang
    # image as the job container, a unit test in it), 706 (AReaL's GCP-runner workflow: a container that only sleeps,
    # pytest on the runner), 707 (LightEval's workflow: vLLM installed from git main, pytest), 709 (open-instruct's
    # workflow: a Beaker job spec running pytest), 711 (vllm-gaudi's v0.19.1 release notes), 712 (InstructLab's v0.18
    # changelog, `ilab model serve` only inline in bullets), 710 and 714 (AWS's vLLM and SGLang image changelogs: `vllm
    # serve` only inline in a bullet), 718 (a Discourse
    # forum's answer naming `--tensor-parallel-size 2` in prose), 725 (a Q&A site's AI answer on "VLLM n_gpu", no
    # flag), 727 (a GitHub Container Registry page: a `docker pull` only), 730 (AWS's SGLang DLC page: an images
    # table, no launch), 734, 735, 736, 737, 739, 740 (engineers' blog posts cut before their launches: install steps,
    # hardware, a table of contents, ASCII diagrams, design math), 743 (Beam's VLLM integration: VLLMArgs keyword
    # arguments, no command), 746 (Cog-vLLM's cog.yaml: build steps, a Predictor), 747 (vLLM's Cerebrium page: the
    # offline `LLM` class in a `run` function), 748 (a RunPod Serverless worker's README: `docker build` with
    # placeholders, MODEL_NAME set in RunPod's UI), 749 (SaladCloud's SGLang recipe page: a Portal form's defaults as
    # bullets), 755 (AMD's Ukrainian vLLM playbook: only its `vllm-launch` wrapper), 760 (MLC's run-vllm-server
    # customize.py: an f-string api_server command built from MLC_* settings), 764 (Krai's MLPerf v5.0 measurements
    # README: `axs byquery` lines, AXS starts the servers itself), 766 (a Mac Studio deploy script whose
    # 'vLLM-MLX' is Apple's mlx_lm.server), 769 (a Danish README whose launch is `docker compose -f … up -d` of a file
    # not in the post), 771 (a Vast.ai launcher: vLLM's arguments as a bash array for `vastai create instance`), 784
    # (OpenRLHF's PPO training script: `--vllm.*` rollout engines, no server), 788 (LangChain's vLLM notebook: the
    # in-process VLLM class and a client only), 791 (AMD's Norwegian vLLM snippet: only its `vllm-launch` wrapper),
    # 794 and 797 (DB-GPT's Tamil README: doc links only; an HTML table of models), 796 (DeepThink's Bengali README:
    # `make start` of a Claude agent platform), 806 (a Korean velog post: a lone `--gpu-memory-utilization 0.7`
    # line, no command), 807 (a Japanese Qiita vLLM intro: Transformers generation in Python, no server), 818
    # (JarvisLabs' Serverless docs page: a dashboard product), 819 (Alibaba PAI-EAS's JSON deployment page: a
    # service.json running `python app.py`), 820 (Nebius' marketplace README for vLLM: a console install, kubectl
    # port-forward and curl), 821 (a DigitalOcean GPU Droplet guide cut before its commands), 827 (a Hugging Face
    # discussion of an RTX PRO 6000 source build, cut before its launch), 829 (a GB200 NVL72 pull request's
    # description: variable names and prose): nothing in the file serves
    assert len(unplaced) <= 80
