"""`recipe import` + `render`: the seed's exact round trip, real-world forms, malformed inputs, a property test."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from hgxkit.errors import InputError
from hgxkit.importing.docker_run import import_docker_run, import_with_notes
from hgxkit.recipe.docker_options import DOCKER_RUN_OPTIONS
from hgxkit.recipe.dump import dump_recipe
from hgxkit.recipe.read import CONTROL_RE, parse_recipe_text
from hgxkit.recipe.render import render_recipe
from hgxkit.secrets import has_secret, is_secret_flag

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
SEED = (FIXTURES / "seed-docker-run.txt").read_text()


def seed_group(index: int) -> list[str]:
    """The seed's words as the poster meant them for one group, derived by hand from the post."""
    gpus = "0,1,2,3" if index == 0 else "4,5,6,7"
    return [
        "docker",
        "run",
        "-d",
        "--name",
        f"deepseek-v4-flash-{index}",
        "--restart",
        "unless-stopped",
        "--gpus",
        f'"device={gpus}"',
        "--shm-size",
        "32g",
        "--ipc=host",
        "-e",
        "SGLANG_RAGGED_VERIFY_MODE=static",
        "-e",
        "SGLANG_PREP_IN_CUDA_GRAPH=0",
        "-v",
        "/data/models/deepseek-v4-flash-dspark:/model",
        "-p",
        f"500{index}:30000",
        "lmsysorg/sglang:dev-dspark",
        "sglang",
        "serve",
        "--trust-remote-code",
        "--model-path",
        "/model",
        "--served-model-name",
        "deepseek-v4-flash",
        "--host",
        "0.0.0.0",
        "--port",
        "30000",
        "--tp",
        "4",
        "--moe-runner-backend",
        "marlin",
        "--mem-fraction-static",
        "0.88",
        "--cuda-graph-max-bs-decode",
        "24",
        "--max-running-requests",
        "24",
        "--kv-cache-dtype",
        "fp8_e4m3",
        "--enable-metrics",
        "--enable-cache-report",
        "--reasoning-parser",
        "deepseek-v4",
        "--tool-call-parser",
        "deepseekv4",
        "--speculative-algorithm",
        "DSPARK",
        "--enable-hierarchical-cache",
        "--hicache-ratio",
        "4",
        "--hicache-size",
        "0",
        "--hicache-write-policy",
        "write_through",
    ]


LEFT_TO_THE_HOST = {
    "sglang-docs": "~ in '~/.cache/huggingface:/root/.cache/huggingface'",
    "vllm-docs": "~ in '~/.cache/huggingface:/root/.cache/huggingface'",
    "dollar-signs": "$HOME in '$HOME/.cache/huggingface:/root/.cache/huggingface'",
}


def roundtrip(cmd: str) -> list[str]:
    """Import, write as YAML, load back, render: the words the shell would pass."""
    recipe = parse_recipe_text(dump_recipe(import_docker_run(cmd)))
    (group,) = render_recipe(recipe)
    return group.shell_argv


def test_seed_renders_both_groups_token_for_token() -> None:
    recipe = parse_recipe_text(dump_recipe(import_docker_run(SEED)))
    groups = render_recipe(recipe, total_gpus=8)
    assert [g.argv for g in groups] == [seed_group(0), seed_group(1)]
    assert [(g.name, g.gpus, g.port) for g in groups] == [
        ("deepseek-v4-flash-0", [0, 1, 2, 3], 5000),
        ("deepseek-v4-flash-1", [4, 5, 6, 7], 5001),
    ]


def test_seed_placeholders_become_a_grouping() -> None:
    recipe = import_docker_run(SEED)
    assert recipe.groups is not None
    assert (recipe.groups.size, recipe.groups.port_base, recipe.groups.name_template) == (
        4,
        5000,
        "deepseek-v4-flash-{{group}}",
    )
    assert recipe.model.local_dir == "/data/models/deepseek-v4-flash-dspark"
    assert recipe.model.mount_point == "/model"
    assert recipe.server.program == ("sglang", "serve")
    assert recipe.server.flag("--tp-size") == "4"


def test_seed_multi_line_form_imports_the_same_recipe() -> None:
    multi_line = SEED.replace(" \\ ", " \\\n    ")
    assert import_docker_run(multi_line) == import_docker_run(SEED)


