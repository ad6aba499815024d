"""The recipe policy (hgxkit/recipe/danger.py), option by option: each dangerous docker option with its exact
name, how it was written, its reason and class, and the safe values next to it; the context (mount roots, host
memory, a server spanning nodes, hgxkit's own files); the allowlist's matching. Written against the mutants
`make mutation MODULES=danger` found alive."""

from __future__ import annotations

from pathlib import Path

import pytest

from hgxkit.errors import InputError
from hgxkit.recipe.danger import (
    Danger,
    PolicyContext,
    context_for,
    dangerous_options,
    expansion_problems,
    expansions,
    judge_argv,
    with_own_files,
)
from hgxkit.recipe.read import parse_recipe_text

# (options between `docker run` and the image) -> [(name, option as written, reason, entry, class)]
TABLE = [
    (
        ["--privileged"],
        [
            (
                "--privileged",
                "--privileged",
                "gives the container every device and capability of the host",
                0,
                "privileges",
            )
        ],
    ),
    (["--privileged=false"], []),
    (
        ["--privileged=true"],
        [
            (
                "--privileged",
                "--privileged=true",
                "gives the container every device and capability of the host",
                0,
                "privileges",
            )
        ],
    ),
    (
        ["--use-api-socket"],
        [
            (
                "--use-api-socket",
                "--use-api-socket",
                "gives the container the Docker API and its credentials: root on the host",
                0,
                "privileges",
            )
        ],
    ),
    (["--use-api-socket=false"], []),
    (
        ["--network=host"],
        [
            (
                "--network=host",
                "--network=host",
                "shares the host's network stack: every port the server opens is open on every interface, and the "
                "container reaches what the host keeps on loopback",
                0,
                "network",
            )
        ],
    ),
    (
        ["--pid=host"],
        [
            (
                "--pid=host",
                "--pid=host",
                "shares the host's processes: the container sees, signals and traces every process on the host",
                0,
                "namespaces",
            )
        ],
    ),
    (["--ipc=host"], []),
    (
        ["--uts=host"],
        [("--uts=host", "--uts=host", "shares the host's hostname, which the container can change", 0, "namespaces")],
    ),
    (
        ["--userns=host"],
        [
            (
                "--userns=host",
                "--userns=host",
                "turns off user-namespace remapping: root in the container is root on the host",
                0,
                "namespaces",
            )
        ],
    ),
    (
        ["--cgroupns=host"],
        [
            (
                "--cgroupns=host",
                "--cgroupns=host",
                "shares the host's cgroup namespace: the container sees the host's cgroup tree",
                0,
                "namespaces",
            )
        ],
    ),
    (["--network=bridge"], []),
    (
        ["--network=container:abc"],
        [
            (
                "--network=container",
                "--network=container:abc",
                "joins the namespace of another container (container:abc), whatever it runs",
                0,
                "network",
            )
        ],
    ),
    (
        ["--pid=container:abc"],
        [
            (
                "--pid=container",
                "--pid=container:abc",
                "joins the namespace of another container (container:abc), whatever it runs",
                0,
                "namespaces",
            )
        ],
    ),
    (
        ["--ipc=container:x"],
        [
            (
                "--ipc=container",
                "--ipc=container:x",
                "joins the namespace of another container (container:x), whatever it runs",
                0,
                "namespaces",
            )
        ],
    ),
    (
        ["--security-opt", "seccomp:unconfined"],
        [
            (
                "--security-opt=seccomp=unconfined",
                "--security-opt=seccomp:unconfined",
                "turns off the seccomp filter: every system call is allowed",
                0,
                "security",
            )
        ],
    ),
    (
        ["--security-opt=apparmor=unconfined"],
        [
            (
                "--security-opt=apparmor=unconfined",
                "--security-opt=apparmor=unconfined",
                "turns off the AppArmor profile",
                0,
                "security",
            )
        ],
    ),
    (["--security-opt", "no-new-privileges"], []),
    (["--security-opt", "no-new-privileges=true"], []),
    (
        ["--security-opt", "label=disable"],
        [
            (
                "--security-opt=label=disable",
                "--security-opt=label=disable",
                "turns off SELinux labelling of the container",
                0,
                "security",
            )
        ],
    ),
    (
        ["--security-opt", "seccomp=/x.json"],
        [
            (
                "--security-opt",
                "--security-opt=seccomp=/x.json",
                "changes the container's confinement (seccomp=/x.json), which hgxkit cannot judge",
                0,
                "security",
            )
        ],
    ),
    (
        ["--cap-add", "SYS_ADMIN"],
        [("--cap-add", "--cap-add=SYS_ADMIN", "adds a Linux capability to the container's root", 0, "privileges")],
    ),
    (
        ["--device", "/dev/mem"],
        [("--device", "--device=/dev/mem", "gives the container a host device node", 0, "devices")],
    ),
    (
        ["--publish-all"],
        [
            (
                "--publish-all",
                "--publish-all",
                "publishes every exposed port on every interface, whatever bind_address says",
                0,
                "ports",
            )
        ],
    ),
    (
        ["-P"],
        [
            (
                "--publish-all",
                "--publish-all",
                "publishes every exposed port on every interface, whatever bind_address says",
                0,
                "ports",
            )
        ],
    ),
    (["--publish-all=false"], []),
    (["--runtime", "nvidia"], []),
    (["--runtime", "kata"], [("--runtime", "--runtime=kata", "'kata' is not one of nvidia, runc", 0, "runtime")]),
    (
        ["--isolation", "hyperv"],
        [("--isolation", "--isolation=hyperv", "'hyperv' is not one of default", 0, "runtime")],
    ),
    (
        ["--log-driver", "syslog"],
        [
            (
                "--log-driver",
                "--log-driver=syslog",
                "'syslog' is not one of json-file, local, none, journald",
                0,
                "logging",
            )
        ],
    ),
    (["--log-driver", "local"], []),
    (
        ["--volume-driver", "x"],
        [
            (
                "--volume-driver",
                "--volume-driver=x",
                "mounts through a volume plugin, which decides what the container gets",
                0,
                "mounts",
            )
        ],
    ),
    (
        ["--oom-score-adj", "-5"],
        [
            (
                "--oom-score-adj",
                "--oom-score-adj=-5",
                "makes the host's OOM killer spare the container and kill host processes first",
                0,
                "resources",
            )
        ],
    ),
    (["--oom-score-adj", "5"], []),
    (["--oom-score-adj", "0"], []),
    (
        ["--oom-kill-disable"],
        [
            (
                "--oom-kill-disable",
                "--oom-kill-disable",
                "keeps the OOM killer off the container: the host runs out of memory instead",
                0,
                "resources",
            )
        ],
    ),
    (["--oom-kill-disable=false"], []),
    (
        ["--pids-limit", "0"],
        [
            (
                "--pids-limit",
                "--pids-limit=0",
                "removes the limit on processes: a fork bomb takes the host",
                0,
                "resources",
            )
        ],
    ),
    (
        ["--pids-limit", "-1"],
        [
            (
                "--pids-limit",
                "--pids-limit=-1",
                "removes the limit on processes: a fork bomb takes the host",
                0,
                "resources",
            )
        ],
    ),
    (["--pids-limit", "1"], []),
    (
        ["--pids-limit", "x"],
        [
            (
                "--pids-limit",
                "--pids-limit=x",
                "removes the limit on processes: a fork bomb takes the host",
                0,
                "resources",
            )
        ],
    ),
    (
        ["--cgroup-parent", "/x"],
        [
            (
                "--cgroup-parent",
                "--cgroup-parent=/x",
                "places the container in a cgroup of the recipe's choosing, outside Docker's limits",
                0,
                "resources",
            )
        ],
    ),
    (["--shm-size", "32g"], []),
    (
        ["--shm-size", "2t"],
        [("--shm-size", "--shm-size=2t", "a /dev/shm of 2t: the host's memory (2048 GiB) or more", 0, "resources")],
    ),
    (
        ["--shm-size", "2048GiB"],
        [
            (
                "--shm-size",
                "--shm-size=2048GiB",
                "a /dev/shm of 2048GiB: the host's memory (2048 GiB) or more",
                0,
                "resources",
            )
        ],
    ),
    (["--shm-size", "1.5t"], []),
    (
        ["--shm-size", "2Tb"],
        [("--shm-size", "--shm-size=2Tb", "a /dev/shm of 2Tb: the host's memory (2048 GiB) or more", 0, "resources")],
    ),
    (
        ["--shm-size", "2199023255552"],
        [
            (
                "--shm-size",
                "--shm-size=2199023255552",
                "a /dev/shm of 2199023255552: the host's memory (2048 GiB) or more",
                0,
                "resources",
            )
        ],
    ),
    (["--shm-size", "2199023255551"], []),
    (
        ["--shm-size", " 2 T "],
        [
            (
                "--shm-size",
                "--shm-size= 2 T ",
                "a /dev/shm of  2 T : the host's memory (2048 GiB) or more",
                0,
                "resources",
            )
        ],
    ),
    (["--shm-size", "lots"], []),
    (
        ["--shm-size", "2048.5g"],
        [
            (
                "--shm-size",
                "--shm-size=2048.5g",
                "a /dev/shm of 2048.5g: the host's memory (2048 GiB) or more",
                0,
                "resources",
            )
        ],
    ),
    (
        ["--tmpfs", "/x:size=3t"],
        [("--tmpfs", "--tmpfs=/x:size=3t", "a tmpfs of 3072 GiB: the host's memory (2048 GiB) or more", 0, "mounts")],
    ),
    (["--tmpfs", "/x:rw,size=1g"], []),
    (
        ["--tmpfs", "/x: size =3t"],
        [("--tmpfs", "--tmpfs=/x: size =3t", "a tmpfs of 3072 GiB: the host's memory (2048 GiB) or more", 0, "mounts")],
    ),
    (["--tmpfs", "/x:size="], []),
    (["--tmpfs", "/x"], []),
    (
        ["--tmpfs", "/x:mode=1777,size=2t"],
        [
            (
                "--tmpfs",
                "--tmpfs=/x:mode=1777,size=2t",
                "a tmpfs of 2048 GiB: the host's memory (2048 GiB) or more",
                0,
                "mounts",
            )
        ],
    ),
    (
        ["--mount", "type=tmpfs,target=/x,tmpfs-size=3t"],
        [
            (
                "--tmpfs",
                "--mount=type=tmpfs,target=/x,tmpfs-size=3t",
                "a tmpfs of 3072 GiB: the host's memory (2048 GiB) or more",
                0,
                "mounts",
            )
        ],
    ),
    (["--mount", "type=tmpfs,dst=/x"], []),
    (
        ["--mount", "TYPE=tmpfs,Tmpfs-Size=3T,target=/x"],
        [
            (
                "--tmpfs",
                "--mount=TYPE=tmpfs,Tmpfs-Size=3T,target=/x",
                "a tmpfs of 3072 GiB: the host's memory (2048 GiB) or more",
                0,
                "mounts",
            )
        ],
    ),
    (["--mount", "type=bind,source=/data/models/a,tmpfs-size=3t,target=/x"], []),
    (
        ["-v", "/var/run/docker.sock:/s"],
        [
            (
                "docker-socket-mount",
                "--volume=/var/run/docker.sock:/s",
                "mounts the container runtime's socket /var/run/docker.sock: root on the host",
                0,
                "mounts",
            )
        ],
    ),
    (
        ["-v", "/run/containerd/containerd.sock:/s"],
        [
            (
                "docker-socket-mount",
                "--volume=/run/containerd/containerd.sock:/s",
                "mounts the container runtime's socket /run/containerd/containerd.sock: root on the host",
                0,
                "mounts",
            )
        ],
    ),
    (["-v", "/:/h"], [("host-system-mount", "--volume=/:/h", "mounts the host's root file system", 0, "mounts")]),
    (
        ["-v", "/etc:/e"],
        [
            (
                "host-system-mount",
                "--volume=/etc:/e",
                "mounts /etc, which holds or is inside the host's /etc",
                0,
                "mounts",
            )
        ],
    ),
    (
        ["-v", "/data:/d"],
        [
            (
                "host-mount",
                "--volume=/data:/d",
                "mounts the host directory /data, outside the model directories (/data/models); move the files there, or allow it",
                0,
                "mounts",
            ),
            (
                "models-root-mount",
                "--volume=/data:/d",
                "mounts /data read-write, which holds the models root /data/models: the container can swap any "
                "recipe's model directory for a symlink; mount it read-only (:ro), or mount only model.local_dir",
                0,
                "mounts",
            ),
        ],
    ),
    (["-v", "/data/models/m:/m:ro"], []),
    (["-v", "/data/models:/m:ro"], []),
    (
        ["-v", "/data/modelsx:/m"],
        [
            (
                "host-mount",
                "--volume=/data/modelsx:/m",
                "mounts the host directory /data/modelsx, outside the model directories (/data/models); move the files there, or allow it",
                0,
                "mounts",
            )
        ],
    ),
    (
        ["-v", "/data/other:/o"],
        [
            (
                "host-mount",
                "--volume=/data/other:/o",
                "mounts the host directory /data/other, outside the model directories (/data/models); move the files there, or allow it",
                0,
                "mounts",
            )
        ],
    ),
    (["-v", "vol:/x"], []),
    (
        ["-v", "./rel:/x"],
        [
            (
                "host-system-mount",
                "--volume=./rel:/x",
                "mounts ./rel, a host path decided when the command runs ($HOME is /root when hgxkit deploys as root; a relative path depends on the working directory); write the absolute directory",
                0,
                "mounts",
            )
        ],
    ),
    (
        ["-v", "~/x:/x"],
        [
            (
                "host-system-mount",
                "--volume=~/x:/x",
                "mounts ~/x, a host path decided when the command runs ($HOME is /root when hgxkit deploys as root; a relative path depends on the working directory); write the absolute directory",
                0,
                "mounts",
            )
        ],
    ),
    (["-v", "/dev/shm:/dev/shm"], []),
    (["-v", "/dev/shm/:/dev/shm"], []),
    (
        ["-v", "//etc:/e"],
        [
            (
                "host-system-mount",
                "--volume=//etc:/e",
                "mounts //etc, which holds or is inside the host's /etc",
                0,
                "mounts",
            )
        ],
    ),
    (
        ["-v", "///etc:/e"],
        [
            (
                "host-system-mount",
                "--volume=///etc:/e",
                "mounts ///etc, which holds or is inside the host's /etc",
                0,
                "mounts",
            )
        ],
    ),
    (
        ["-v", "/usr/local:/u"],
        [
            (
                "host-system-mount",
                "--volume=/usr/local:/u",
                "mounts /usr/local, which holds or is inside the host's /usr",
                0,
                "mounts",
            )
        ],
    ),
    (
        ["-v", "/etc/hgxkit:/k"],
        [
            (
                "hgxkit-secret-mount",
                "--volume=/etc/hgxkit:/k",
                "mounts /etc/hgxkit, where hgxkit keeps the node's API keys and tokens",
                0,
                "mounts",
            )
        ],
    ),
    (["-v", "/x"], []),
    (["-v", ":/x"], []),
    (
        ["--mount", "type=bind,source=/etc,target=/e"],
        [
            (
                "host-system-mount",
                "--mount=type=bind,source=/etc,target=/e",
                "mounts /etc, which holds or is inside the host's /etc",
                0,
                "mounts",
            )
        ],
    ),
    (["--mount", "type=bind,src=/data/models/x,target=/e"], []),
    (
        ["--mount", "type=volume,volume-opt=device=/etc,volume-opt=o=bind,target=/x"],
        [
            (
                "host-system-mount",
                "--mount=type=volume,volume-opt=device=/etc,volume-opt=o=bind,target=/x",
                "mounts /etc, which holds or is inside the host's /etc",
                0,
                "mounts",
            )
        ],
    ),
    (
        ["--mount", "type=volume, Volume-Opt = Device=/etc,target=/x"],
        [
            (
                "host-system-mount",
                "--mount=type=volume, Volume-Opt = Device=/etc,target=/x",
                "mounts /etc, which holds or is inside the host's /etc",
                0,
                "mounts",
            )
        ],
    ),
    (
        ["--mount", "type=bind,Source=/etc,target=/e"],
        [
            (
                "host-system-mount",
                "--mount=type=bind,Source=/etc,target=/e",
                "mounts /etc, which holds or is inside the host's /etc",
                0,
                "mounts",
            )
        ],
    ),
    (
        ["--mount", 'type=bind,"source=/srv/a,b",target=/x'],
        [
            (
                "host-mount",
                '--mount=type=bind,"source=/srv/a,b",target=/x',
                "mounts the host directory /srv/a,b, outside the model directories (/data/models); move the files there, or allow it",
                0,
                "mounts",
            )
        ],
    ),
    (
        ["--mount", 'type=bind,source="/srv/a,target=/x'],
        [
            (
                "host-system-mount",
                '--mount=type=bind,source="/srv/a,target=/x',
                'mounts "/srv/a, a host path decided when the command runs ($HOME is /root when hgxkit deploys as root; a relative path depends on the working directory); write the absolute directory',
                0,
                "mounts",
            )
        ],
    ),
    (
        ["--env-file", "/etc/shadow"],
        [
            (
                "host-file-read",
                "--env-file=/etc/shadow",
                "reads the host file /etc/shadow into the container; keep such files outside system directories and give an absolute path",
                0,
                "env",
            )
        ],
    ),
    (
        ["--env-file", "rel.env"],
        [
            (
                "host-file-read",
                "--env-file=rel.env",
                "reads the host file rel.env into the container; keep such files outside system directories and give an absolute path",
                0,
                "env",
            )
        ],
    ),
    (["--env-file", "/opt/x.env"], []),
    (
        ["--label-file", "/etc/x"],
        [
            (
                "host-file-read",
                "--label-file=/etc/x",
                "reads the host file /etc/x into the container; keep such files outside system directories and give an absolute path",
                0,
                "labels",
            )
        ],
    ),
    (["--label-file", "/opt/x"], []),
    (
        ["--frobnicate"],
        [
            (
                "unknown-option",
                "argv: token 3 '--frobnicate' (line 1, column 3): unknown docker run option; check its spelling against `docker run --help`",
                "an option hgxkit does not know is refused by name",
                -1,
                "",
            )
        ],
    ),
]


