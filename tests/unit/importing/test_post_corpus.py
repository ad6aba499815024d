"""The real-post corpus (tests/fixtures/posts, index.yaml): every snippet is imported or refused as the index says.

An imported `docker run` renders to the argv a real `sh` gives for the post's own command, `~` and `$VAR`
included, but for the changes the importer documents in a note: a secret's value becomes a reference, the
model is placed (flag rewritten, mount and served name added), the ranks of a multi-node server are rendered
per host. A bare launch is a translation, so for those the translation itself is asserted. A refusal is one
line that names the file and what the index says the reason is.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import shlex
from itertools import pairwise
from pathlib import Path

import pytest
import yaml

from hgxkit.errors import InputError
from hgxkit.importing.importer import ImportOptions, import_post
from hgxkit.importing.outcome import ImportOutcome
from hgxkit.importing.typography import normalise
from hgxkit.recipe.dump import dump_recipe
from hgxkit.recipe.read import parse_recipe_text
from hgxkit.recipe.render import RenderedGroup, render_recipe
from hgxkit.recipe.spec import Recipe

POSTS = Path(__file__).resolve().parents[2] / "fixtures" / "posts"
INDEX = yaml.safe_load((POSTS / "index.yaml").read_text())
ENTRIES = {entry["file"][:3]: entry for entry in INDEX}
ENV = {"PATH": "/usr/bin:/bin", "HOME": "/home/poster", "HF_TOKEN": "host-token"}

# Posts that show alternative setups: the index says "take the first or ask"; import refuses until --pick says.
PICKS = {
    "011": 1,  # Llama-4 Scout, then Maverick
    "021": 1,  # five variants; the first is TP8+EP on CUDA, the H200 one
    "024": 1,  # BF16, then FP8 on DP8
    "046": 1,  # the same rank-0 command twice, the second with --log-level=debug
    "047": 1,  # attention backend fa3, then flashinfer
    "061": 1,  # TP4, then TP4 x PP2
    "075": 1,  # Qwen3-VL TP4 on GPUs 0-3, then gpt-oss TP2 on 4,5 and SigLIP2 DP2 on 6,7 (third-party image)
}
PICKS.update({number: entry["pick"] for number, entry in ENTRIES.items() if "pick" in entry})

# What each refusal must name: the reason the index gives after "Refuse:".
REFUSALS = {
    "009": "built by `docker build`",  # a locally built image
    "010": "<model> is a placeholder",  # the model is `<model>` (and the post is AMD MI100)
    "014": "Windows path",  # -v I:\AI-Chat\models\Deepseek:/models
    "016": "line 2, column 1: '12f0'",  # the wrapped NCCL_SOCKET_IFNAME value breaks the command
    "017": "no server entrypoint",  # the image is followed by flags only
    "018": "pass --kind",  # a third-party image: which server it runs is unknown
    "020": "Huawei Ascend",  # HCCL_* exports
    "023": "no serving command",  # benchmark only
    "025": "no serving command",  # benchmark only
    "026": "$DTYPE is set inside an `if` block",  # the model name depends on shell logic
    "029": "no serving command",  # benchmark only (its server is 027)
    "030": "the container runs `bash`",  # container setup only
    "031": "AMD ROCm",  # the container the commands run in is a ROCm image
    "032": "TGI",
    "033": "TGI",
    "034": "TGI",
    "035": "TGI",
    "036": "TGI",
    "037": "TGI",
    "038": "NVIDIA NIM",
    "039": "NVIDIA NIM",
    "040": "NVIDIA NIM",
    "041": "NVIDIA NIM",
    "049": "no serving command",  # benchmark only
    "050": "LMDeploy",  # three engines compared
    "055": "no serving command",  # genai-perf only
    "056": "TensorRT-LLM",
    "057": "no serving command",  # results only
    "058": "Ollama",
    "059": "llama.cpp",
    "060": "line 10, column 17: <HEAD_NODE_IP> is a placeholder",  # run_cluster.sh <HEAD_NODE_IP> --head
    "063": "no serving command",  # a results table only
    "069": "16 GPUs",  # TP16 over a Ray cluster (and the model is the placeholder `xxx`)
    "073": "no serving command",  # docker ps / docker logs only
    "074": "no serving command",  # benchmark in docker exec only
}
# Newer posts say it in the index: `refusal:` is the text the one-line refusal must hold.
REFUSALS.update({number: entry["refusal"] for number, entry in ENTRIES.items() if "refusal" in entry})

# How the post's lines become the command a shell runs, where the post wraps it in something that is not shell.
PROMPTS = {
    "007": r"^\$ ",  # `$ ` prompt
    "015": r"^\[root@node1 ~\]# ",
    "136": r"^\(vllm\) cheng@cheng:~\$ ",
    "252": r"^\(qwen25vl\) lzh@instance-aw1rhmsz-5:~/Code/qwen2_5vl\$ ",
    "350": r"^\(llama-factory\) root@cdss-server13:/home/szs# ",
    "354": r"^ExecStart=",  # a systemd unit: ExecStart= runs the rest
    "377": r"`",  # inline code over one long line
    "381": r"^mike@euroeval:/project# ",
    "607": r"^root@8bcffee8e088:/vllm-workspace# ",  # a root prompt inside the vllm/vllm-openai container
    "387": r"^`|`$",  # inline code over one line
    "404": r"^command=",  # a supervisord program: command= runs the rest
    "417": r"^```|```$",  # inline code between triple backticks on one line
    "046": r"```,?",  # the command is written inline between ``` fences
    "091": r"`",  # the command is inline code
    "051": r"^> ",  # a quoted reply: every line starts with `> `
    "383": r"^> ",  # a quoted reply, as 051
    "054": r"^\$|^> ",  # `$docker …` and PS2 `> ` continuation lines
    "162": r"^ENTRYPOINT ",  # a Dockerfile's shell-form ENTRYPOINT: /bin/sh -c runs the rest
    "185": r"^command：`|`$",  # inline code after a full-width colon
    "202": r"^root@srv-ia-010:/var/tmp# ",
    "203": r"`",  # inline code, closed on the next line
    "228": r"^uv run ",  # uv runs the launch in the project's environment (a note of the import)
    "647": r"^uvx ",  # uv runs the launch in a tool environment (a note of the import)
    "230": r"`",  # inline code
    "296": r"`",  # inline code
    "330": r"^`|`$",  # one inline code span over several lines
    "365": r"^`|`$",  # one inline code span over several lines
    "245": r"^`|`$",  # inline code after a full-width colon
    "475": r"^`|`$",  # one inline code span on a line of its own
    "448": r"^\$ docker container stop vllm; docker container rm vllm; ",  # a `$ ` prompt, then clean-up skipped
    "490": r"^ExecStart=",  # a systemd unit, as 354
    "640": r"^ExecStart=",  # a systemd unit, as 354 (after an editor command line, skipped as prose)
    "645": r"^ExecStart=",  # a systemd unit, as 354 (a commented-out #ExecStart= before it)
    "667": r"^ExecStart=",  # a systemd unit written by a script's here-document, as 354
    "700": r"^ExecStart=",  # a systemd unit in an ini fence after `sudo nano`, as 354
    "535": r"^Command: ",  # a prose label before the launch on its line
    "495": r"^ENTRYPOINT ",  # a Dockerfile's shell-form ENTRYPOINT, as 162
    "519": r"^> root@ad0cfc852c36:/sgl-workspace/sglang# ",  # a quoted reply's container root prompt
    "555": r"^`|` $",  # inline code over one line, a space after the closing backtick
    "615": r"^ +> ",  # an indented MkDocs tab's fence, each line after a `> ` prompt
}
# bash's `$'…'` quoting, which sh (dash) does not read; 225's holds no backslash escape, so it is '…' for sh.
ANSI_C = {"225"}
# 048 lost its line breaks: `a \ b` is one argument " b" for a shell; the import reads each `\ ` as a line
# continuation (a note says so), and so does this test.
COLLAPSED = {"048"}
# 128's page double-spaced the command: a blank line after each continuation line, which a shell would end the
# command at; the import reads it as one command (a note per blank line), and so does this test.
DOUBLE_SPACED = {"128"}
# 551's file ends on its last line's backslash, with no newline after it: bash reads the end of the file there,
# where sh (dash) passes a last argument `\`; the import reads it as bash does (a note says so), and so does this test.
ENDS_ON_BACKSLASH = {"551"}
# The post's shell variables, given to `sh` as the importer resolved them (each is a note of the import).
VARIABLES = {
    "752": {  # the script's assignments above the launch (752: trailing spaces after 8 and 0.90)
        "MODEL_PATH": "/srv/hf/models/Qwen2.5-72B-Instruct-AWQ",
        "PORT": "8000",
        "TENSOR_PARALLEL": "8",
        "GPU_MEMORY_UTILIZATION": "0.90",
    },
    "688": {"LATEST_VLLM_VERSION": "25.11-py3"},  # `export LATEST_VLLM_VERSION=25.11-py3` above the run
    "670": {"MODEL_NAME": "Qwen/Qwen2.5-VL-7B-Instruct", "PORT": "8000", "GPU_MEM_UTIL": "0.80"},  # `${1:-…}` defaults
    "636": {
        "MODEL_NAME": "Qwen/Qwen2.5-7B",
        "PORT": "8001",
        "MAX_SEQ_LENGTH": "2048",
        "MAX_LORA_RANK": "32",
        "VLLM_SERVER_GPUS": "0",
    },
    "626": {"MODEL_NAME": "LangAGI-Lab/camel", "VLLM_GPU_UTIL": "0.80", "PORT": "8000"},  # the Dockerfile's ENV
    "547": {"MODEL_PATH": "/remote-home/share/LLM_CKPT/huggingface_models/Qwen3-32B", "MAX_MODEL_LENGTH": "16384"},
    "044": {"MODEL_NAME": "DeepSeek-V3.1-Terminus"},
    "065": {"volume": f"{os.getcwd()}/data", "model": "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B"},  # volume=$PWD/data
    "076": {"NAME": "m27-fp8-inst1", "IMAGE": "nvcr.io/nvidia/vllm:26.01-py3", "MODEL": "MiniMaxAI/MiniMax-M2.7"},
    "238": {
        "MODEL": "/data/models/deepseek-7b-chat",
        "HTTP_PORT": "30000",
        "API_SERVER_COUNT": "8",
        "GPU_UTIL": "0.90",
    },
    "079": {"volume": f"{os.getcwd()}/data", "model": "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B"},  # as 065
    "082": {"MODEL": "Qwen/Qwen2.5-1.5B-Instruct", "NAME": "qwen"},
    "457": {
        "MODEL_PATH": "/media/xaccel/DataStore/AI/Model/Qwen/Qwen3-4B-Instruct-2507",
        "GPU_NUM": "4",
        "SERVER_IPV4": "0.0.0.0",
        "SERVER_PORT": "30000",
        "MAX_REQUESTS": "128",
    },
    "101": {"WORK": "/scratch/me", "HF_HOME": "/scratch/me/hf"},  # HF_HOME=$WORK/hf, expanded as it is set
    "102": {"HEAD_IP": "192.168.114.10"},
    "205": {"model_id": "Qwen/Qwen3-Coder-30B-A3B-Instruct"},
    "228": {"MODEL": "Qwen/Qwen3-0.6B"},  # the export of line 1
    "303": {"MODEL_HANDLE": "Qwen/Qwen3-8B", "MAX_MODEL_LEN": "8192"},  # the page's exports
    "370": {"MODEL_PATH": "/mnt/inaisfs/data/home/zhaozc_criait/zhangtx/Medical_LLM/Models/Qwen3-8B"},  # line 18
    "153": {  # TP=$(nvidia-smi --list-gpus | wc -l) is the job's #SBATCH --gres=gpu:h100:2 (a note of the import)
        "TP": "2",
        "MODEL_PATH": "openai/gpt-oss-120b",
        "MAX_MODEL_LEN": "131072",
        "TOOL_CALL_PARSER": "openai",
        "REASONING_PARSER": "openai_gptoss",
        "PORT": "8000",
        "HOST": "127.0.0.1",
    },
    "409": {  # the job's `${NAME:-"default"}`s, which it leaves unset
        "MODEL_PATH": "meta-llama/Meta-Llama-3-70B-Instruct",
        "TENSOR_PARALLEL": "8",
        "SERVER_PORT": "30000",
        "MEM_FRACTION": "0.85",
    },
}
# The directory a post's `cd` leaves: the docker client reads a relative --env-file there (a note of the import).
BASED = {"104": "/opt/serve"}
# Variables a multi-node post leaves to the reader for the head's address and port: the values hgxkit gives per
# deploy (the head given to render, the kind's default port).
GIVEN = {"022": {"MASTER_IP": "10.0.0.1", "PORT": "29550"}, "203": {"NODERANK": "0"}}
# Documented exceptions to "renders the post's argv": (post word, recipe word) pairs and why.
SECRET_WORDS = {
    "HF_TOKEN=<secret>": "HF_TOKEN",  # 001: a secret's value (here the docs' placeholder) comes from the environment
    "HUGGING_FACE_HUB_TOKEN=<secret>": "HUGGING_FACE_HUB_TOKEN",  # 007
    "HF_TOKEN=<your-hf-token>": "HF_TOKEN",  # 042
    "HF_TOKEN=hf_" + "X" * 34: "HF_TOKEN",  # 068
    "HUGGING_FACE_HUB_TOKEN=hf_FAKE-TOKEN-FOR-TESTS-NOT-REAL": "HUGGING_FACE_HUB_TOKEN",  # 385: a placeholder
    "HUGGING_FACE_HUB_TOKEN=hf_" + "X" * 34: "HUGGING_FACE_HUB_TOKEN",  # 448: the token as the source gives it
    "HF_TOKEN=...": "HF_TOKEN",  # 441: the poster's elision of a token, likewise from the environment
    "HF_TOKEN=xxxxxxxxxxxx": "HF_TOKEN",  # 383: a placeholder token, likewise from the environment
    "HUGGING_FACE_HUB_TOKEN=": "HUGGING_FACE_HUB_TOKEN",  # 720: an empty token, likewise from the environment
    # 005, 075: `-e HF_TOKEN=$HF_TOKEN` passes the operator's token on: the declared secret `-e HF_TOKEN`, whose
    # value reaches the container in a root-only env file, never on a command line.
    "HF_TOKEN=host-token": "HF_TOKEN",
    # 199: `--api_key "EMPTY"`, a credential flag spelt with an underscore: its value comes from $VLLM_API_KEY at
    # run time (unset in this test's environment)
    "EMPTY": "",
    "qwen3coder480b": "",  # 245: `--api-key qwen3coder480b`, likewise from $VLLM_API_KEY
    "test_api_key": "",
    "token-abc123": "",  # 267: the vLLM docs' example key, likewise from $VLLM_API_KEY
}
TRAILING = {
    "044": r"\s*>log\.txt 2>&1 &\s*$",  # 044 ends with a redirection and `&`: dropped with a note
    "546": r"^nohup |\s*> logs/vllm_server_qwen3\.log 2>&1 &\s*$",  # `nohup`, the redirections and `&`: dropped
    "570": r"^!nohup |\s*&\s*$",  # a notebook cell's shell escape `!`, then as 546
    "571": r"^!nohup |\s*> /tmp/vllm\.log 2>&1 &\s*$",
    "653": r"^nohup |\s*&\s*$",  # `nohup` and the background `&`: dropped, as 546
    "636": r" \\$",  # the launch's span ends before its redirection's own line, whose backslash it keeps
    "699": r"^nohup | \\$",  # `nohup` dropped; the span ends before the redirection's own line, as 636
}
# Variables a bare launch's script exports above it: the container's environment, as a prefix's are.
EXPORTED = {
    "238": {"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7", "NCCL_SHM_DISABLE": "1", "NCCL_IB_DISABLE": "1"},
    "409": {"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"},
    "752": {"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"},  # `export` above the api_server, GPUs 8 and 9 left free
    "700": {"CUDA_VISIBLE_DEVICES": "0"},  # a systemd unit's Environment=, read as an export (354's rule)
}
# A Dockerfile's exec-form CMD on a server image: the words of the image's entrypoint's launch (239).
CMD_EXEC = {"239": "vllm serve"}


def imported(number: str) -> ImportOutcome:
    entry = ENTRIES[number]
    return import_post([(entry["file"], (POSTS / entry["file"]).read_text())], ImportOptions(pick=PICKS.get(number)))


def server_spans(result: ImportOutcome) -> list[tuple[int, int]]:
    """The post lines of each serving command the import took."""
    spans = []
    for line in result.report:
        if line.action == "took" and "(the server" in line.what:
            first, _, last = line.where.rsplit(":", 1)[1].partition("-")
            spans.append((int(first), int(last or first)))
    return spans


def posted_command(number: str, span: tuple[int, int]) -> str:
    name = ENTRIES[number]["file"]
    text, _ = normalise(name, (POSTS / name).read_text())  # a blog's dashes and quotes, undone as the import does
    lines = text.split("\n")[span[0] - 1 : span[1]]
    if re.search(r"^`{3,}(?:diff|patch)\s*$", text, re.M):  # a diff's added lines, as the file has them after it
        lines = [line[1:] if line.startswith("+") else line for line in lines]
    if number in PROMPTS:
        lines = [re.sub(PROMPTS[number], "", line) for line in lines]
    text = "\n".join(lines)
    if number in ANSI_C:
        text = text.replace("$'", "'")
    if number in COLLAPSED:
        text = text.replace(" \\ ", " ")
    if number in DOUBLE_SPACED:
        text = re.sub(r"\n[ \t]*\n", "\n", text)
    if number in ENDS_ON_BACKSLASH:
        text = text.removesuffix("\\")
    if number in CMD_EXEC:
        text = f"{CMD_EXEC[number]} {shlex.join(json.loads(text.removeprefix('CMD ')))}"
    if "bash-lc" in ENTRIES[number]["kinds"]:  # `ENTRYPOINT ["bash", "-lc", "CMD"]`: the shell runs CMD
        text = json.loads(text.strip().removeprefix("ENTRYPOINT").strip())[2]
    if "makefile" in ENTRIES[number]["kinds"]:  # Make pastes its variables' text into the line its shell reads
        defined = dict(
            re.findall(r"^([A-Za-z_]\w*)[ \t]*(?:::=|:=|\?=|=)[ \t]*(.*?)[ \t]*$", (POSTS / name).read_text(), re.M)
        )
        text = re.sub(r"\$[({](\w+)[)}]", lambda m: defined.get(m[1], m[0]), text)
    return re.sub(TRAILING[number], "", text) if number in TRAILING else text


HUB = "/root/.cache/huggingface/hub"


def placed(words: list[str], recipe: Recipe, posted_model: str | None) -> list[str]:
    """The post's argv with the model placement the import notes: the model flag's value becomes the mount
    point, a read-only mount goes before the image, the served name is the post's model (unless it names one),
    and a mount of the Hugging Face cache (`-v ~/.cache/huggingface:/root/.cache/huggingface`, its hub/, or root's
    whole .cache) is dropped,
    for a model that is the host's own folder too (unless the cache holds it)."""
    model = recipe.model
    out = list(words)
    for i in reversed(range(len(out) - 1)):
        source, _, rest = out[i + 1].partition(":")
        holds = (model.local_dir + "/").startswith(source.rstrip("/") + "/")
        caches = ("/root/.cache", "/root/.cache/huggingface", HUB)  # root's .cache holds the Hub's
        volume = out[i] in ("-v", "--volume") and rest.split(":")[0].rstrip("/") in caches and not holds
        mount = out[i] == "--mount" and re.search(r"(?:^|,)(?:target|dst)=/root/\.cache/?(?:,|$)", out[i + 1])
        if volume or mount:
            del out[i : i + 2]
    if posted_model is None or posixpath.normpath(posted_model) == model.mount_point:
        return out  # a model under a mounted directory is served as it is
    out = [model.mount_point if word == posted_model else word for word in out]
    image = out.index(recipe.image.reference)
    out[image:image] = ["-v", f"{model.local_dir}:{model.mount_point}:ro"]
    if "--served-model-name" not in out:
        out += ["--served-model-name", posted_model]
    return out