REAL_WORLD = {
    "sglang-docs": (
        "docker run --gpus all --shm-size 32g -p 30000:30000 "
        '-v ~/.cache/huggingface:/root/.cache/huggingface --env "HF_HOME=/root/.cache/huggingface" '
        "--ipc=host lmsysorg/sglang:latest python3 -m sglang.launch_server "
        "--model-path meta-llama/Llama-3.1-8B-Instruct --host 0.0.0.0 --port 30000"
    ),
    "vllm-docs": (
        "docker run --runtime nvidia --gpus all \\\n"
        "    -v ~/.cache/huggingface:/root/.cache/huggingface \\\n"
        '    --env "HF_HUB_OFFLINE=1" \\\n    -p 8000:8000 \\\n    --ipc=host \\\n'
        "    vllm/vllm-openai:latest \\\n    --model Qwen/Qwen3-0.6B"
    ),
    "network-host-tabs": (
        "docker run -d \\\n\t--network host \\\n\t--name sglang \\\n\n\t--privileged \\\n"
        "\tlmsysorg/sglang:v0.5.16 \\\n\tsglang serve --model-path /m --port 30001"
    ),
    "ulimit-device-capadd": (
        "docker run --rm --gpus all --ulimit memlock=-1 --ulimit stack=67108864 "
        "--device /dev/infiniband --cap-add IPC_LOCK --cap-add=SYS_PTRACE "
        "lmsysorg/sglang:latest python3 -m sglang.launch_server --model-path /m --dist-timeout 3600"
    ),
    "mount": (
        "docker run -d --mount type=bind,source=/data/models,target=/models,readonly "
        "--mount type=tmpfs,destination=/tmp --gpus '\"device=0,1\"' img:1 serve --model /models/x"
    ),
    "env-file": "docker run --env-file ./sglang.env --env-file=/etc/x.env -e FOO -e BAR=1 img:2",
    "health-cmd": (
        'docker run -d --health-cmd "curl -f http://localhost:30000/health || exit 1" '
        "--health-interval 30s --health-start-period=20m --health-retries 3 img serve"
    ),
    "it-rm": "docker run -it --rm --name dev -w /work -u 1000:1000 ubuntu:24.04 bash -lc 'echo hi && ls'",
    "combined-short-with-value": "docker run -dit -p8080:80 -eA=1 -v/a:/b -l k=v nginx:1.27",
    "container-run-restart": (
        "docker container run --restart=always --memory-swap -1 -m 8g --cpus 2.5 --pids-limit=-1 "
        "--entrypoint python3 img -m sglang.launch_server --tp-size 2"
    ),
    "runtime-nvidia-smi": "docker run --rm --runtime=nvidia --gpus all ubuntu nvidia-smi",
    "prompt-and-crlf": "$ docker run --rm \\\r\n  -p 127.0.0.1:5000:30000 \\\r\n  img serve\r\n",
    "double-dash": "docker run --rm -- img --rm",
    "label-json-value": "docker run -l 'cfg={\"a\": [1, 2]}' --sysctl net.core.somaxconn=1024 img",
    "dollar-signs": (
        "docker run -d -v $HOME/.cache/huggingface:/root/.cache/huggingface -e PORT=30000 "
        "--health-cmd 'curl -f http://localhost:$PORT/health || exit 1' "
        "img sh -c 'exec python3 -m sglang.launch_server --port $PORT --host \"${HOST:-0.0.0.0}\"'"
    ),
}


@pytest.mark.parametrize("name", sorted(REAL_WORLD))
def test_real_world_forms_round_trip_token_for_token(name: str) -> None:
    cmd = REAL_WORLD[name]
    if name in LEFT_TO_THE_HOST:  # a word the host's shell would change: loading refuses it
        with pytest.raises(InputError) as caught:
            roundtrip(cmd)
        assert f"{LEFT_TO_THE_HOST[name]} is left for the node's shell to expand" in caught.value.message
        cmd = cmd.replace("~/", "/data/models/").replace("$HOME/", "/data/models/")
    # shlex does not know line continuations; a shell drops backslash-newline, so the oracle does too.
    expected = shlex.split(re.sub(r"\\\r?\n", "", cmd.replace("$ docker", "docker")).replace("\r", ""))
    assert roundtrip(cmd) == expected


def test_a_dollar_sign_means_the_same_in_the_rendered_command_as_in_the_post(posix_argv) -> None:
    # `$HOME` would be expanded by the host's shell: loading refuses it (the post must say the directory).
    # `$PORT` and `${HOST…}` are single-quoted, so only the container's shell sees them. A rendered command that
    # let the host expand those would break the health check and the server's port without an error.
    post = REAL_WORLD["dollar-signs"].replace("$HOME/", "/home/poster/")
    recipe = parse_recipe_text(dump_recipe(import_docker_run(post)))
    (group,) = render_recipe(recipe)
    env = {"PATH": "/usr/bin:/bin", "HOME": "/home/poster", "PORT": "1", "HOST": "host-side"}

    posted = posix_argv(post, env)
    assert posix_argv(group.shell().replace("\\\n", ""), env) == posted
    assert "/home/poster/.cache/huggingface:/root/.cache/huggingface" in posted
    assert "curl -f http://localhost:$PORT/health || exit 1" in posted


