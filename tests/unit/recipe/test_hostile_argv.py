"""The hostile set: judge what Docker receives. Written from threat classes, not from
test_hostile_recipes.py: each case is one recipe edit and its exact outcome — refused when the recipe loads
(a word left for the node's shell), the exact names `recipe check` reports, or allowed.

Classes: an empty or unset variable hiding a value; quotes and escapes splitting one; mounts outside the model
directories (the deny list's old misses too); namespaces and network; exposure (`-P`, `sh -c` wrappers);
resource levers; runtime, logging and security options; secrets (`{{env:NAME}}` allowlist and placement); the
literal argv on the node (unknown options); the allow knob by name, option and class.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hgxkit.errors import InputError
from hgxkit.recipe.danger import (
    DANGER_NAMES,
    PolicyContext,
    context_for,
    dangerous_options,
    judge_argv,
    with_own_files,
)
from hgxkit.recipe.exposure import recipe_exposure_problems
from hgxkit.recipe.judge import argv_problems, docker_option_problems, findings
from hgxkit.recipe.read import parse_recipe_text
from hgxkit.serving.containers import ApiKeyFiles, container_specs

BASE = """\
schema_version: 2
name: tiny
image:
  reference: {image}
model:
  repo_id: org/model
  revision: main
  local_dir: /data/models/tiny
  mount_point: /model