def test_every_snippet_is_in_the_index() -> None:
    assert sorted(p.name for p in POSTS.glob("*.txt")) == sorted(ENTRIES[n]["file"] for n in ENTRIES)
    assert set(REFUSALS) == {n for n, e in ENTRIES.items() if e["expect"] == "refuse"}


def _gapped(number: str, *, generic: bool = False) -> object:
    """A post's parameter; one whose index entry names a `gap` (first contact found it refused for the wrong
    reason or not imported as expected, not fixed yet) must still fail, so fixing it flips the test. A post that
    imports at exit 0 and whose gap is what the index names it must give (`note:` or `recipe:`) fails those
    tests alone: the generic checks (`generic`: it loads back, renders, translates its launch) hold for it."""
    entry = ENTRIES[number]
    gap = entry.get("gap")
    if gap and generic and entry["expect"] == "import" and ("note" in entry or "recipe" in entry):
        return number
    return pytest.param(number, marks=pytest.mark.xfail(strict=True, reason=gap)) if gap else number


@pytest.mark.parametrize("number", [_gapped(n) for n, e in sorted(ENTRIES.items()) if e["expect"] == "refuse"])
def test_refused_snippets_say_why_in_one_line(number: str) -> None:
    with pytest.raises(InputError) as caught:
        imported(number)
    message = caught.value.message
    assert message.startswith(ENTRIES[number]["file"]), message
    assert "\n" not in message
    assert REFUSALS[number] in message, message