def test_real_world_forms_are_parsed_into_the_right_parts() -> None:
    run = import_docker_run(REAL_WORLD["container-run-restart"])
    assert run.docker.invocation == ("docker", "container", "run")
    assert run.docker.last("--memory-swap") == "-1"
    assert run.docker.last("--entrypoint") == "python3"
    assert run.image.reference == "img"
    assert run.server.words() == ["-m", "sglang.launch_server", "--tp-size", "2"]

    short = import_docker_run(REAL_WORLD["combined-short-with-value"])
    assert [(u.option.name, u.value) for u in short.docker.uses()] == [
        ("--detach", None),
        ("--interactive", None),
        ("--tty", None),
        ("--publish", "8080:80"),
        ("--env", "A=1"),
        ("--volume", "/a:/b"),
        ("--label", "k=v"),
    ]

    health = import_docker_run(REAL_WORLD["health-cmd"])
    assert health.docker.last("--health-cmd") == "curl -f http://localhost:30000/health || exit 1"
    assert import_docker_run(REAL_WORLD["double-dash"]).server.words() == ["--rm"]
    sglang = import_docker_run(REAL_WORLD["sglang-docs"])
    assert sglang.server.program == ("python3", "-m", "sglang.launch_server")
    assert sglang.model.repo_id == "meta-llama/Llama-3.1-8B-Instruct"


def test_sudo_is_dropped_from_the_invocation() -> None:
    assert import_docker_run("sudo docker run --rm img").docker.invocation == ("docker", "run")


def test_env_from_host_and_env_files_are_kept_and_marked() -> None:
    result = import_with_notes(REAL_WORLD["env-file"])
    assert result.recipe.docker.env()[0].name == "FOO"
    assert result.recipe.docker.env()[0].value is None
    assert any("-e FOO: value taken from the host environment" in note for note in result.notes)
    assert any("--env-file ./sglang.env: read on the host" in note for note in result.notes)
    assert any("--env-file /etc/x.env" in note for note in result.notes)


def test_dollar_references_are_kept_literally() -> None:
    recipe = import_docker_run("docker run -v $HOME/.cache:/c -e HF_HOME=${HF_HOME} img")
    assert recipe.docker.words() == ["-v", "$HOME/.cache:/c", "-e", "HF_HOME=${HF_HOME}"]


MALFORMED = [
    ("docker ps -a", "token 1 'docker' (line 1, column 1): not a `docker run` command"),
    ("podman run img", "token 1 'podman' (line 1, column 1): not a `docker run` command"),
    ("", "empty input"),
    ("docker run", "missing image"),
    ("docker run -d --rm", "token 4 '--rm' (line 1, column 15): missing image"),
    ("docker run --gpuz all img", "token 3 '--gpuz' (line 1, column 12): unknown docker run option"),
    ("docker run -dZ img", "token 3 '-dZ' (line 1, column 12): unknown docker run option -Z"),
    ("docker run -d \\\n  --name", "token 4 '--name' (line 2, column 3): --name is missing its value"),
    ("docker run --name --rm img", "--name is missing its value (the next word --rm is an option)"),
    ("docker run --rm=yes img", "--rm is a switch; give it no value or =true/=false"),
    ("docker run -d 'img", "unbalanced single quote opened at line 1, column 15"),
    ('docker run -e "A=b img', "unbalanced double quote opened at line 1, column 15"),
    ("docker run img && docker run img2", "token 4 '&&' (line 1, column 16): shell operator"),
    ("docker run img | tee log", "token 4 '|' (line 1, column 16): shell operator"),
    ("docker run -v $(pwd):/x img", "token 4 '$(' (line 1, column 15): shell operator"),
    ("docker run img > out.log", "token 4 '>' (line 1, column 16): shell operator"),
    (
        "docker run --name m-X --gpus '\"device=0,1\"' img",
        "placeholder counts disagree: X in --name/-p but none in --gpus",
    ),
    (
        "docker run --gpus '\"device=X,1\"' --name m-X img",
        "placeholder counts disagree: mix of X and GPU ids",
    ),
    ("docker run --name m-X-X --gpus '\"device=X\"' img", "the name needs exactly one standalone X"),
    ("docker run --gpus '\"device=X,X\"' --name fixed img", "container names would collide"),
    (
        "docker run --gpus '\"device=X,X\"' --name a-X -p 5000:30000 img",
        "every group would publish the same host port",
    ),
    ("docker run --gpus '\"device=X\"' --name a-X -p 5X0:30000 img", "X placeholder must be the last digit"),
    (
        "docker run --gpus '\"device=X\"' --name a-X -p 500X:1 -p 600X:2 img",
        "only one published port may carry the X placeholder",
    ),
]