docker:
  options:
  - -d
  - -v /data/models/tiny:/model:ro
  - -p 127.0.0.1:5000:30000
{options}
server:
  kind: sglang
  command: {command}
  args:
  - --model-path /model
  - --host 0.0.0.0
{args}
"""
OPTIONS_LINE = 15  # the first added docker.options item's line


def recipe_text(
    options: list[str] = (), args: list[str] = (), command: str = "sglang serve", image: str = "img:1"
) -> str:
    item = "  - {}".format
    return BASE.format(
        image=image,
        options="\n".join(item(o) for o in options),
        command=command,
        args="\n".join(item(a) for a in args),
    ).replace("\n\n", "\n")


def outcome(
    options: list[str] = (), args: list[str] = (), command: str = "sglang serve", image: str = "img:1"
) -> object:
    """`("load", message)` when loading refuses the recipe; else the sorted error codes and danger names."""
    try:
        recipe = parse_recipe_text(recipe_text(options, args, command, image), source="r.yaml")
    except InputError as err:
        return ("load", err.message)
    names = [d.name for d in dangerous_options(recipe)]
    codes = sorted({f.code for f in findings(recipe) if f.level == "error"} - {"docker-option"})
    return names, codes


def _load(where: str, word: str, what: str) -> tuple[str, str]:
    return (
        "load",
        f"r.yaml: {where}: {what} in {word!r} is left for the node's shell to expand, so Docker would receive "
        "other words than hgxkit checked; resolve it in the post, or declare it a secret ({{env:NAME}}, passed as -e NAME)",
    )


def opt(index: int = 0) -> str:
    return f"docker.options[{3 + index}] (line {OPTIONS_LINE + index})"


# (id, docker options added, expected outcome)
OPTION_CASES = [
    # --- an empty or unset variable hides the value: refused at load, naming the variable, key and line ---
    ("empty-var-root", ["-v /${NOPE}:/host"], _load(opt(), "/${NOPE}:/host", "${NOPE}")),
    (
        "empty-var-docker-sock",
        ["-v /${NOPE}var/run/docker.so${NOPE}ck:/var/run/docker.sock"],
        _load(opt(), "/${NOPE}var/run/docker.so${NOPE}ck:/var/run/docker.sock", "${NOPE}"),
    ),
    ("empty-var-network", ["--network=ho${NOPE}st"], _load(opt(), "--network=ho${NOPE}st", "${NOPE}")),
    ("empty-var-pid", ["--pid=ho${NOPE}st"], _load(opt(), "--pid=ho${NOPE}st", "${NOPE}")),
    (
        "empty-var-seccomp",
        ["--security-opt seccomp=unconfi${NOPE}ned"],
        _load(opt(), "seccomp=unconfi${NOPE}ned", "${NOPE}"),
    ),
    # A switch's value is true/false as written: a variable there is refused before it could be anything.
    (
        "plain-var-switch",
        ["--privileged=$ON"],
        (
            "load",
            f"r.yaml: {opt()}: token 1 '--privileged=$ON' (line 1, column 1): --privileged is a switch; give it "
            "no value or =true/=false",
        ),
    ),
    ("double-quoted-var", ['-v "$EMPTY"/etc:/e'], _load(opt(), "$EMPTY/etc:/e", "$EMPTY")),
    ("tilde-home", ["-v ~/.ssh:/k"], _load(opt(), "~/.ssh:/k", "~")),
    ("tilde-user", ["-v ~root/.ssh:/k"], _load(opt(), "~root/.ssh:/k", "~")),
    ("var-cap", ["--cap-add $CAP"], _load(opt(), "$CAP", "$CAP")),
    ("var-env-value", ["-e MODE=$MODE"], _load(opt(), "MODE=$MODE", "$MODE")),
    ("positional-param", ["-v /$1:/h"], _load(opt(), "/$1:/h", "$1")),
    ("var-device", ["--device=/dev/${X}mem"], _load(opt(), "--device=/dev/${X}mem", "${X}")),
    (
        "var-mount-csv",
        ["--mount type=bind,source=/${X},target=/h"],
        _load(opt(), "type=bind,source=/${X},target=/h", "${X}"),
    ),
    ("var-ulimit", ["--ulimit memlock=$M"], _load(opt(), "memlock=$M", "$M")),
    # --- quotes and escapes split a word but not the value: judged as the literal Docker receives ---
    ("quoted-root", ["-v '/'':/host'"], (["host-system-mount"], [])),
    ("quoted-network", ['--network=h"o"st'], (["--network=host"], ["exposure"])),
    ("escaped-pid", ["--pid=h\\ost"], (["--pid=host"], [])),
    ("double-quoted-seccomp", ['--security-opt "seccomp=unconfined"'], (["--security-opt=seccomp=unconfined"], [])),
    ("split-docker-sock", ["-v /var/run/docker.s''ock:/s"], (["docker-socket-mount"], [])),
    ("quoted-privileged-true", ['--privileged=tr""ue'], (["--privileged"], [])),
    # --- mounts: the model directories are fine, the rest is named (first the paths a short deny list misses) ---
    ("mount-opt-hgxkit", ["-v /opt/hgxkit:/x"], (["host-system-mount"], [])),
    ("mount-spool-cron", ["-v /var/spool/cron:/c"], (["host-system-mount"], [])),
    ("mount-home", ["-v /home:/h"], (["host-system-mount"], [])),
    ("mount-tmp", ["-v /tmp:/t"], (["host-system-mount"], [])),
    ("mount-opt-parent", ["-v /opt:/o:ro"], (["host-system-mount"], [])),
    ("mount-other-dir", ["-v /srv/data:/d"], (["host-mount"], [])),
    ("mount-models-dir", ["-v /data/models:/m:ro"], ([], [])),
    ("mount-models-dir-rw", ["-v /data/models:/m"], (["nested-mount", "models-root-mount"], [])),
    ("mount-model-sibling-prefix", ["-v /data/modelsX:/m"], (["host-mount"], [])),
    ("mount-dotdot-out", ["-v /data/models/../../etc:/e"], (["host-system-mount"], [])),
    ("mount-engine-shm", ["-v /dev/shm:/dev/shm"], ([], [])),
    ("mount-named-volume", ["-v hf-cache:/root/.cache"], ([], [])),
    ("mount-csv-bind-other", ["--mount type=bind,source=/srv,target=/s"], (["host-mount"], [])),
    ("mount-tmpfs-huge", ["--mount type=tmpfs,target=/t,tmpfs-size=4T"], (["--tmpfs"], [])),
    ("tmpfs-huge", ["--tmpfs /t:size=3T"], (["--tmpfs"], [])),
    ("tmpfs-small", ["--tmpfs /t:size=1g"], ([], [])),
    ("env-file-home", ["--env-file /home/u/.env"], (["host-file-read"], [])),
    ("env-file-tmp", ["--env-file /tmp/x.env"], (["host-file-read"], [])),
    ("env-file-relative", ["--env-file x.env"], (["host-file-read"], [])),
    ("seccomp-profile-from-models", ["--security-opt seccomp=/data/models/tiny/p.json"], (["--security-opt"], [])),
    ("volume-driver", ["--volume-driver local"], (["--volume-driver"], [])),
    ("volumes-from", ["--volumes-from c"], (["--volumes-from"], [])),
    # --- namespaces and network ---
    ("network-container", ["--network container:other"], (["--network=container"], [])),
    ("ipc-container", ["--ipc container:x"], (["--ipc=container"], [])),
    ("pid-container", ["--pid container:x"], (["--pid=container"], [])),
    ("network-bridge", ["--network bridge"], ([], [])),
    ("ipc-host-documented", ["--ipc=host"], ([], [])),
    ("userns-host", ["--userns=host"], (["--userns=host"], [])),
    ("uts-host", ["--uts host"], (["--uts=host"], [])),
    # --- exposure ---
    ("publish-all-short", ["-P"], (["--publish-all"], ["exposure"])),
    ("publish-all-true", ["--publish-all=true"], (["--publish-all"], ["exposure"])),
    ("publish-all-false", ["--publish-all=false"], ([], [])),
    # --- resource levers ---
    ("oom-score-negative", ["--oom-score-adj=-1000"], (["--oom-score-adj"], [])),
    ("oom-score-positive", ["--oom-score-adj 500"], ([], [])),
    ("shm-2t", ["--shm-size 2T"], (["--shm-size"], [])),
    ("shm-32g", ["--shm-size 32g"], ([], [])),
    ("pids-unlimited", ["--pids-limit=-1"], (["--pids-limit"], [])),
    ("pids-zero", ["--pids-limit 0"], (["--pids-limit"], [])),
    ("pids-bounded", ["--pids-limit 4096"], ([], [])),
    ("memlock-unlimited-documented", ["--ulimit memlock=-1"], ([], [])),
    ("cgroup-parent", ["--cgroup-parent /x"], (["--cgroup-parent"], [])),
    ("oom-kill-disable", ["--oom-kill-disable"], (["--oom-kill-disable"], [])),
    # --- runtime, logging, security ---
    ("runtime-other", ["--runtime runsc"], (["--runtime"], [])),
    ("runtime-nvidia", ["--runtime nvidia"], ([], [])),
    ("log-driver-remote", ["--log-driver syslog"], (["--log-driver"], [])),
    ("log-driver-json", ["--log-driver json-file"], ([], [])),
    ("no-new-privileges", ["--security-opt no-new-privileges"], ([], [])),
    ("apparmor-profile", ["--security-opt apparmor=myprofile"], (["--security-opt"], [])),
    ("cap-drop", ["--cap-drop ALL"], ([], [])),
    # --- secrets: the allowlist, and only where a value reaches no command line ---
    ("env-aws-secret", ["-e AWS={{env:AWS_SECRET_ACCESS_KEY}}"], ([], ["env-allowlist"])),
    ("env-hf-token", ["-e HF_TOKEN={{env:HF_TOKEN}}"], ([], [])),
    ("label-carries-secret", ["--label t={{env:HF_TOKEN}}"], ([], ["secret-placement"])),
]


@pytest.mark.parametrize(("options", "expected"), [c[1:] for c in OPTION_CASES], ids=[c[0] for c in OPTION_CASES])
def test_hostile_docker_options(options: list[str], expected: object) -> None:
    assert outcome(options) == expected


# (id, server args added, server command, expected outcome)
SERVER_CASES = [
    ("server-var-host", ["--port $PORT"], "sglang serve", _load("server.args[2] (line 21)", "$PORT", "$PORT")),
    ("server-var-program", [], "$ENGINE serve", _load("server.command (line 17)", "$ENGINE", "$ENGINE")),
    ("api-key-secret", ["--api-key {{env:SGLANG_API_KEY}}"], "sglang serve", ([], [])),
    ("api-key-foreign-name", ["--api-key {{env:GITHUB_TOKEN}}"], "sglang serve", ([], ["env-allowlist"])),
    ("served-name-secret", ["--served-model-name {{env:HF_TOKEN}}"], "sglang serve", ([], ["secret-placement"])),
    ("single-quoted-dollar-is-the-containers", ["--chat-template '$X'"], "sglang serve", ([], [])),
]


@pytest.mark.parametrize(
    ("args", "command", "expected"), [c[1:] for c in SERVER_CASES], ids=[c[0] for c in SERVER_CASES]
)
def test_hostile_server_words(args: list[str], command: str, expected: object) -> None:
    assert outcome(args=args, command=command) == expected


def test_a_variable_in_the_image_is_refused_at_load() -> None:
    kind, message = outcome(image="img:$TAG")
    assert kind == "load" and message.startswith("r.yaml: image.reference (line 4): 'img:$TAG' does not match")


# --- exposure through the parsed network mode and the server's effective --host ---
WRAPPER = "-c 'exec sglang serve \"$@\" --host 0.0.0.0' sh"
EXPOSURE_CASES = [
    # A wrapper that appends --host 0.0.0.0 after the recipe's own --host 127.0.0.1.
    (
        "wrapper-appends-public-host",
        "sh",
        [WRAPPER, "--host 127.0.0.1"],
        [
            "--network host with the server listening on 0.0.0.0 (--host, or SGLang's default) opens the API on every "
            "interface without an API key"
        ],
    ),
    # A wrapper whose --host its shell decides: refused, not guessed.
    (
        "wrapper-host-from-variable",
        "sh",
        ["-c 'exec sglang serve --host \"$H\"' sh"],
        [
            "the server's sh -c program gives --host '$H', which its shell decides, so who can reach the API is not known"
        ],
    ),
    # No wrapper: the last --host is what binds.
    ("plain-loopback", "sglang serve", ["--host 127.0.0.1"], []),
]


@pytest.mark.parametrize(
    ("command", "args", "found"), [c[1:] for c in EXPOSURE_CASES], ids=[c[0] for c in EXPOSURE_CASES]
)
def test_exposure_is_decided_on_the_effective_host(command: str, args: list[str], found: list[str]) -> None:
    text = recipe_text(["--network host"], [], command).replace("  - --host 0.0.0.0\n", "")
    text += "".join(f"  - {a}\n" for a in args)
    recipe = parse_recipe_text(text, source="r.yaml")
    problems = recipe_exposure_problems(recipe, api_key=None, allow_unauthenticated=False)
    assert [p.found for p in problems] == found


# --- the literal argv on the node ---
ARGV_CASES = [
    ("unknown-option", ["docker", "run", "--frobnicate", "img"], ["unknown-option"]),
    ("root-mount", ["docker", "run", "-v", "/:/h", "img"], ["host-system-mount"]),
    ("expanded-by-sh", ["docker", "run", "--network=host", "--pid=host", "img"], ["--network=host", "--pid=host"]),
    ("literal-dollar-is-a-path", ["docker", "run", "-v", "/data/models/$x:/m", "img"], []),
    ("clean", ["docker", "run", "-d", "--gpus", "all", "-v", "/data/models/tiny:/model:ro", "img", "serve"], []),
]


@pytest.mark.parametrize(("argv", "names"), [c[1:] for c in ARGV_CASES], ids=[c[0] for c in ARGV_CASES])
def test_the_node_judges_the_literal_argv(argv: list[str], names: list[str]) -> None:
    assert [d.name for d in judge_argv(argv, PolicyContext())] == names


def test_an_unknown_option_is_named_in_the_refusal() -> None:
    (problem,) = argv_problems(["docker", "run", "--frobnicate", "img"], [])
    assert problem.found.startswith("argv: token 3 '--frobnicate'")


@pytest.mark.parametrize(
    ("option", "allow", "left"),
    [
        ("-v /srv:/s", ["mounts"], []),  # by class
        ("-v /srv:/s", ["host-mount"], []),  # by name
        ("-v /srv:/s", ["--volume"], []),  # by option
        ("--shm-size 3T", ["resources"], []),
        ("--shm-size 3T", ["mounts"], ["--shm-size"]),
        ("--privileged", ["--privileged"], []),  # the names inventories already use keep matching
        ("--privileged", ["privileges"], []),
        ("--cap-add SYS_ADMIN", ["devices"], ["--cap-add"]),
    ],
)
def test_the_allow_knob_takes_a_name_an_option_or_a_class(option: str, allow: list[str], left: list[str]) -> None:
    recipe = parse_recipe_text(recipe_text([option]), source="r.yaml")
    problems = docker_option_problems(recipe, allow)
    assert [p.remedy.split('["')[1].split('"]')[0] for p in problems] == left


def test_every_name_the_cases_expect_is_a_stable_danger_name() -> None:
    expected = {n for _, _, e in OPTION_CASES if e[0] != "load" for n in e[0]}
    assert expected <= set(DANGER_NAMES)
    assert len(OPTION_CASES) + len(SERVER_CASES) + len(EXPOSURE_CASES) + len(ARGV_CASES) >= 60


# --- the property: the policy's verdict is its verdict on what a real `sh` hands Docker ---
# One value per dangerous class of the option table (hgxkit.recipe.docker_options.OPTION_CLASSES).
DANGEROUS = [
    ("-v", "/:/host"),  # mounts
    ("--mount", "type=bind,source=/var/run/docker.sock,target=/s"),  # mounts
    ("-v", "/srv/data:/d"),  # mounts outside the model directories
    ("--pid", "host"),  # namespaces
    ("--network", "host"),  # network
    ("--network", "container:other"),  # network
    ("--security-opt", "seccomp=unconfined"),  # security
    ("--privileged", None),  # privileges
    ("--cap-add", "SYS_ADMIN"),  # privileges
    ("--device", "/dev/mem"),  # devices
    ("--shm-size", "4T"),  # resources
    ("--pids-limit", "-1"),  # resources
    ("--oom-score-adj", "-1000"),  # resources
    ("--cgroup-parent", "/x"),  # resources
    ("--runtime", "runsc"),  # runtime
    ("--log-driver", "syslog"),  # logging
    ("--cidfile", "/etc/cron.d/x"),  # host files
    ("--env-file", "/home/u/.env"),  # env
    ("--publish-all", None),  # ports
]
SAFE = [("-v", "/data/models/tiny:/m:ro"), ("--shm-size", "32g"), ("--ipc", "host"), ("--ulimit", "memlock=-1")]
_EMPTY = ["${NOPE}", "$NOPE", "''", '""']


@st.composite
def disguised(draw: st.DrawFn, value: str, *, variables: bool) -> str:
    """`value` as shell text with empty variables, empty quotes, escapes and quoted runs at random places."""
    out = ""
    index = 0
    while index < len(value):
        choice = draw(st.integers(0, 7))
        char = value[index]
        nxt = value[index + 1] if index + 1 < len(value) else ""
        if choice == 0 and variables:
            empty = draw(st.sampled_from(_EMPTY))
            if empty == "$NOPE" and (char.isalnum() or char == "_"):
                empty = "${NOPE}"  # `$NOPEst` would be another (also empty) name and eat the text
            out += empty + char
        elif choice == 1:
            out += draw(st.sampled_from(["''", '""'])) + char
        elif choice == 2:
            out += "\\" + char
        elif choice == 3 and nxt:
            quote = draw(st.sampled_from(["'", '"']))
            out += quote + char + nxt + quote
            index += 1
        else:
            out += char
        index += 1
    return out


@pytest.fixture(scope="module")
def stub_docker(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A `docker` on PATH that records the argv it was given as JSON (in $DOCKER_ARGV)."""
    folder = tmp_path_factory.mktemp("stub")
    stub = folder / "docker"
    stub.write_text(
        f'#!/bin/sh\nexec {sys.executable} -c "import json, sys; print(json.dumps(sys.argv[1:]))" "$@" > "$DOCKER_ARGV"\n'
    )
    stub.chmod(0o755)
    return folder