IMPORTED = sorted(n for n, e in ENTRIES.items() if e["expect"] == "import")


@pytest.mark.parametrize("number", [_gapped(n, generic=True) for n in IMPORTED])
def test_imported_snippets_load_back_and_render(number: str) -> None:
    result = imported(number)
    recipe = result.recipe
    assert recipe.server.kind == ENTRIES[number]["server_kind"]
    assert parse_recipe_text(dump_recipe(result.recipe)) == result.recipe
    assert len(result.notes) == len(set(result.notes)), "each note once"
    nodes = recipe.node_count()
    for rank in range(nodes):
        groups = render_recipe(recipe, rank=rank if nodes > 1 else None, head="10.0.0.1" if nodes > 1 else None)
        assert groups and all(group.server_argv for group in groups)


DOCKER_RUNS = [n for n in IMPORTED if ENTRIES[n]["kinds"][0] == "docker"]


@pytest.mark.parametrize("number", [_gapped(n, generic=True) for n in DOCKER_RUNS])
def test_a_docker_run_renders_the_argv_sh_gives_for_the_post(number: str, posix_argv) -> None:
    result = imported(number)
    recipe = result.recipe
    env = {**ENV, **VARIABLES.get(number, {})}
    spans = server_spans(result)
    for rank, span in enumerate(spans):
        posted = posix_argv(posted_command(number, span), env)
        posted = [SECRET_WORDS.get(word, word) for word in posted]
        if posted[:1] == ["sudo"] and any("`sudo` dropped" in note for note in result.notes):
            posted = posted[1:]  # hgxkit runs docker as root
        if number in BASED:
            posted = [posixpath.join(BASED[number], w) if o == "--env-file" else w for o, w in pairwise(["", *posted])]
        if any("are the poster's machine's, by UUID" in note for note in result.notes):  # the node's first N GPUs
            posted = [re.sub(r"(_VISIBLE_DEVICES=)((?:GPU|MIG)-\S+)", _first_ordinals, w) for w in posted]
        if any(re.search(r'`--entrypoint ""` dropped: the container runs the launch', n) for n in result.notes):
            at = posted.index("--entrypoint")  # 694: the emptied entrypoint and the written-out `vllm serve` after
            posted = posted[:at] + posted[at + 2 :]  # the image are the image's own entrypoint (a note says so)
            at = posted.index(recipe.image.reference) + 1
            if posted[at : at + 2] == ["vllm", "serve"]:
                posted = posted[:at] + posted[at + 2 :]
        if number == "068":  # `bash -c "python3 -m sglang.launch_server …"`: unwrapped, with a note
            assert posted[-2:-1] == ["-c"]
            posted = posted[:-3] + posted[-1].split()
        model_flag = recipe.server.server_kind.model_flag
        posted_model = _value_after(posted, model_flag, recipe) if model_flag else None
        expected = placed(posted, recipe, posted_model)
        if any("--host 0.0.0.0 added" in note for note in result.notes):  # a loopback server made reachable
            assert "--host" not in posted
            expected += ["--host", "0.0.0.0"]
        if any("--ipc=host added: " in note for note in result.notes):  # several GPUs on Docker's 64 MB of /dev/shm
            at = expected.index(recipe.image.reference)
            if expected[at - 2] == "-v" and expected[at - 1].startswith(f"{recipe.model.local_dir}:"):
                at -= 2  # the placed model's mount comes after the options the import reads
            expected = [*expected[:at], "--ipc=host", *expected[at:]]
        dropped = next(
            (n for n in result.notes if re.search(r"--network \S+ dropped: a network of the poster", n)), None
        )
        if dropped is not None:  # a network of the poster's own, which a node lacks; its port published instead
            at = expected.index("--network")
            expected = expected[:at] + expected[at + 2 :]
            published = re.search(r"-p (\d+:\d+) publishes", dropped)
            if published:
                at = expected.index(recipe.image.reference)
                if expected[at - 2] == "-v" and expected[at - 1].startswith(f"{recipe.model.local_dir}:"):
                    at -= 2
                expected = [*expected[:at], "-p", published.group(1), *expected[at:]]
        if any("asks for no GPU" in note for note in result.notes):  # the GPUs a default runtime gave
            expected = [*expected[:2], "--gpus", "all", *expected[2:]]
        nodes = recipe.node_count()
        groups = render_recipe(recipe, rank=rank if nodes > 1 else None, head=_head(posted) if nodes > 1 else None)
        group = groups[rank] if nodes == 1 else groups[0]  # commands joined as GPU groups: one group each
        if recipe.groups is not None and recipe.groups.server_args is not None:
            expected = own_args_last(expected, recipe.groups.server_args[rank], group)
        rendered = posix_argv(group.shell().replace("\\\n", ""), env)
        if nodes > 1:  # one rank's container name is kept (each host runs its own Docker)
            expected = [
                w if not w.startswith("sglang_multinode") else group.option_values("--name")[0] for w in expected
            ]
        assert rendered == expected