@pytest.mark.parametrize(("words", "expected"), TABLE)
def test_each_option_is_judged_with_its_name_reason_and_class(words: list[str], expected: list[tuple]) -> None:
    found = judge_argv(["docker", "run", *words, "img"])
    assert [(d.name, d.option, d.reason, d.entry, d.klass) for d in found] == expected


def test_each_danger_names_the_option_entry_that_holds_it() -> None:
    found = judge_argv(["docker", "run", "--gpus", "all", "--privileged", "-v", "/etc:/e", "--cap-add", "X", "img"])
    assert [(d.name, d.entry) for d in found] == [("--privileged", 1), ("host-system-mount", 2), ("--cap-add", 3)]


def test_the_context_decides_roots_memory_multi_node_and_own_files() -> None:
    roots = PolicyContext(mount_roots=("/srv/models", "", "/data/models/"))
    assert judge_argv(["docker", "run", "-v", "/srv/models/a:/m", "-v", "/data/models/b:/b", "img"], roots) == []
    [outside] = judge_argv(["docker", "run", "-v", "/srv/other:/m", "img"], roots)
    assert outside.reason == (
        "mounts the host directory /srv/other, outside the model directories (/srv/models, , /data/models/); "
        "move the files there, or allow it"
    )
    small = PolicyContext(host_memory_bytes=8 << 30)
    [shm] = judge_argv(["docker", "run", "--shm-size", "8g", "img"], small)
    assert (shm.name, shm.reason) == ("--shm-size", "a /dev/shm of 8g: the host's memory (8 GiB) or more")
    assert judge_argv(["docker", "run", "--shm-size", "7.9g", "img"], small) == []
    spans = PolicyContext(spans_nodes=True)
    (network,) = judge_argv(["docker", "run", "--network=host", "img"], spans)  # needed, and still allowed by name
    assert network.name == "--network=host" and "a server spanning nodes needs it" in network.reason
    assert [d.name for d in judge_argv(["docker", "run", "--pid=host", "img"], spans)] == ["--pid=host"]
    own = with_own_files(PolicyContext(), ["/etc/hgxkit/env/x.env"])
    assert own.own_files == ("/etc/hgxkit/env/x.env",) and own.mount_roots == PolicyContext().mount_roots
    for words, names in [
        (["--env-file", "/etc/hgxkit/env/x.env"], []),
        (["-v", "/etc/hgxkit/env/x.env:/k:ro"], []),
        (["-v", "/etc/hgxkit/env/x.env:/k"], ["hgxkit-secret-mount"]),  # only read-only
        (["-v", "/etc/hgxkit/env/x.env:/k:rw"], ["hgxkit-secret-mount"]),
        (["-v", "/etc/hgxkit/env/y.env:/k:ro"], ["hgxkit-secret-mount"]),  # only the files it wrote
        (["--env-file", "/etc/hgxkit/env/y.env"], ["host-file-read"]),
        (["--label-file", "/etc/hgxkit/env/x.env"], ["host-file-read"]),  # only as env file or mount
    ]:
        assert [d.name for d in judge_argv(["docker", "run", *words, "img"], own)] == names, words
    assert [d.name for d in judge_argv(["docker", "run", "--env-file", "/etc/hgxkit/env/x.env", "img"])] == [
        "host-file-read"
    ]


