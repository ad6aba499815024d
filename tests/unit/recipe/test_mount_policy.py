"""Mounts a container could change between the check and the use (hgxkit/recipe/danger.py), as a threat model:
a source inside another read-write source (the container swaps it for a link to `/`, the next start binds the
host's root), a read-write mount of a models root or a directory above one, a read-write mount of a directory
of the models root that is not the recipe's own local_dir, and hgxkit's own named volumes. Every spelling
Docker takes is judged alike, the recipe and the literal argv the node hands Docker get the same verdict, and
each danger is allowed by its own name only."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from hgxkit.recipe.danger import (
    Danger,
    PolicyContext,
    _mounts_of,
    context_for,
    dangerous_options,
    host_paths,
    judge_argv,
)
from hgxkit.recipe.judge import Allowances, Refused, judge
from hgxkit.recipe.read import load_recipe
from hgxkit.serving.containers import container_specs

ROOT = Path(__file__).resolve().parents[3]
SEED = ROOT / "recipes" / "deepseek-v4-flash-dspark-marlin.yaml"
MINE = "/data/models/mine"
CTX = PolicyContext(mount_roots=("/data/models", MINE), local_dir=MINE)


def names(*options: str, ctx: PolicyContext = CTX) -> list[str]:
    return [d.name for d in judge_argv(["docker", "run", *options, "img"], ctx)]


NESTED = [
    ("-v", "/data/models/mine:/m", "-v", "/data/models/mine/sub:/s:ro"),
    ("--volume=/data/models/mine:/m", "--volume=/data/models/mine/sub:/s"),
    ("-v", "/data/models/mine/:/m:rw", "-v", "/data/models/mine/sub/:/s:ro,z"),
    ("-v", "/data/models/mine/x/..:/m", "-v", "/data/models/mine/./sub:/s"),
    ("-v", "//data//models/mine:/m", "-v", "/data/models/mine/sub:/s:ro"),
    ("--mount", "type=bind,source=/data/models/mine,target=/m", "--mount", "type=bind,src=/data/models/mine/a,dst=/a"),
    ("--mount", "type=bind,source=/data/models/mine,readonly=false,target=/m", "-v", "/data/models/mine/a:/a:ro"),
    ("-v", "/data/models/mine/sub:/s:ro", "-v", "/data/models/mine:/m"),  # the outer one written second
    ("-v", "/data/models/mine:/a", "-v", "/data/models/mine:/b:ro"),  # the same directory twice, once read-write
    (
        "-v",
        "/data/models/mine:/m",
        "--mount",
        "type=volume,target=/d,volume-opt=type=none,volume-opt=o=bind,volume-opt=device=/data/models/mine/d",
    ),
]


@pytest.mark.parametrize("options", NESTED, ids=range(len(NESTED)))
def test_a_source_inside_a_read_write_source_is_refused_in_every_spelling(options: tuple[str, ...]) -> None:
    assert names(*options) == ["nested-mount"]


def test_the_same_directory_read_write_twice_is_named_once() -> None:
    assert names("-v", "/data/models/mine:/a", "-v", "/data/models/mine/:/b") == ["nested-mount"]


@pytest.mark.parametrize(
    "options",
    [
        ("-v", "/data/models/mine:/m:ro", "-v", "/data/models/mine/sub:/s"),  # read-only outer: nothing to swap
        ("--mount", "type=bind,source=/data/models/mine,target=/m,readonly", "-v", "/data/models/mine/s:/s"),
        ("--mount", "type=bind,src=/data/models/mine,dst=/m,ro=true", "-v", "/data/models/mine/s:/s"),
        ("-v", "/data/models/mine:/a:ro", "-v", "/data/models/mine:/b:ro"),
        ("-v", "/data/models/mine/a:/a", "-v", "/data/models/mine/ab:/b"),  # a prefix is not a parent
        ("-v", "/data/models/mine:/m", "-v", "/dev/shm:/dev/shm", "-v", "cache:/c"),
    ],
)
def test_read_only_outer_mounts_siblings_and_volumes_pass(options: tuple[str, ...]) -> None:
    assert names(*options) == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("/data/models", ["models-root-mount"]),
        ("/data/models/", ["models-root-mount"]),
        ("/data/models/mine/..", ["models-root-mount"]),
        ("/data", ["host-mount", "models-root-mount"]),  # a directory above the root
        ("/srv/models", ["models-root-mount"]),  # the other models root the inventory allows
        ("/data/models/other", ["other-model-mount"]),  # another recipe's model directory
        ("/data/models/mine", []),
        ("/data/models/mine/cache", []),
    ],
)
def test_read_write_mounts_of_the_models_roots_and_other_recipes_directories(source: str, expected: list[str]) -> None:
    ctx = PolicyContext(mount_roots=("/data/models", "/srv/models", MINE), local_dir=MINE)
    assert names("-v", f"{source}:/x", ctx=ctx) == expected
    assert names("-v", f"{source}:/x:ro", ctx=ctx) == [n for n in expected if n == "host-mount"]


def test_without_a_local_dir_the_roots_subdirectories_are_the_recipes_to_name() -> None:
    plain = PolicyContext()
    assert names("-v", "/data/models/any:/m", ctx=plain) == []
    assert names("-v", "/data/models:/m", ctx=plain) == ["models-root-mount"]


@pytest.mark.parametrize(
    "options",
    [
        ("-v", "hgxkit-grafana:/var/lib/grafana"),
        ("--volume=hgxkit-grafana:/g:ro",),
        ("--mount", "type=volume,source=hgxkit-grafana,target=/g"),
        ("--mount", "src=HGXKIT-image-cache,target=/c"),
    ],
)
def test_hgxkits_own_named_volumes_are_refused(options: tuple[str, ...]) -> None:
    assert names(*options) == ["hgxkit-volume"]


def test_each_danger_is_allowed_by_its_own_name_only() -> None:
    [danger] = judge_argv(["docker", "run", "-v", "/data/models:/m", "img"], CTX)
    assert danger == Danger(
        "models-root-mount",
        "--volume=/data/models:/m",
        "mounts /data/models read-write, which holds the models root /data/models: the container can swap any "
        "recipe's model directory for a symlink; mount it read-only (:ro), or mount only model.local_dir",
        0,
        "mounts",
        by_name_only=True,
    )
    assert not danger.allowed_by(["mounts", "--volume", "-v", "host-mount"])
    assert danger.allowed_by(["models-root-mount"])


def _seed_with(option: str, tmp_path: Path):
    text = SEED.read_text().replace(
        "  - -v /data/models/deepseek-v4-flash-dspark:/model\n",
        f"  - -v /data/models/deepseek-v4-flash-dspark:/model\n  - {option}\n",
    )
    path = tmp_path / "r.yaml"
    path.write_text(text)
    return load_recipe(str(path))


@pytest.mark.parametrize(
    ("option", "danger"),
    [
        ("-v /data/models/deepseek-v4-flash-dspark/cache:/cache:ro", "nested-mount"),
        ("--mount type=bind,src=/data/models,dst=/all", "models-root-mount"),
        ("-v /data/models/other-recipe:/other", "other-model-mount"),
        ("-v hgxkit-grafana:/g", "hgxkit-volume"),
    ],
)
def test_check_and_node_refuse_the_same_mounts(option: str, danger: str, tmp_path: Path) -> None:
    recipe = _seed_with(option, tmp_path)
    allowances = Allowances()
    found = [d.name for d in dangerous_options(recipe, allowances.context(recipe))]
    assert danger in found
    with pytest.raises(Refused, match=danger):
        judge(recipe, allowances, 8)
    spec = container_specs(
        recipe, total_gpus=8, bind_address="127.0.0.1", api_key=None, image="img@sha256:" + "0" * 64
    )[0]
    assert danger in [d.name for d in judge_argv(spec.final_argv(), allowances.context(recipe))]
    judge(recipe, Allowances(docker_options=tuple(found)), 8)  # knowingly allowed by name


def test_host_paths_are_every_bind_source_and_read_file_of_the_argv() -> None:
    argv = [
        "docker",
        "run",
        "--rm",  # an option without a value
        "-v",
        "/data/models/m:/m",
        "-v",
        "/srv/$HOME:/h",  # a literal `$`: Docker receives it as it is
        "-v",
        "cache:/c",
        "--mount",
        "type=bind,src=/srv/a/,dst=/a",
        "--mount",
        "type=volume,dst=/d,volume-opt=device=/srv/d,volume-opt=o=bind",
        "--env-file",
        "/etc/hgxkit/k.env",
        "-v",
        "/data/models/m:/again:ro",
        "img",
        "-v",
        "/not/an/option:/x",
    ]
    assert host_paths(argv) == ["/data/models/m", "/srv/$HOME", "/srv/a/", "/srv/d", "/etc/hgxkit/k.env"]
    assert host_paths(["docker", "run", "--no-such-option", "img"]) == []
    # Docker receives an argv word as it is: `$$` is two dollars, and a value that looks like an option is a value
    assert host_paths(["docker", "run", "-v", "/srv/a$$b:/m", "img"]) == ["/srv/a$$b"]
    assert host_paths(["docker", "run", "--label", "--env-file=/x", "-v", "/srv/y:/m", "img"]) == ["/srv/y"]


def reasons(*options: str, ctx: PolicyContext = CTX) -> list[tuple[str, str]]:
    return [(d.name, d.reason) for d in judge_argv(["docker", "run", *options, "img"], ctx)]


def test_each_mount_danger_says_why_and_what_to_do() -> None:
    nested = (
        "mounts /srv/a/sub, which lies inside the read-write mount of /srv/a: the container can replace it with a "
        "symlink that the next start mounts; mount the outer directory read-only (:ro), or only one of the two"
    )
    other = (
        "mounts /data/models/theirs read-write, a directory of the models root /data/models that is not this "
        "recipe's model.local_dir (/data/models/mine): another recipe's model may live there; mount it read-only "
        "(:ro), or keep the files in model.local_dir"
    )
    volume = (
        "mounts the named volume hgxkit-prometheus, which belongs to hgxkit's own containers (monitoring, image "
        "cache); use a volume of another name"
    )
    ctx = PolicyContext(mount_roots=("/srv",))
    assert reasons("-v", "/srv/a:/a", "-v", "/srv/a/sub:/s", ctx=ctx) == [("nested-mount", nested)]
    assert reasons("-v", "/data/models/theirs:/t") == [("other-model-mount", other)]
    assert reasons("-v", "HGXKIT-prometheus:/p") == [("hgxkit-volume", volume.replace("hgxkit-", "HGXKIT-", 1))]
    assert reasons("-v", "hgxkit-prometheus:/p") == [("hgxkit-volume", volume)]
    spanning = " (a server spanning nodes needs it: allow it knowing the container reaches the host's loopback)"
    ((name, alone),) = reasons("--network=host")
    assert reasons("--network=host", ctx=PolicyContext(spans_nodes=True)) == [(name, alone + spanning)]


def test_a_source_mounted_twice_inside_another_read_write_mount_is_named_at_each() -> None:
    ctx = PolicyContext(mount_roots=("/srv",))
    found = names("-v", "/srv/a:/a", "-v", "/srv/a:/b", "-v", "/srv:/s", ctx=ctx)
    assert found == ["nested-mount", "nested-mount", "models-root-mount"]


@pytest.mark.parametrize(
    "option",
    [
        ("-v", "/data/models:/m:z,ro"),  # modes after the SELinux label
        ("--mount", "type=bind,src=/data/models,dst=/m,readonly=TRUE"),
        ("--mount", "type=bind,src=/data/models,dst=/m,ro=1"),
        ("--mount", "type=bind,src=/data/models,dst=/m,readonly=T"),  # Go's strconv.ParseBool, as Docker reads it
    ],
)
def test_read_only_in_any_spelling_keeps_a_models_root_safe(option: tuple[str, ...]) -> None:
    assert names(*option) == []
    read_write = (
        option[1]
        .replace(":z,ro", ":z")
        .replace("readonly=TRUE", "readonly=false")
        .replace("ro=1", "ro=0")
        .replace("=T", "=F")
    )
    assert names(option[0], read_write) == ["models-root-mount"]


def test_a_recipe_without_its_own_model_directory_judges_no_directory_as_anothers() -> None:
    recipe = load_recipe(str(SEED))
    for local_dir in (None, "/data/models"):  # none, or the models root itself
        changed = replace(recipe, model=replace(recipe.model, local_dir=local_dir))
        assert context_for(changed).local_dir == ""
    mine = context_for(recipe)
    assert mine.local_dir == recipe.model.local_dir
    assert reasons("-v", "/data/models/theirs:/t", ctx=replace(mine, local_dir="")) == []


def test_only_a_volume_or_a_mount_mounts() -> None:
    assert _mounts_of("--volume", None, 0) == [] and _mounts_of("--env", "A=/data/models/x:/x", 0) == []