def _first_ordinals(match: re.Match[str]) -> str:
    """`_VISIBLE_DEVICES=GPU-…,GPU-…` as the node's first GPUs, as many: `_VISIBLE_DEVICES=0,1`."""
    return match.group(1) + ",".join(str(i) for i in range(match.group(2).count(",") + 1))


def own_args_last(words: list[str], own: tuple[tuple[str, ...], ...], group: RenderedGroup) -> list[str]:
    """A posted command as its group renders it: the group's own arguments (a prefill/decode side's flags) after the
    shared ones, its container named by the recipe's name template."""
    out = list(words)
    for entry in own:
        start = next(i for i in range(len(out)) if tuple(out[i : i + len(entry)]) == entry)
        del out[start : start + len(entry)]
    out += [word for entry in own for word in entry]
    named = out.index("--name") + 1
    return [*out[:named], str(group.name), *out[named + 1 :]]


# Newer posts name in the index the recipe fields the import must give (`recipe:`).
NAMED = sorted(n for n, e in ENTRIES.items() if "recipe" in e)


@pytest.mark.parametrize("number", [_gapped(n) for n in NAMED])
def test_imported_snippets_give_the_fields_the_index_names(number: str) -> None:
    recipe = imported(number).recipe
    wanted = ENTRIES[number]["recipe"]
    if "image" in wanted:
        assert recipe.image.reference == wanted["image"]
    for flag, value in wanted.get("server", {}).items():  # a switch is listed with no value (null)
        assert recipe.server.has(flag) and recipe.server.flag(flag) == value, flag
    options = [" ".join(entry.words) for entry in recipe.docker.entries]  # each option as written
    for option in wanted.get("docker", []):
        assert option in options, (option, options)
    for option in wanted.get("not_docker", []):
        assert option not in options, (option, options)
    if "command" in wanted:
        assert recipe.server.words()[: len(wanted["command"])] == wanted["command"]