def test_an_allowlist_matches_the_dangers_name_its_option_or_its_class() -> None:
    cap = Danger("--cap-add", "--cap-add=SYS_ADMIN", "r", 0, "privileges")
    assert [cap.allowed_by(a) for a in (["--cap-add"], ["privileges"], ["--privileged"], [], ["mounts"])] == [
        True,
        True,
        False,
        False,
        False,
    ]
    mount = Danger("host-mount", "--volume=/srv:/s", "r", 0, "mounts")
    assert [mount.allowed_by(a) for a in (["host-mount"], ["--volume"], ["-v"], ["mounts"], ["/srv"])] == [
        True,
        True,
        False,
        True,
        False,
    ]
    classless = Danger("unknown-option", "--x", "r", -1, "")
    assert classless.allowed_by([""]) is False and classless.allowed_by(["unknown-option"]) is True


RECIPE = """\
schema_version: 1
name: tiny
image:
  reference: img:1
docker:
  options:
  - --gpus all
  - -v /srv/models/tiny:/model
  - -v /data/cache:/c
server:
  command: sglang serve
  args:
  - --tp 2
model:
  repo_id: org/model
  revision: main
  local_dir: /srv/models/tiny
  mount_point: /model
"""


def test_a_recipes_own_model_directory_is_a_mount_root_and_options_keep_their_entries(tmp_path: Path) -> None:
    recipe = parse_recipe_text(RECIPE)
    ctx = context_for(recipe, models_dirs=["/data/models", "/data/models"], host_memory_bytes=16 << 30)
    assert ctx == PolicyContext(("/data/models", "/srv/models/tiny"), 16 << 30, False, local_dir="/srv/models/tiny")
    assert context_for(recipe).host_memory_bytes == PolicyContext().host_memory_bytes
    [found] = dangerous_options(recipe)
    assert (found.name, found.option, found.entry) == ("host-mount", "--volume=/data/cache:/c", 2)
    assert dangerous_options(recipe, PolicyContext(("/data",))) == [
        Danger(
            "host-mount",
            "--volume=/srv/models/tiny:/model",
            "mounts the host directory /srv/models/tiny, outside the model directories (/data); move the files "
            "there, or allow it",
            1,
            "mounts",
        ),
    ]