@pytest.mark.parametrize(("cmd", "message"), MALFORMED, ids=[m for m, _ in MALFORMED])
def test_malformed_input_fails_with_one_line_naming_the_problem(cmd: str, message: str) -> None:
    with pytest.raises(InputError) as caught:
        import_docker_run(cmd, source="post.txt")
    assert caught.value.exit_code == 2
    assert caught.value.message.startswith("post.txt: ")
    assert message in caught.value.message
    assert "\n" not in caught.value.message


# Property test: any command built from docker's option table round-trips token for token. Words a recipe
# refuses are left out: command substitution in any quoting, control characters, and credentials and the flags
# that take one (the importer replaces those by references, so they do not round-trip by design).
def _recipe_word(word: str) -> bool:
    secret = has_secret(word) or is_secret_flag(word.partition("=")[0])  # a credential flag's value becomes a reference
    return "`" not in word and "$(" not in word and not CONTROL_RE.search(word) and not secret


_SAFE_TEXT = st.text(
    alphabet=st.sampled_from(list("abcdefghijklmnopqrstuvwxyz0123456789_./:=,@ '\"\t")),
    min_size=1,
    max_size=12,
).filter(lambda s: not s.startswith("-") and "X" not in s and _recipe_word(s))
_OPTIONS = sorted(
    (opt for opt in DOCKER_RUN_OPTIONS.values() if opt.name not in {"--name", "--gpus", "--publish", "--env"}),
    key=lambda opt: opt.name,
)


@st.composite
def docker_commands(draw: st.DrawFn) -> tuple[str, list[str]]:
    words = ["docker", "run"]
    for _ in range(draw(st.integers(0, 8))):
        option = draw(st.sampled_from(_OPTIONS))
        short = option.short and draw(st.booleans())
        flag = f"-{option.short}" if short else option.name
        if not option.takes_value:
            words.append(flag)
            continue
        value = draw(_SAFE_TEXT)
        if draw(st.booleans()) and not short:
            words.append(f"{flag}={value}")
        elif short and draw(st.booleans()):
            words.append(f"{flag}{value}")
        else:
            words.extend([flag, value])
    image = r"[a-z][a-z0-9]{0,4}([._-][a-z0-9]{1,3}){0,2}(/[a-z0-9]{1,4}){0,2}(:[a-z0-9][a-z0-9.]{0,5})?"
    words.append(draw(st.from_regex(image, fullmatch=True)))
    any_word = st.text(st.characters(blacklist_characters="\r", blacklist_categories=("Cs",)), max_size=8)
    words.extend(draw(st.lists(any_word.filter(lambda s: "{{" not in s and _recipe_word(s)), max_size=6)))
    separator = draw(st.sampled_from([" ", " \\\n  ", " \\\n\t", "\t"]))
    text = separator.join(shlex.quote(word) for word in words)
    return text, words


@settings(max_examples=300, deadline=None)
@given(docker_commands())
def test_render_of_import_is_the_shell_split_of_the_command(case: tuple[str, list[str]]) -> None:
    text, words = case
    if "\\\n" not in text:  # shlex knows no line continuations; with plain separators it is the oracle
        assert shlex.split(text) == words
    try:
        rendered = roundtrip(text)
    except InputError as err:
        # random server words the engine's own parser refuses (`--nnodes` with no value), or the recipe's checks of
        # the server's values (`--port ''`: no port)
        assert "the engine would refuse" in err.message or ": server.args[" in err.message, err.message
        assume(False)
    assert rendered == words


def test_a_short_option_with_an_equals_sign_and_nothing_after_it_has_the_value_equals() -> None:
    # Docker's flag parser (pflag): `-h=x` is x, `-hx` is x, `-h=` alone is "=" (it took the next word as the
    # value instead, and the image went missing; found by the shell-split property test above).
    values = [
        [u.value for e in import_docker_run(f"docker run {w} img").docker.entries for u in e.uses]
        for w in ("-h=", "-h=x", "-hx")
    ]
    assert values == [["="], ["x"], ["x"]]


def test_a_server_value_the_recipe_refuses_is_named_by_its_argument() -> None:
    # found by the shell-split property test above: random server words after an unknown image
    with pytest.raises(InputError, match=r"server\.args\[0\]: --port: port '' is not a number"):
        roundtrip("docker run a --port ''")