# Newer posts name a note the import must make (`note:`): what it changed or where it kept something.
NOTED = sorted(n for n, e in ENTRIES.items() if "note" in e)


@pytest.mark.parametrize("number", [_gapped(n) for n in NOTED])
def test_imported_snippets_make_the_note_the_index_names(number: str) -> None:
    notes = imported(number).notes
    assert any(ENTRIES[number]["note"] in note for note in notes), notes


# Posts that run a TP-4 vLLM server on a `--gpus '"device=…"'` list of four: the recipe keeps both.
FOUR_LISTED_GPUS = {"075": [0, 1, 2, 3]}


@pytest.mark.parametrize("number", sorted(FOUR_LISTED_GPUS))
def test_a_tp4_server_keeps_its_four_listed_gpus(number: str) -> None:
    recipe = imported(number).recipe
    (group,) = render_recipe(recipe)
    gpus = FOUR_LISTED_GPUS[number]
    assert group.gpus == gpus
    assert group.option_values("--gpus") == [f'"device={",".join(map(str, gpus))}"']
    assert recipe.server.flag("--tensor-parallel-size") == "4"
    assert recipe.server.parallel_size() == 4


def _value_after(words: list[str], flag: str, recipe: Recipe) -> str | None:
    """The model a posted argv names: after the kind's model flag, or after the image or its `vllm serve` (vLLM's
    positional model)."""
    spellings = {flag, *(a for a, c in recipe.server.server_kind.flag_aliases.items() if c == flag)}
    for index, word in enumerate(words[:-1]):
        if word in spellings:
            return words[index + 1]
    after = words[words.index(recipe.image.reference) + 1 :]
    if after[:2] == ["vllm", "serve"]:  # the container command written out (076: an image with no serving entrypoint)
        after = after[2:]
    follower = after[0] if after else ""
    return follower if follower and not follower.startswith("-") else None