def docker_receives(command: str, stub: Path) -> list[str]:
    """The argv `sh -c command` hands the stub `docker` (NOPE unset)."""
    out = stub / "argv.json"
    env = {"PATH": f"{stub}:/usr/bin:/bin", "DOCKER_ARGV": str(out)}
    subprocess.run(["sh", "-c", command], env=env, check=True)
    return ["docker", *json.loads(out.read_text())]


def _verdicts(option: str, text: str | None, stub: Path) -> tuple[object, list[str]]:
    """(the policy's verdict on the recipe, its verdict on what sh hands Docker when the node starts it)."""
    item = option if text is None else f"{option} {text}"
    try:
        recipe = parse_recipe_text(recipe_text([item]), source="r.yaml")
    except InputError as err:
        assert "is left for the node's shell to expand" in err.message, err.message
        # Refused: hgxkit renders nothing. Judged anyway on what Docker would get had the host's shell run it.
        received = docker_receives(f"docker run {item} img", stub)
        return "refused", [d.name for d in judge_argv(received)]
    (spec,) = container_specs(
        recipe, total_gpus=None, bind_address="127.0.0.1", api_key=None, image="img@sha256:" + "0" * 64, environ={}
    )
    received = docker_receives(str(spec.command()), stub)
    assert received == spec.final_argv()
    return [d.name for d in dangerous_options(recipe)], [d.name for d in judge_argv(received, context_for(recipe))]


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_the_verdict_on_a_disguised_dangerous_value_is_the_verdict_on_what_docker_receives(data, stub_docker) -> None:
    option, value = data.draw(st.sampled_from(DANGEROUS))
    text = None if value is None else data.draw(disguised(value, variables=True))
    policy, received = _verdicts(option, text, stub_docker)
    assert received, "the value is still dangerous once sh has removed the disguise"
    assert policy == "refused" or policy == received


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_quotes_and_escapes_never_turn_a_safe_value_into_a_refusal_or_back(data, stub_docker) -> None:
    option, value = data.draw(st.sampled_from(SAFE))
    policy, received = _verdicts(option, data.draw(disguised(value, variables=False)), stub_docker)
    assert policy == received == []