def test_expansions_left_for_the_shell_are_named_where_they_are() -> None:
    assert expansions("plain") == [] and expansions("a$$b") == []
    assert expansions("/${A}x/$B") == ["${A}", "$B"]
    text = RECIPE.replace("  - --tp 2\n", "  - --tp 2 --x ${Y} --z $Z\n")
    with pytest.raises(InputError) as err:
        parse_recipe_text(text)
    assert err.value.message == (
        "<recipe>: server.args[0] (line 13): ${Y} in '${Y}' is left for the node's shell to expand, so Docker would "
        "receive other words than hgxkit checked; resolve it in the post, or declare it a secret ({{env:NAME}}, "
        "passed as -e NAME)"
    )


def test_a_recipe_without_a_model_directory_and_one_spanning_nodes() -> None:
    no_model = parse_recipe_text(RECIPE.split("model:")[0])
    assert context_for(no_model).mount_roots == ("/data/models",)
    two = parse_recipe_text(RECIPE.replace("  - --tp 2\n", "  - --tp 2 --nnodes 2\n"))
    assert context_for(two).spans_nodes is True and context_for(parse_recipe_text(RECIPE)).spans_nodes is False
    assert [d.name for d in dangerous_options(parse_recipe_text(RECIPE.replace("--gpus all", "--network host")))] == [
        "--network=host",
        "host-mount",
    ]
    assert [d.name for d in dangerous_options(two)] == ["host-mount"]
    two_host = parse_recipe_text(
        RECIPE.replace("  - --tp 2\n", "  - --tp 2 --nnodes 2\n").replace("--gpus all", "--network host")
    )
    assert [d.name for d in dangerous_options(two_host)] == ["--network=host", "host-mount"]  # needed, still named