def _head(posted: list[str]) -> str:
    """The head address the post gives (`$IP_OF_HEAD_NODE`, unset here, gives none: any address then)."""
    value = posted[posted.index("--dist-init-addr") + 1]
    return value.rsplit(":", 1)[0] or "10.0.0.1"


# compose, Kubernetes, SkyPilot, Truss and Akash: named fields; a prefill/decode split's groups: tests/unit/importing/test_import_vllm_pd.py
BARE = [
    n
    for n in IMPORTED
    if n not in DOCKER_RUNS
    and ENTRIES[n]["kinds"][0] not in ("compose", "kubernetes", "skypilot", "truss", "akash-sdl")
    and "prefill-decode" not in ENTRIES[n]["kinds"]
    # a shown config file's keys become flags, which the posted words do not hold (test_import_config_file)
    and "config-file-shown" not in ENTRIES[n]["kinds"]
    # a unit a script writes through a here-document: the file the shell writes, not the posted words
    and "systemd-unit-in-heredoc" not in ENTRIES[n]["kinds"]
]


@pytest.mark.parametrize("number", [_gapped(n, generic=True) for n in BARE])
def test_a_bare_launch_is_translated_as_its_notes_say(number: str, posix_argv) -> None:
    result = imported(number)
    recipe = result.recipe
    kind = recipe.server.server_kind
    for rank, span in enumerate(server_spans(result)):
        posted = posix_argv(posted_command(number, span), {**ENV, **VARIABLES.get(number, {}), **GIVEN.get(number, {})})
        prefix = dict(EXPORTED.get(number, {}))
        while "=" in posted[0] and re.match(r"^[A-Za-z_]\w*=", posted[0]):
            name, _, value = posted.pop(0).partition("=")
            prefix[name] = value
        nodes = recipe.node_count()
        head = None
        if nodes > 1:
            head = _head(posted) if "--dist-init-addr" in posted else "10.0.0.1"
        (group,) = render_recipe(recipe, rank=rank if nodes > 1 else None, head=head)
        server = group.server_argv
        # The program: the image's python3 (SGLang), or the image's own `vllm serve` entrypoint (vLLM).
        # `python -u -m MODULE`: the interpreter's own options are dropped (a note says so), the module is the program
        python = posted[0].endswith(("python", "python3")) and "-m" in posted
        program = posted.index("-m") + 2 if python else 2
        if posted[:3] == ["vllm", "serve", "serve"]:
            program = 3  # `vllm serve serve MODEL` (012): the doubled word is dropped, with a note
        args = posted[program:]
        if kind.name == "sglang":  # the interpreter is the image's python3
            words = ["python3", "-m", "sglang.launch_server"] if python else posted[:2]
        else:  # the image's entrypoint is `vllm serve`; the model is given as --model (old and new images)
            words = []
            if args and not args[0].startswith("-"):
                args = ["--model", *args]
        model = recipe.model
        local = model.local_dir == model.mount_point  # a host path, mounted where the post names it
        if not local:  # the model's value becomes the mount point; a served name equal to it stays (114)
            served = {i + 1 for i, a in enumerate(args) if a == "--served-model-name"}
            args = [model.mount_point if a == model.repo_id and i not in served else a for i, a in enumerate(args)]
        if kind.name == "sglang" and "--host" not in args and nodes < 2:  # spanning nodes: listens as posted
            args += ["--host", "0.0.0.0"]
        loopback = next((n for n in result.notes if re.search(r"--host \S+ became 0\.0\.0\.0", n)), None)
        if loopback is not None:  # a loopback address inside a container is unreachable: the note says so
            args[args.index("--host") + 1] = "0.0.0.0"
        if "--served-model-name" not in args and not local:
            args += ["--served-model-name", model.repo_id]
        if any(n.startswith("a secret value removed from --api-key") for n in result.notes):  # 267: read at run time
            args[args.index("--api-key") + 1] = "${VLLM_API_KEY}"
        if "--dist-init-addr" in args:  # the head's address is given per deploy (here the post's, if it has one)
            at = args.index("--dist-init-addr") + 1
            args[at] = f"{head}:{args[at].rsplit(':', 1)[1]}"
        if "--data-parallel-address" in args:  # DP over hosts: a rank's own flags are rendered last
            for flag, width in (("--headless", 1), ("--data-parallel-start-rank", 2)):
                if flag in args:
                    at = args.index(flag)
                    args = args[:at] + args[at + width :] + args[at : at + width]
        assert server == words + args
        options = [w for entry in group.options for w in entry.words]
        devices = prefix.pop("CUDA_VISIBLE_DEVICES", None)
        assert options[:2] == ["--gpus", f'"device={devices}"' if devices else "all"]
        assert "--ipc=host" in options
        port = args[args.index("--port") + 1] if "--port" in args else str(kind.default_port)
        port = next((a.removeprefix("--port=") for a in args if a.startswith("--port=")), port)  # 311: `--port=9003`
        if nodes > 1:  # the ranks reach each other on the host's network; nothing is published
            assert "--network=host" in options and "-p" not in options
        else:
            assert f"{port}:{port}" in options
        for name, value in prefix.items():
            assert f"{name}={value}" in options
        assert f"{model.local_dir}:{model.mount_point}:ro" in options