def test_the_files_hgxkit_writes_for_a_container_pass_the_node_check_and_hold_the_secrets() -> None:
    recipe = parse_recipe_text(recipe_text(["-e HF_TOKEN={{env:HF_TOKEN}}"], ["--api-key {{env:SGLANG_API_KEY}}"]))
    environ = {"HF_TOKEN": "hf-$(id)", "SGLANG_API_KEY": "k;`id`"}
    (spec,) = container_specs(
        recipe, total_gpus=None, bind_address="127.0.0.1", api_key=None, image="img@sha256:" + "0" * 64, environ=environ
    )
    argv = spec.final_argv()
    folder = "/var/lib/hgxkit/serve/replace/tiny-0"
    assert argv[argv.index("--env-file") + 1] == f"{folder}/secrets.env"
    assert f"{folder}/recipe-api-key.yaml:/run/hgxkit/recipe-api-key.yaml:ro" in argv
    assert not any("hf-$(id)" in word or "k;`id`" in word for word in argv)  # no secret on the command line
    assert spec.secret_files() == {"secrets.env": "HF_TOKEN=hf-$(id)\n", "recipe-api-key.yaml": 'api-key: "k;`id`"\n'}
    assert argv_problems(argv, [], with_own_files(context_for(recipe), spec.own_files)) == []
    # The same argv judged without knowing they are hgxkit's own: its state directory is off limits.
    assert [p.remedy.split('["')[1].split('"]')[0] for p in argv_problems(argv, [], context_for(recipe))] == [
        "hgxkit-secret-mount",
        "host-file-read",
    ]