def test_edge_values_of_sizes_limits_and_paths() -> None:
    def names(*words: str, ctx: PolicyContext | None = None) -> list[str]:
        return [d.name for d in judge_argv(["docker", "run", *words, "img"], ctx)]

    assert names("--pids-limit=") == ["--pids-limit"]  # an empty limit is no limit
    assert names("--shm-size", "lots", ctx=PolicyContext(host_memory_bytes=1)) == []  # no size at all is not judged
    assert names("--tmpfs", "/x:size=3t,opt=a:b") == ["--tmpfs"]  # options after the first colon, colons and all
    assert names("--mount", "type=volume,volume-opt=device=/etc/x=y,volume-opt=o=bind,target=/x") == [
        "host-system-mount"
    ]  # a device path may hold `=`
    huge = "type=bind,source=/etc,target=/x,label=" + "a" * 200_000  # over csv's field limit: split on commas
    assert names("--mount", huge) == ["host-system-mount"]
    assert names("-v", "/srv/x:/s", ctx=PolicyContext(mount_roots=("/",))) == []  # everything is under /
    assert names("-v", "/data/a:/a", ctx=PolicyContext(mount_roots=("/dataX",))) == ["host-mount"]
    assert names("-v", "/Xtra:/x", ctx=PolicyContext(mount_roots=("/tra",))) == ["host-mount"]


