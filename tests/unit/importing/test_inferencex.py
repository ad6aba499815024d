"""`hgxkit recipe import CHECKOUT --entry KEY`: SemiAnalysis InferenceX entries as recipes, through the CLI, from
the suite's own files (tests/fixtures/inferencex, README.md there); the launch-script evaluator on its own."""

from __future__ import annotations

import doctest
import importlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hgxkit.cli import main
from hgxkit.errors import InputError
from hgxkit.importing.inferencex import cell_environment, read_entry, sweep_points
from hgxkit.importing.inferencex_recipes import entry_recipes
from hgxkit.importing.shell_branches import ShellScript
from hgxkit.importing.shell_values import Unknown, arithmetic
from hgxkit.importing.shell_values import test_value as decide_test
from hgxkit.kinds import posted_lengths
from hgxkit.recipe.read import load_recipe, parse_recipe_text
from hgxkit.recipe.spec import Recipe

ROOT = Path(__file__).resolve().parents[3]
CHECKOUT = ROOT / "tests" / "fixtures" / "inferencex"
SCRIPTS = CHECKOUT / "benchmarks" / "single_node" / "fixed_seq_len"
CLIENT = "InferenceX benchmark_serving.py (vLLM fork)"
HELPERS = ("check_env_vars", "start_gpu_monitor", "wait_for_server_ready", "run_benchmark_serving")
# dsr1_fp8_h200.sh's else branch (ISL 8192 / OSL 1024), as the post importer places the model.
DSR1_ARGS = [
    ("--model-path", "/models/DeepSeek-R1-0528"),
    ("--host", "0.0.0.0"),
    ("--port", "8888"),
    ("--trust-remote-code",),
    ("--tensor-parallel-size=8",),
    ("--data-parallel-size=1",),
    ("--disable-radix-cache",),
    ("--max-running-requests", "256"),
    ("--cuda-graph-max-bs", "256"),
    ("--chunked-prefill-size", "32768"),
    ("--max-prefill-tokens", "32768"),
    ("--mem-fraction-static", "0.82"),
    ("--attention-backend", "flashinfer"),
    ("--stream-interval", "10"),
    ("--decode-log-interval", "1"),
    ("--served-model-name", "deepseek-ai/DeepSeek-R1-0528"),
]


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["recipe", "import", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def imported(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[Recipe, str]:
    code, out, err = run(argv, capsys)
    assert code == 0, err
    return parse_recipe_text(out, source="stdout"), err


def copy_checkout(tmp_path: Path, edit: dict[str, str] | None = None) -> Path:
    """The fixture checkout copied, with `edit` (old text -> new text) applied to configs/nvidia-master.yaml."""
    checkout = tmp_path / "InferenceX"
    shutil.copytree(CHECKOUT, checkout)
    config = checkout / "configs" / "nvidia-master.yaml"
    text = config.read_text()
    for old, new in (edit or {}).items():
        assert old in text
        text = text.replace(old, new, 1)
    config.write_text(text)
    return checkout


def args_of(recipe: Recipe) -> list[tuple[str, ...]]:
    return [tuple(entry) for entry in recipe.server.args]


# --- the Done-when cases ---


def test_dsr1_sglang_is_one_recipe_with_the_else_branch_flags_and_five_cells(
    capsys: pytest.CaptureFixture[str],
) -> None:
    recipe, err = imported([str(CHECKOUT), "--entry", "dsr1-fp8-h200-sglang"], capsys)
    assert recipe.name == "dsr1-fp8-h200-sglang"
    assert recipe.image.reference == "lmsysorg/sglang:v0.5.12-cu130"
    assert recipe.model.repo_id == "deepseek-ai/DeepSeek-R1-0528"
    assert recipe.server.kind == "sglang"
    assert recipe.server.program == ("python3", "-m", "sglang.launch_server")
    assert args_of(recipe) == DSR1_ARGS
    assert [e.name for e in recipe.docker.env()] == ["TORCH_CUDA_ARCH_LIST", "PYTHONNOUSERSITE"]
    cells = recipe.matrix.cells()
    assert [c.id for c in cells] == [f"8192x1024-c{c}" for c in (4, 8, 16, 32, 64)]
    for cell, conc in zip(cells, (4, 8, 16, 32, 64), strict=True):
        assert (cell.input_len, cell.output_len, cell.concurrency, cell.num_prompts, cell.warmups) == (
            8192,
            1024,
            conc,
            10 * conc,
            2 * conc,
        )
        assert (cell.dataset, cell.range_ratio, cell.client, cell.backend) == ("random", 0.8, CLIENT, "vllm")
        assert cell.extra_args == ()  # SGLang's client ignores EOS by default; --ignore-eos is no flag of its
        assert cell.request_rate is None
        assert cell.source == "configs/nvidia-master.yaml:14"
    assert "dsr1-fp8-h200-sglang (configs/nvidia-master.yaml:1)" in recipe.source.notes
    assert "(not a git checkout)" in recipe.source.notes
    assert "benchmarks/single_node/fixed_seq_len/dsr1_fp8_h200.sh" in recipe.source.notes
    assert "took `python3 -m sglang.launch_server`" in err


def test_dsv4_vllm_is_two_recipes_of_nine_cells_each_with_their_own_parallel_flags(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run([str(CHECKOUT), "--entry", "dsv4-fp8-h200-vllm", "-o", f"{tmp_path}/"], capsys)
    assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "dsv4-fp8-h200-vllm-tp8-ep8-dpa.yaml",
        "dsv4-fp8-h200-vllm-tp8.yaml",
    ]
    tp8 = load_recipe(tmp_path / "dsv4-fp8-h200-vllm-tp8.yaml")
    dpa = load_recipe(tmp_path / "dsv4-fp8-h200-vllm-tp8-ep8-dpa.yaml")
    ids = [f"8192x1024-c{c}" for c in (1, 2, 4, 8, 16, 32, 64, 128, 256)]
    assert [c.id for c in tp8.matrix.cells()] == ids
    assert [c.id for c in dpa.matrix.cells()] == ids
    assert tp8.image.reference == dpa.image.reference == "vllm/vllm-openai:v0.25.1"
    assert ("--tensor-parallel-size", "8") in args_of(tp8)
    assert ("--data-parallel-size", "1") in args_of(tp8)
    assert ("--enable-expert-parallel",) not in args_of(tp8)
    assert ("--tensor-parallel-size", "1") in args_of(dpa)
    assert ("--data-parallel-size", "8") in args_of(dpa)
    assert ("--enable-expert-parallel",) in args_of(dpa)
    # everything else is the same command
    others = [a for a in args_of(tp8) if a[0] not in ("--tensor-parallel-size", "--data-parallel-size")]
    assert [a for a in args_of(dpa) if a[0] not in ("--tensor-parallel-size", "--data-parallel-size")] == [
        *others[:7],
        ("--enable-expert-parallel",),
        *others[7:],
    ]
    assert ("--max-model-len", "9472") in args_of(tp8)  # MAX_MODEL_LEN = ISL + OSL + 256, through $MAX_MODEL_LEN_ARG
    assert tp8.matrix.cells()[0].extra_args == ("--ignore-eos", "--trust-remote-code")
    # the client's name reads as the old benchmark_serving.py's [R x L, L], which verify draws alike with vLLM's
    assert posted_lengths(tp8.matrix.cells()[0].client).name == "share"
    assert [e.name for e in tp8.docker.env()] == ["VLLM_ENGINE_READY_TIMEOUT_S"]
    assert "wrote" in err and "dsv4-fp8-h200-vllm-tp8-ep8-dpa" in err


def test_several_configurations_to_stdout_or_one_file_are_refused_naming_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    message = (
        "hgxkit: error: dsv4-fp8-h200-vllm: 2 configurations, each its own server command (1: tp8 (9 cells); "
        "2: tp8-ep8-dpa (9 cells)); choose one with --pick N, or write each with -o DIR/\n"
    )
    for extra in ([], ["-o", str(tmp_path / "one.yaml")]):
        code, out, err = run([str(CHECKOUT), "--entry", "dsv4-fp8-h200-vllm", *extra], capsys)
        assert (code, out, err) == (2, "", message)
    assert list(tmp_path.iterdir()) == []


def test_pick_takes_one_configuration(capsys: pytest.CaptureFixture[str]) -> None:
    recipe, _ = imported([str(CHECKOUT), "--entry", "dsv4-fp8-h200-vllm", "--pick", "2"], capsys)
    assert recipe.name == "dsv4-fp8-h200-vllm-tp8-ep8-dpa"
    assert ("--data-parallel-size", "8") in args_of(recipe)
    code, _, err = run([str(CHECKOUT), "--entry", "dsv4-fp8-h200-vllm", "--pick", "3"], capsys)
    assert code == 2
    assert err == (
        "hgxkit: error: --pick 3: dsv4-fp8-h200-vllm has 2 configuration(s) (1: tp8 (9 cells); 2: tp8-ep8-dpa "
        "(9 cells))\n"
    )


def test_a_flag_set_from_the_concurrency_gives_a_recipe_per_concurrency(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run([str(CHECKOUT), "--entry", "qwen3.5-fp8-h200-sglang", "-o", str(tmp_path)], capsys)
    assert code == 0, err
    for conc in (4, 8, 16, 32, 64):
        recipe = load_recipe(tmp_path / f"qwen3.5-fp8-h200-sglang-tp8-ep8-c{conc}.yaml")
        assert ("--cuda-graph-max-bs", str(conc)) in args_of(recipe)  # `--cuda-graph-max-bs "$CONC"`
        assert ("--context-length", "9236") in args_of(recipe)  # MAX_SEQ_LEN=$((ISL + OSL + 20))
        assert [c.id for c in recipe.matrix.cells()] == [f"8192x1024-c{conc}"]


def test_the_framework_named_script_is_taken_first(capsys: pytest.CaptureFixture[str]) -> None:
    entry = read_entry(CHECKOUT, "dsv4-fp8-h200-sglang")
    assert {c.script for c in entry.configurations} == {"benchmarks/single_node/fixed_seq_len/dsv4_fp8_h200_sglang.sh"}
    # `--max-running-requests "$(( CONC * 3 / 2 > 8 ? CONC * 3 / 2 : 8 ))"`: c1 and c4 share 8
    made = entry_recipes(CHECKOUT, "dsv4-fp8-h200-sglang")
    assert [(m.label, [p.conc for p in m.points], m.recipe.server.flag("--max-running-requests")) for m in made] == [
        ("tp8-c1-c4", [1, 4], "8"),
        ("tp8-c8", [8], "12"),
        ("tp8-c16", [16], "24"),
        ("tp8-c32", [32], "48"),
        ("tp8-c64", [64], "96"),
    ]


def test_the_if_branch_is_taken_for_1k1k(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    checkout = copy_checkout(tmp_path, {"    - isl: 8192\n      osl: 1024\n": "    - isl: 1024\n      osl: 1024\n"})
    recipe, _ = imported([str(checkout), "--entry", "dsr1-fp8-h200-sglang"], capsys)
    assert ("--max-running-requests", "512") in args_of(recipe)
    assert ("--cuda-graph-max-bs", "512") in args_of(recipe)
    assert [c.id for c in recipe.matrix.cells()][:2] == ["1024x1024-c4", "1024x1024-c8"]
    assert recipe.matrix.cells()[0].input_len == 1024


def test_a_run_time_pip_install_is_a_note(capsys: pytest.CaptureFixture[str]) -> None:
    _, err = imported([str(CHECKOUT), "--entry", "dsr1-fp8-h200-sglang"], capsys)
    assert (
        "note: benchmarks/single_node/fixed_seq_len/dsr1_fp8_h200.sh:18: `pip3 install --user --break-system-packages "
        "sentencepiece` installs packages when the script runs; an air-gapped node cannot run it, and the recipe "
        "does not: bake them into the image"
    ) in err


def test_a_git_checkout_names_its_commit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    checkout = copy_checkout(tmp_path)
    commit = "843c6254ff69b567f772f6a5fd97675af3d04431"
    (checkout / ".git" / "refs" / "heads").mkdir(parents=True)
    (checkout / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (checkout / ".git" / "refs" / "heads" / "main").write_text(commit + "\n")
    recipe, _ = imported([str(checkout), "--entry", "dsr1-fp8-h200-sglang"], capsys)
    assert recipe.source.notes.startswith("SemiAnalysis InferenceX checkout at commit 843c6254ff69; entry")
    (checkout / ".git" / "refs" / "heads" / "main").unlink()
    (checkout / ".git" / "packed-refs").write_text(f"# pack-refs with: peeled\n{commit} refs/heads/main\n")
    assert read_entry(checkout, "dsr1-fp8-h200-sglang").commit == commit


# --- refusals ---


@pytest.mark.parametrize(
    ("key", "message"),
    [
        (
            "dsr1-fp8-h200-trt",
            "configs/nvidia-master.yaml:84: dsr1-fp8-h200-trt: framework trt (TensorRT-LLM) is not served by hgxkit, "
            "which serves SGLang and vLLM: pick an entry whose framework is sglang or vllm",
        ),
        (
            "dsr1-fp8-h200-dynamo-sglang",
            "configs/nvidia-master.yaml:102: dsr1-fp8-h200-dynamo-sglang: framework dynamo-sglang (NVIDIA Dynamo) is "
            "not served by hgxkit, which serves SGLang and vLLM: pick an entry whose framework is sglang or vllm",
        ),
        (
            "qwen3.5-fp8-h200-sglang-agentic-mtp",
            "configs/nvidia-master.yaml:279: qwen3.5-fp8-h200-sglang-agentic-mtp: scenario agentic-coding (framework "
            "sglang) is not imported: hgxkit imports an entry's fixed-seq-len sweep (an agentic run replays traces "
            "with the suite's own harness); pick an entry with one",
        ),
        (
            "dsr1-fp4-mi355x-sglang",
            "configs/amd-master.yaml:1: dsr1-fp4-mi355x-sglang: an AMD entry (configs/amd-master.yaml, runner mi355x, "
            "framework sglang); hgxkit serves NVIDIA HGX-H200 nodes: pick an entry of configs/nvidia-master.yaml",
        ),
    ],
)
def test_entries_hgxkit_does_not_serve_are_refused_by_name(
    key: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run([str(CHECKOUT), "--entry", key], capsys) == (2, "", f"hgxkit: error: {message}\n")


def test_an_entry_of_the_amd_file_or_on_an_amd_runner_is_refused(tmp_path: Path) -> None:
    checkout = copy_checkout(tmp_path, {"dsr1-fp8-h200-trt:\n  image": "dsr1-fp8-h200-trt:\n  image"})
    amd = checkout / "configs" / "amd-master.yaml"
    amd.write_text(amd.read_text().replace("runner: mi355x", "runner: h200"))
    with pytest.raises(InputError, match=r"amd-master\.yaml:1: dsr1-fp4-mi355x-sglang: an AMD entry"):
        read_entry(checkout, "dsr1-fp4-mi355x-sglang")
    nvidia = checkout / "configs" / "nvidia-master.yaml"
    nvidia.write_text(nvidia.read_text().replace("  runner: h200\n", "  runner: mi300x\n", 1))
    with pytest.raises(InputError, match=r"nvidia-master\.yaml:1: dsr1-fp8-h200-sglang: an AMD entry"):
        read_entry(checkout, "dsr1-fp8-h200-sglang")


def test_a_multinode_entry_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    checkout = copy_checkout(
        tmp_path, {"  framework: sglang\n  multinode: false": "  framework: sglang\n  multinode: true"}
    )
    code, _, err = run([str(checkout), "--entry", "dsr1-fp8-h200-sglang"], capsys)
    assert (code, err) == (
        2,
        "hgxkit: error: configs/nvidia-master.yaml:1: dsr1-fp8-h200-sglang: a multinode entry (framework sglang, "
        "runner h200); a hgxkit recipe is one server on one node: pick a single-node entry\n",
    )


def test_an_unknown_entry_names_the_nearest_keys(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run([str(CHECKOUT), "--entry", "dsr1-fp8-h200-sglng"], capsys)
    assert (code, err) == (
        2,
        f"hgxkit: error: {CHECKOUT}: no entry 'dsr1-fp8-h200-sglng' in configs/nvidia-master.yaml or "
        "configs/amd-master.yaml; nearest: dsr1-fp8-h200-sglang, dsr1-fp8-h200-sglang-mtp, dsv4-fp8-h200-sglang\n",
    )


def test_entry_needs_one_checkout_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run([str(tmp_path), "--entry", "dsr1-fp8-h200-sglang"], capsys)
    assert (code, err) == (
        2,
        f"hgxkit: error: {tmp_path}: no configs/nvidia-master.yaml; give the root of a checkout of the SemiAnalysis "
        "InferenceX repository with --entry\n",
    )
    assert run([str(CHECKOUT)], capsys) == (
        2,
        "",
        f"hgxkit: error: {CHECKOUT}: a directory; give a post's file, or an InferenceX checkout with --entry KEY\n",
    )
    code, _, err = run([str(CHECKOUT), str(CHECKOUT), "--entry", "dsr1-fp8-h200-sglang"], capsys)
    assert code == 2 and "give one directory" in err
    code, _, err = run([str(CHECKOUT), "--entry", "dsr1-fp8-h200-sglang", "--explain"], capsys)
    assert (code, err) == (
        2,
        "hgxkit: error: --explain is not available with --entry (its lines would be the rendered script's; the notes "
        "name the suite's own lines)\n",
    )
    code, _, err = run([str(CHECKOUT), "--entry", "dsr1-fp8-h200-sglang", "--kind", "vllm"], capsys)
    assert (code, err) == (
        2,
        "hgxkit: error: --kind is not available with --entry (the entry's framework is its kind)\n",
    )


def test_an_existing_output_is_kept_without_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "dsr1.yaml"
    out.write_text("mine\n")
    code, _, err = run([str(CHECKOUT), "--entry", "dsr1-fp8-h200-sglang", "-o", str(out)], capsys)
    assert (code, out.read_text()) == (2, "mine\n")
    code, _, err = run([str(CHECKOUT), "--entry", "dsr1-fp8-h200-sglang", "-o", str(out), "--force"], capsys)
    assert code == 0, err
    assert load_recipe(out).name == "dsr1-fp8-h200-sglang"


def test_a_script_construct_outside_the_subset_is_refused_with_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    checkout = copy_checkout(tmp_path)
    script = checkout / "benchmarks" / "single_node" / "fixed_seq_len" / "dsr1_fp8_h200.sh"
    lines = script.read_text().split("\n")
    lines[33] = 'case "$ISL" in 1024) X=1 ;; esac'  # line 34, `set -x` in the suite's file
    script.write_text("\n".join(lines))
    code, _, err = run([str(checkout), "--entry", "dsr1-fp8-h200-sglang"], capsys)
    assert (code, err) == (
        2,
        "hgxkit: error: benchmarks/single_node/fixed_seq_len/dsr1_fp8_h200.sh:34: `case`; hgxkit reads a launch "
        "script without running it (if/elif/else on [[ ]] or [ ] tests, arrays, ${X:-d}, $((…))): import the "
        "command it runs as a post instead\n",
    )


# --- the sweep, against the suite's own expansion ---


def test_the_sweep_matches_generate_sweep_configs_for_every_fixture_entry(tmp_path: Path) -> None:
    """The suite's utils/matrix_logic/generate_sweep_configs.py (copied in the fixture, run offline on a copy)
    expands every single-node fixed-seq-len entry into the same cells, with the same MAX_MODEL_LEN and EXP_NAME."""
    suite = tmp_path / "InferenceX"
    shutil.copytree(CHECKOUT, suite)
    entries = yaml.safe_load((CHECKOUT / "configs" / "nvidia-master.yaml").read_text())
    keys = [k for k, v in entries.items() if not v["multinode"] and "fixed-seq-len" in v["scenarios"]]
    assert keys == [
        "dsr1-fp8-h200-sglang",
        "dsr1-fp8-h200-sglang-mtp",
        "dsv4-fp8-h200-vllm",
        "dsv4-fp8-h200-sglang",
        "qwen3.5-fp8-h200-sglang",
        "dsr1-fp8-h200-trt",
    ]
    command = [
        sys.executable,
        "utils/matrix_logic/generate_sweep_configs.py",
        "test-config",
        "--config-files",
        "configs/nvidia-master.yaml",
        "--no-evals",
        "--config-keys",
    ]
    for key in keys:
        done = subprocess.run([*command, key], cwd=suite, capture_output=True, text=True, timeout=120, check=True)
        names = ("isl", "osl", "tp", "pp", "dcp-size", "pcp-size", "ep", "dp-attn", "spec-decoding", "conc")
        theirs = [(*(c[n] for n in names), c["max-model-len"], c["exp-name"]) for c in json.loads(done.stdout)]
        entry = entries[key]
        fields = {"model": entry["model"], "model-prefix": entry["model-prefix"]}
        fields |= {"precision": entry["precision"], "image": entry["image"]}
        ours = []
        for p in sweep_points(entry["scenarios"]["fixed-seq-len"]):
            env = cell_environment(fields, entry["framework"], entry["runner"], p)
            cell = (p.isl, p.osl, p.tp, p.pp, p.dcp, p.pcp, p.ep, p.dp_attn, p.spec, p.conc)
            ours.append((*cell, int(env["MAX_MODEL_LEN"]), env["EXP_NAME"]))
        assert ours == theirs, key


def test_conc_end_caps_the_doubling_and_conc_list_is_taken_as_written() -> None:
    fixed = [{"isl": 1024, "osl": 1024, "search-space": [{"tp": 4, "conc-start": 4, "conc-end": 48}]}]
    assert [p.conc for p in sweep_points(fixed)] == [4, 8, 16, 32, 48]
    fixed = [{"isl": 1024, "osl": 1024, "search-space": [{"tp": 4, "conc-list": [3, 1, 200]}]}]
    assert [p.conc for p in sweep_points(fixed)] == [3, 1, 200]
    with pytest.raises(InputError, match=r"c\.yaml:7: color: not a setting hgxkit knows the suite to read"):
        sweep_points([{"isl": 1, "osl": 1, "search-space": [{"tp": 1, "color": "red"}]}], [[7]], "c.yaml")


# --- the launch-script evaluator ---


def render(text: str, **env: str) -> str:
    return ShellScript.parse(text, "s.sh").render(env, HELPERS, "benchmark_lib.sh").text


def kept(text: str, **env: str) -> list[tuple[int, str]]:
    return [(n, line.strip()) for n, line in enumerate(render(text, **env).split("\n"), 1) if line.strip()]


def test_the_dsr1_script_takes_its_if_branch_for_1k1k_and_its_else_branch_otherwise() -> None:
    script = ShellScript.parse((SCRIPTS / "dsr1_fp8_h200.sh").read_text(), "dsr1_fp8_h200.sh")
    env = {"MODEL": "org/m", "TP": "8", "CONC": "4", "OSL": "1024", "PORT": "8888", "RUN_EVAL": "false"}
    env["EVAL_ONLY"] = "false"
    short = script.render({**env, "ISL": "1024"}, HELPERS, "benchmark_lib.sh").text.split("\n")
    long = script.render({**env, "ISL": "8192"}, HELPERS, "benchmark_lib.sh").text.split("\n")
    assert short[38].strip().startswith("--disable-radix-cache --max-running-requests 512 --cuda-graph-max-bs 512")
    assert long[38] == ""
    assert long[47].strip().startswith("--disable-radix-cache --max-running-requests 256 --cuda-graph-max-bs 256")
    assert short[0] == long[0] == "MODEL=org/m; TP=8; PORT=8888"


def test_arrays_defaults_and_arithmetic_are_written_out() -> None:
    text = (
        'A=(--tp "$TP")\n'
        'if [ "${EP_SIZE:-1}" -gt 1 ]; then\n'
        "  A+=(--enable-expert-parallel)\n"
        "fi\n"
        "E=()\n"
        "S=''\n"
        'serve "${A[@]}" "${E[@]}" $S --n $((CONC * 3 / 2)) --ep ${EP_SIZE:-1} --m $MODEL\n'
    )
    assert kept(text, TP="8", CONC="5", MODEL="org/m") == [
        (1, "MODEL=org/m"),
        (7, "serve --tp 8   --n 7 --ep 1 --m $MODEL"),
    ]
    assert kept(text, TP="8", CONC="5", EP_SIZE="8", MODEL="org/m")[1] == (
        7,
        "serve --tp 8 --enable-expert-parallel   --n 7 --ep 8 --m $MODEL",
    )


def test_a_value_of_several_words_is_split_as_bash_splits_it() -> None:
    text = 'ARGS="--a 1  --b"\nQ="x y"\nserve $ARGS "$Q" --c=$ARGS\n'
    assert kept(text) == [(3, "serve --a 1 --b 'x y' --c=--a 1 --b")]


def test_an_undecidable_branch_that_only_echoes_is_set_aside_and_one_that_sets_a_flag_is_refused() -> None:
    text = 'if [[ -n "$SLURM_JOB_ID" ]]; then\n  echo "on $SLURMD_NODENAME"\nfi\nserve --a 1\n'
    assert kept(text) == [(4, "serve --a 1")]
    script = ShellScript.parse('if [[ -n "$SLURM_JOB_ID" ]]; then\n  X=1\nfi\nserve --a $X\n', "s.sh")
    with pytest.raises(InputError) as refused:
        script.render({})
    assert refused.value.message.startswith(
        "s.sh:1: which branch runs depends on $SLURM_JOB_ID is not known before the script runs; hgxkit reads"
    )


@pytest.mark.parametrize(
    ("text", "line", "what"),
    [
        ("serve\nfor x in 1 2; do echo $x; done\n", 2, "a `for` loop"),
        ("serve\nwhile true; do sleep 1; done\n", 2, "a `while` loop"),
        ("f() {\n  serve\n}\n", 1, "a function definition or subshell"),
        ("serve\n(cd /x && serve)\n", 2, "a subshell `( … )`"),
        ("cat > c.yaml <<EOF\na: 1\nEOF\n", 1, "a here-document"),
        (
            "N=$(nproc)\nserve --n $N\n",
            2,
            "`$N` uses $N, set at line 1 from $(nproc), a value only running the script gives",
        ),
        ('serve --n "$(nproc)"\n', 1, '`"$(nproc)"` uses $(nproc), a value only running the script gives'),
        (
            "PID=$!\nserve --pid $PID\n",
            2,
            "`$PID` uses $PID, set at line 1 from $!, a value only running the script gives",
        ),
        ("serve --n $1\n", 1, "`$1` uses $1, a value only running the script gives"),
        ("if [[ $ISL -eq 1 ]]; then\n  exit 1\nfi\n", 2, "`exit` stops the script on the path this run takes"),
        ("source other.sh\n", 1, "`source`"),
    ],
)
def test_what_the_evaluator_does_not_resolve_is_refused_with_its_line(text: str, line: int, what: str) -> None:
    with pytest.raises(InputError) as refused:
        ShellScript.parse(text, "s.sh").render({"ISL": "1"})
    assert refused.value.message.startswith(f"s.sh:{line}: {what}; hgxkit reads a launch script without running it")


def test_an_assignment_from_a_command_substitution_refuses_only_where_it_is_used() -> None:
    assert kept("N=$(nproc)\necho $N\nserve --a 1\n") == [(3, "serve --a 1")]
    assert re.fullmatch(r"\s*", render("SERVER_PID=$!\nwait_for_server_ready --server-pid $SERVER_PID\n"))


@pytest.mark.parametrize("name", ["shell_values", "shell_branches", "inferencex", "inferencex_recipes"])
def test_docstring_examples(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # examples read tests/fixtures/inferencex
    result = doctest.testmod(importlib.import_module(f"hgxkit.importing.{name}"), optionflags=doctest.ELLIPSIS)
    assert (result.failed, result.attempted > 0) == (0, True)


def test_arithmetic_overflows_as_bashs_and_hostile_expressions_are_unknown() -> None:
    for expression in ("9223372036854775807 + 1", "99999999999 * 99999999999", "99999999999999999999"):
        bash = subprocess.run(["bash", "-c", f"echo $(({expression}))"], capture_output=True, text=True, check=True)
        assert str(arithmetic(expression, {})) == bash.stdout.strip(), expression  # 64 bits, two's complement
    hostile = ["(" * 3000 + "1" + ")" * 3000, "9" * 5000]
    for expression in hostile:
        with pytest.raises(Unknown):
            arithmetic(expression, {})
    for words in (["[[", "9" * 5000, "-eq", "1", "]]"], ["[", *["!"] * 5000, "x", "]"], ["[[", *["("] * 3000, "x"]):
        with pytest.raises(Unknown):
            decide_test(words, {})