def test_the_api_key_files_of_api_key_auto_pass_the_node_check() -> None:
    recipe = parse_recipe_text(recipe_text())
    keys = ApiKeyFiles.beside("/etc/hgxkit/serve/api-key")
    (spec,) = container_specs(
        recipe, total_gpus=None, bind_address="127.0.0.1", api_key=keys, image="img@sha256:" + "0" * 64, environ={}
    )
    assert "/etc/hgxkit/serve/api-key.yaml:/run/hgxkit/api-key.yaml:ro" in spec.final_argv()
    assert argv_problems(spec.final_argv(), [], with_own_files(context_for(recipe), spec.own_files)) == []


def test_a_secret_name_off_the_allowlist_is_refused_when_the_start_command_is_made() -> None:
    recipe = parse_recipe_text(recipe_text(["-e AWS={{env:AWS_SECRET_ACCESS_KEY}}"]))
    with pytest.raises(InputError) as caught:
        container_specs(
            recipe,
            total_gpus=None,
            bind_address="127.0.0.1",
            api_key=None,
            image="img@sha256:" + "0" * 64,
            environ={"AWS_SECRET_ACCESS_KEY": "x"},
        )
    assert caught.value.message == (
        "{{env:AWS_SECRET_ACCESS_KEY}}: AWS_SECRET_ACCESS_KEY is not on recipe_env_allowlist (HF_TOKEN, SGLANG_API_KEY)"
    )