def test_mount_sources_by_every_key_and_only_mounts_hold_tmpfs_sizes() -> None:
    def names(*words: str, ctx: PolicyContext | None = None) -> list[str]:
        return [d.name for d in judge_argv(["docker", "run", *words, "img"], ctx)]

    assert names("--mount", "type=bind,src=/etc,target=/e") == ["host-system-mount"]
    assert names("--label", "type=tmpfs,tmpfs-size=3t") == []  # a label is no mount, whatever it says
    assert names("-v", "//Xetc/m:/x", ctx=PolicyContext(mount_roots=("/Xetc",))) == []  # `//` is `/`, not more


def test_expansion_problems_name_the_image_and_each_place() -> None:
    from dataclasses import replace

    recipe = parse_recipe_text(RECIPE)
    assert expansion_problems(recipe) == []
    shelled = replace(recipe, image=replace(recipe.image, reference="img:$TAG"))
    [problem] = expansion_problems(shelled)
    assert (problem.code, problem.where, problem.level) == ("expansion", ("image", "reference"), "error")
    assert problem.found == (
        "$TAG in 'img:$TAG' is left for the node's shell to expand, so Docker would receive other words than "
        "hgxkit checked"
    )
    assert problem.remedy == "resolve it in the post, or declare it a secret ({{env:NAME}}, passed as -e NAME)"
    assert expansions("$~/x") == ["~"] and expansions("$~/$X") == ["~", "$X"]


def test_an_expansion_in_one_groups_own_arguments_is_named_at_that_group() -> None:
    text = (Path(__file__).resolve().parents[2] / "fixtures" / "pd" / "dspark-pd-one-node.yaml").read_text()
    split = parse_recipe_text(text)
    assert expansion_problems(split) == []
    from dataclasses import replace

    assert split.groups is not None and split.groups.server_args is not None
    prefill, _ = split.groups.server_args
    own = (prefill, (("--disaggregation-mode", "$ROLE"),))
    shelled = replace(split, groups=replace(split.groups, server_args=own))
    [problem] = expansion_problems(shelled)
    assert (problem.code, problem.where) == ("expansion", ("groups", "server_args", 1))
    assert problem.found.startswith("$ROLE in '$ROLE' is left for the node's shell to expand")
