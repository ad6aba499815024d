"""Hostile recipes and posts. A recipe is untrusted input that hgxkit deploys as root, so each case here attacks
one field or one parser and must be refused (one line naming file, key path and line, with what was
expected) or rendered inert (the payload reaches docker as one literal argument and no marker command runs).

Each case has a short id and a comment saying what it attacks. Fixtures are in tests/fixtures/hostile/.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hgxkit.errors import InputError
from hgxkit.importing.docker_run import import_docker_run, import_with_notes
from hgxkit.recipe.danger import DANGER_NAMES, dangerous_options
from hgxkit.recipe.dump import dump_recipe
from hgxkit.recipe.judge import findings
from hgxkit.recipe.read import MAX_RECIPE_BYTES, load_recipe, parse_recipe_text
from hgxkit.recipe.render import render_recipe
from hgxkit.recipe.shellwords import LITERAL_DOLLAR, quote_word

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "hostile"

# A sound grouped recipe; every file case below edits one line of it. Line numbers in the expected messages
# are those of this text: 4 image.reference, 7-9 docker.options, 13-14 server.args, 16-19 groups, 21-24 model.
BASE = """\
schema_version: 1
name: tiny
image:
  reference: img:1
docker:
  options:
  - --name '{{name}}'
  - --gpus '"device={{gpus}}"'
  - -p '{{port}}:30000'
server:
  command: sglang serve
  args:
  - --tp 2
  - --served-model-name tiny
groups:
  size: 2
  gpus_per_node: 4
  port_base: 5000
  name_template: tiny-{{group}}
model:
  repo_id: org/model
  revision: main
  local_dir: /data/models/tiny
  mount_point: /model
"""


def refusal(path: Path) -> str:
    """The one-line error loading `path` gives; fails the test if it loads or the error is not one line."""
    with pytest.raises(InputError) as caught:
        load_recipe(path)
    message = caught.value.message
    assert message.startswith(f"{path}: ")
    assert "\n" not in message
    return message


def write(tmp_path: Path, content: str | bytes, name: str = "hostile.yaml") -> Path:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def edited(old: str, new: str) -> str:
    assert BASE.count(old) == 1, old
    return BASE.replace(old, new)


def test_the_base_recipe_loads(tmp_path: Path) -> None:
    recipe = load_recipe(write(tmp_path, BASE))
    assert [g.name for g in render_recipe(recipe)] == ["tiny-0", "tiny-1"]


# --- Injection through every field of a recipe file: (id, line replaced, hostile line, expected message part) ---
FIELD_CASES = [
    # A shell command after the image: the rendered command line would run it.
    (
        "image-separator",
        "reference: img:1",
        'reference: "img:1; touch /tmp/pwned"',
        "image.reference (line 4): 'img:1; touch /tmp/pwned' does not match: expected a Docker image reference",
    ),
    # Command substitution in the image name.
    (
        "image-substitution",
        "reference: img:1",
        'reference: "img:$(touch /tmp/pwned)"',
        "image.reference (line 4): 'img:$(touch /tmp/pwned)' does not match",
    ),
    # Backticks in the image name.
    (
        "image-backticks",
        "reference: img:1",
        'reference: "img:`id`"',
        "image.reference (line 4): 'img:`id`' does not match",
    ),
    # An option where the image goes: docker would read it as --privileged.
    (
        "image-is-an-option",
        "reference: img:1",
        "reference: --privileged",
        "image.reference (line 4): '--privileged' does not match: expected a Docker image reference",
    ),
    # A trailing newline slips past a `$`-anchored regex; the loader matches whole values.
    (
        "image-trailing-newline",
        "reference: img:1",
        'reference: "img:1\\n"',
        "image.reference (line 4): 'img:1\\n' does not match",
    ),
    # Uppercase in a path component: not a reference Docker accepts, so what would run is undefined.
    (
        "image-uppercase-path",
        "reference: img:1",
        "reference: org/Img:1",
        "image.reference (line 4): 'org/Img:1' does not match",
    ),
    # A digest that pins nothing: uppercase hex.
    (
        "digest-uppercase",
        "reference: img:1",
        "reference: img:1\n  digest: sha256:" + "A" * 64,
        "image.digest (line 5): 'sha256:"
        + "A" * 51
        + "… does not match: expected an image digest: sha256: and 64 lowercase hex",
    ),
    # A container name template with a command in it.
    (
        "name-template-separator",
        "name_template: tiny-{{group}}",
        'name_template: "tiny-{{group}};reboot"',
        "groups.name_template (line 19): 'tiny-{{group}};reboot' does not match: expected a container name",
    ),
    # Two groups, one container name: the second `docker run` would replace or fail on the first.
    (
        "name-template-collision",
        "name_template: tiny-{{group}}",
        "name_template: tiny",
        "groups.name_template (line 19): every group would get the container name 'tiny'; put {{group}} in it",
    ),
    # A --name value with a command in it.
    (
        "docker-name-separator",
        "- --name '{{name}}'",
        "- --name 'x;reboot'",
        "docker.options[0] (line 7): --name 'x;reboot' does not match: expected a container name",
    ),
    # A fixed --name in a grouped recipe: every group gets it.
    (
        "docker-name-collision",
        "- --name '{{name}}'",
        "- --name fixed",
        "docker.options[0] (line 7): --name 'fixed': every group would get this container name",
    ),
    # A quote in the served model name breaks the JSON and shell lines verify writes with it.
    (
        "served-model-name-quote",
        "- --served-model-name tiny",
        "- --served-model-name 'ti\"ny'",
        "server.args[1] (line 14): --served-model-name 'ti\"ny' does not match: expected a model name",
    ),
    # A terminal escape in the served model name rewrites what an operator sees.
    (
        "served-model-name-escape",
        "- --served-model-name tiny",
        '- "--served-model-name ti\\e[2Jny"',
        "server.args[1] (line 14): control character U+001B in '--served-model-name ti\\x1b[2Jny'; remove it",
    ),
    # A model directory that climbs out of the models directory.
    (
        "local-dir-traversal",
        "local_dir: /data/models/tiny",
        "local_dir: /data/models/../../etc",
        "model.local_dir (line 23): '/data/models/../../etc' does not match: expected an absolute, normalised path",
    ),
    # A relative model directory: relative to whatever directory the role runs in.
    (
        "local-dir-relative",
        "local_dir: /data/models/tiny",
        "local_dir: data/models/tiny",
        "model.local_dir (line 23): 'data/models/tiny' does not match",
    ),
    # A colon adds a second mount to `-v local_dir:mount_point`.
    (
        "local-dir-colon",
        "local_dir: /data/models/tiny",
        "local_dir: /data/models/tiny:/etc",
        "model.local_dir (line 23): '/data/models/tiny:/etc' does not match",
    ),
    # A right-to-left override makes the path read differently from what it is.
    (
        "mount-point-bidi",
        "mount_point: /model",
        'mount_point: "/model\\u202e/cte"',
        "model.mount_point (line 24): control character U+202E in '/model\\u202e/cte'; remove it",
    ),
    # A `.` segment: not normalised, so a confinement check on the text could be fooled.
    (
        "mount-point-dot",
        "mount_point: /model",
        "mount_point: /model/.",
        "model.mount_point (line 24): '/model/.' does not match",
    ),
    # A repo id that is a path out of the Hub cache.
    (
        "repo-id-traversal",
        "repo_id: org/model",
        "repo_id: org/..",
        "model.repo_id (line 21): 'org/..' does not match: expected a Hugging Face repo id",
    ),
    # A URL where the repo id goes: the download would go elsewhere.
    (
        "repo-id-url",
        "repo_id: org/model",
        "repo_id: https://evil.example/x",
        "model.repo_id (line 21): 'https://evil.example/x' does not match",
    ),
    # A revision that climbs out of refs/.
    (
        "revision-traversal",
        "revision: main",
        "revision: ../../../etc",
        "model.revision (line 22): '../../../etc' does not match: expected a branch, tag or commit",
    ),
    # A revision that a git command would read as an option.
    (
        "revision-option",
        "revision: main",
        "revision: --upload-pack=touch /tmp/pwned",
        "model.revision (line 22): '--upload-pack=touch /tmp/pwned' does not match",
    ),
    # A revision with a command after a space.
    ("revision-space", "revision: main", 'revision: "main; id"', "model.revision (line 22): 'main; id' does not match"),
    # GPU id 64 does not exist; nvidia-container-toolkit errors or, worse, wraps.
    (
        "gpu-id-64",
        "size: 2",
        "explicit: [[0, 64]]",
        "groups.explicit[0][1] (line 16): 64 is more than the maximum of 63",
    ),
    # A float GPU count: JSON Schema's integer accepts 2.0, the loader does not.
    ("size-float", "size: 2", "size: 2.0", "groups.size (line 16): 2.0 is not of type 'integer', 'null'"),
    # A boolean GPU count (YAML 1.1 reads `yes` as true, and Python counts True as 1).
    ("size-bool", "size: 2", "size: yes", "groups.size (line 16): True is not of type 'integer', 'null'"),
    # More GPUs per group than a node has.
    ("size-65", "size: 2", "size: 65", "groups.size (line 16): 65 is more than the maximum of 64"),
    # No GPUs per node.
    (
        "gpus-per-node-zero",
        "gpus_per_node: 4",
        "gpus_per_node: 0",
        "groups.gpus_per_node (line 17): 0 is less than the minimum of 1",
    ),
    # The second group's port would be 65536.
    (
        "port-base-overflow",
        "port_base: 5000",
        "port_base: 65535",
        "groups.port_base (line 18): 65535 + 2 groups runs past port 65535; use a port_base of at most 65534",
    ),
    # A container port Docker cannot publish.
    (
        "publish-port-range",
        "- -p '{{port}}:30000'",
        "- -p '{{port}}:70000'",
        "docker.options[2] (line 9): -p '{{port}}:70000': port '70000' is not a number from 1 to 65535",
    ),
    # A server port of 0: the server binds a random port nobody can reach.
    (
        "server-port-zero",
        "- --tp 2",
        "- --port 0",
        "server.args[0] (line 13): --port: port '0' is not a number from 1 to 65535",
    ),
]


@pytest.mark.parametrize(("old", "new", "message"), [c[1:] for c in FIELD_CASES], ids=[c[0] for c in FIELD_CASES])
def test_injection_through_a_field_is_refused(tmp_path: Path, old: str, new: str, message: str) -> None:
    assert message in refusal(write(tmp_path, edited(old, new)))


# --- `$(…)`, backticks and expansion operators in the words that reach the rendered command ---
SUBSTITUTION_CASES = [
    # The case from the issue: escaped backticks inside "${X:-…}" survived the lexer and were re-quoted in
    # double quotes, so they ran when the rendered command ran.
    (
        "env-default-backticks",
        "- -p '{{port}}:30000'",
        "- -p '{{port}}:30000'\n  - '-e \"X=${X:-\\`touch /tmp/pwned\\`}\"'",
        "docker.options[3] (line 10): parameter expansion '${X:-\\\\`touch /tmp/pwned\\\\`}' at line 1, column 7 has an operator",
    ),
    # `:=` assigns on the host, and its word is expanded like the default's.
    (
        "env-assign-default",
        "- -p '{{port}}:30000'",
        "- -p '{{port}}:30000'\n  - '-e \"X=${X:=oops}\"'",
        "docker.options[3] (line 10): parameter expansion '${X:=oops}' at line 1, column 7 has an operator",
    ),
    # Single-quoted backticks are literal on the host, but `sh -c` in the container runs them.
    (
        "server-arg-single-quoted-backtick",
        "- --tp 2",
        "- --tp 2\n  - \"--chat-template 'a`id`'\"",
        "server.args[1] (line 14): command substitution (`) at line 1, column 19 is not imported, quoted or not",
    ),
    # An escaped `$(` is a literal `$(` on the host, and a command again wherever the value is re-evaluated.
    (
        "docker-option-escaped-substitution",
        "- -p '{{port}}:30000'",
        "- -p '{{port}}:30000'\n  - -l a=\\$(id)",
        "docker.options[3] (line 10): command substitution ($(…)) at line 1, column 7 is not imported, quoted or not",
    ),
    # `$(…)` in double quotes runs on the host.
    (
        "docker-option-double-quoted-substitution",
        "- -p '{{port}}:30000'",
        "- -p '{{port}}:30000'\n  - '-l \"a=$(id)\"'",
        "docker.options[3] (line 10): command substitution ($(…)) at line 1, column 7 is not imported",
    ),
    # Unquoted `$(` is shell syntax, not a word.
    (
        "docker-option-unquoted-substitution",
        "- -p '{{port}}:30000'",
        "- -p '{{port}}:30000'\n  - -l $(id)",
        "docker.options[3] (line 10): shell operator '$(' is not allowed here; quote it",
    ),
    # Backticks in the server program.
    (
        "server-command-backtick",
        "command: sglang serve",
        "command: sglang serve `id`",
        "server.command (line 11): shell operator '`' is not allowed here; quote it",
    ),
    # A command after `;` in a server argument.
    (
        "server-arg-separator",
        "- --tp 2",
        "- --tp 2; reboot",
        "server.args[0] (line 13): shell operator ';' is not allowed here; quote it",
    ),
]


@pytest.mark.parametrize(
    ("old", "new", "message"), [c[1:] for c in SUBSTITUTION_CASES], ids=[c[0] for c in SUBSTITUTION_CASES]
)
def test_command_substitution_is_refused_in_any_quoting(tmp_path: Path, old: str, new: str, message: str) -> None:
    assert message in refusal(write(tmp_path, edited(old, new)))


# --- Malformed files: one line each, fast, never a traceback or a hang ---
def _deep_block(levels: int) -> str:
    return (
        BASE
        + "description:\n"
        + "".join(" " * (2 * i + 2) + "a:\n" for i in range(levels))
        + " " * (2 * levels + 2)
        + "b\n"
    )


MALFORMED_CASES = [
    # A "billion laughs": 676 bytes that expand to 10^9 values (loading it naively never returns).
    (
        "alias-bomb",
        (FIXTURES / "alias-bomb.yaml").read_bytes(),
        "description.l4 (line 18): expands to more than 10000 values through YAML aliases (an alias bomb?)",
    ),
    # 100,000 nested flow sequences: PyYAML's composer recursed until RecursionError.
    (
        "deep-flow-nesting",
        ("[" * 100_000 + "]" * 100_000).encode(),
        "not valid YAML (line 1, column 33): nested deeper than 32 levels",
    ),
    # Deep block nesting, the other way to nest.
    ("deep-block-nesting", _deep_block(40).encode(), "nested deeper than 32 levels; a recipe nests at most 5"),
    # Twenty thousand values written out: not a recipe, and slow to compose.
    (
        "too-many-values",
        (BASE + "description: [" + "1," * 20_000 + "]\n").encode(),
        "more than 10000 values; a recipe holds a few hundred",
    ),
    # An executable renamed to .yaml.
    (
        "binary",
        (FIXTURES / "binary.yaml").read_bytes(),
        "binary file (NUL byte at line 1); a recipe is UTF-8 YAML text",
    ),
    # UTF-16 with a byte-order mark, what some Windows editors save.
    (
        "utf16-bom",
        (FIXTURES / "utf16-bom.yaml").read_bytes(),
        "UTF-16 (little-endian) text (byte-order mark); save it as UTF-8",
    ),
    # Latin-1: bytes that are not UTF-8.
    (
        "latin1",
        BASE.replace("name: tiny", "name: tïny").encode("latin-1"),
        "not UTF-8 (byte 0xEF at line 2); save it as UTF-8",
    ),
    # Over the size limit: a log or a model file given by mistake, or a slow-parse attack.
    (
        "oversized",
        (BASE + "description: " + "x" * MAX_RECIPE_BYTES + "\n").encode(),
        "larger than 256 KiB; a recipe is a few KiB of YAML",
    ),
    # A second `image` key: PyYAML keeps the last silently, so a reviewer reads one image and the node runs another.
    (
        "duplicate-top-level-key",
        (FIXTURES / "duplicate-image.yaml").read_bytes(),
        "image (line 13): duplicate key 'image' (first at line 4); YAML would keep only the last silently: remove one",
    ),
    # The same, one level down.
    (
        "duplicate-nested-key",
        BASE.replace("  revision: main", "  revision: main\n  revision: evil").encode(),
        "model.revision (line 23): duplicate key 'revision' (first at line 22)",
    ),
    # An integer key mixed with text keys (sorting them, or formatting a path, raised TypeError).
    ("integer-key", (BASE + "1: one\n").encode(), "<top> (line 25): key '1' is not a name (YAML reads it as int)"),
    # YAML 1.1 reads `on` as a boolean key.
    ("boolean-key", (BASE + "on: push\n").encode(), "<top> (line 25): key 'on' is not a name (YAML reads it as bool)"),
    # A 5000-digit integer: Python refuses to convert it (ValueError) and jsonschema compares it slowly.
    (
        "huge-integer",
        BASE.replace("port_base: 5000", "port_base: 1" + "0" * 5000).encode(),
        "groups.port_base (line 18): an integer of 5001 digits; recipe numbers are ports, counts and lengths",
    ),
    # Infinity passes a `minimum: 0` check.
    (
        "infinite-float",
        (
            BASE
            + "matrix: {input_lens: [1], concurrencies: [1], num_prompts: [1], output_len: 1, random_range_ratio: .inf}\n"
        ).encode(),
        "matrix.random_range_ratio (line 25): '.inf' is not a finite number",
    ),
    # An alias inside its own anchor: walking it never ends.
    (
        "recursive-alias",
        (BASE + "description: &loop [*loop]\n").encode(),
        "description[0] (line 25): an alias refers to the value that contains it",
    ),
    # A merge key pulls in keys that are not written where they take effect.
    (
        "merge-key",
        (BASE + "source: {<<: {url: x}}\n").encode(),
        "source (line 25): YAML merge keys (<<) are not supported",
    ),
    # A Python object tag: the safe loader refuses it; it must stay one line.
    (
        "python-tag",
        BASE.replace("name: tiny", "name: !!python/object/apply:os.system ['touch /tmp/pwned']").encode(),
        "not valid YAML (line 2, column 7): could not determine a constructor for the tag",
    ),
]


@pytest.mark.parametrize(("content", "message"), [c[1:] for c in MALFORMED_CASES], ids=[c[0] for c in MALFORMED_CASES])
def test_malformed_files_are_one_line_and_fast(tmp_path: Path, content: bytes, message: str) -> None:
    path = write(tmp_path, content)
    start = time.process_time()  # CPU, not wall: a hang or a blow-up shows in it, a loaded machine does not
    assert message in refusal(path)
    assert time.process_time() - start < 5.0  # the refusal is bounded, not a hang


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    # A named pipe never ends if nobody writes; /dev/zero never ends at all.
    fifo = tmp_path / "recipe.yaml"
    os.mkfifo(fifo)
    assert refusal(fifo) == f"{fifo}: not a regular file; give a recipe YAML file"
    assert refusal(Path("/dev/zero")) == "/dev/zero: not a regular file; give a recipe YAML file"


# --- Credentials written into a recipe file: refused, the message names where and never repeats the value ---
SECRET_FILE_CASES = [
    # A Hugging Face token pasted into an environment option.
    (
        "hf-token-in-env",
        "- -p '{{port}}:30000'",
        "- -p '{{port}}:30000'\n  - -e HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345",
        "docker.options[3] (line 10): a credential (hugging-face-token) is written in the recipe; recipes are shared, "
        "so give it from the environment: -e HF_TOKEN for a container variable, {{env:HF_TOKEN}} elsewhere",
    ),
    # A password inside the source URL.
    (
        "url-password-in-source",
        "name: tiny",
        "name: tiny\nsource:\n  url: https://poster:hunter22@forum.example/t/1",
        "source.url (line 4): a credential (url-password) is written in the recipe",
    ),
    # An API key as a server argument.
    (
        "api-key-in-server-args",
        "- --tp 2",
        "- --tp 2\n  - --api-key plain-api-key-value",
        "server.args[1] (line 14): a credential (flag-value) is written in the recipe",
    ),
    # A password in free text.
    (
        "password-in-description",
        "name: tiny",
        "name: tiny\ndescription: run with DB_PASSWORD=hunter22",
        "description (line 3): a credential (secret-name) is written in the recipe",
    ),
]


def test_prose_about_tokens_is_not_a_credential(tmp_path: Path) -> None:
    # Free text says "token" and "key" without holding one; only value-shaped or VARIABLE=… credentials count.
    text = edited(
        "name: tiny", "name: tiny\ndescription: 'accept length per token: 5.2; see the --token flag; key: fp8'"
    )
    assert (
        load_recipe(write(tmp_path, text)).description == "accept length per token: 5.2; see the --token flag; key: fp8"
    )


@pytest.mark.parametrize(
    ("old", "new", "message"), [c[1:] for c in SECRET_FILE_CASES], ids=[c[0] for c in SECRET_FILE_CASES]
)
def test_credentials_in_a_recipe_file_are_refused(tmp_path: Path, old: str, new: str, message: str) -> None:
    text = edited(old, new)
    got = refusal(write(tmp_path, text))
    assert message in got
    for secret in ("hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345", "hunter22", "plain-api-key-value"):
        assert secret not in got


# --- Posts: `recipe import` refuses what no recipe may hold, naming the key the recipe would have ---
IMPORT_CASES = [
    # A command in the image word.
    (
        "image-separator",
        "docker run 'img;id'",
        "post.txt: image.reference: 'img;id' does not match: expected a Docker image reference",
    ),
    # A command in the container name.
    ("name-separator", "docker run --name 'a;id' img", "post.txt: docker.options[0]: --name 'a;id' does not match"),
    # A quote in the served model name.
    (
        "served-model-name-quote",
        "docker run img sglang serve --served-model-name 'a\"b'",
        "post.txt: server.args[0]: --served-model-name 'a\"b' does not match",
    ),
    # Single-quoted backticks for the container's shell.
    (
        "single-quoted-backticks",
        "docker run img sh -c 'echo `id`'",
        "post.txt: command substitution (`) at line 1, column 28 is not imported, quoted or not",
    ),
    # `$(…)` in double quotes.
    (
        "double-quoted-substitution",
        'docker run -e "A=$(id)" img',
        "post.txt: command substitution ($(…)) at line 1, column 18",
    ),
    # A parameter expansion whose default runs on the host.
    (
        "expansion-operator",
        'docker run -e "A=${X:-$HOME}" img',
        "post.txt: parameter expansion '${X:-$HOME}' at line 1, column 18 has an operator",
    ),
    # A relative --model-path becomes the repo id: a path out of the Hub cache.
    (
        "repo-id-traversal",
        "docker run img sglang serve --model-path ../../etc",
        "post.txt: model.repo_id: '../../etc' does not match",
    ),
    # 65 GPUs in a group.
    (
        "too-many-gpus",
        "docker run --name m-X --gpus '\"device=" + ",".join(["X"] * 65) + "\"' -p 500X:1 img",
        "post.txt: groups.size: 65 is not a whole number of GPUs from 1 to 64",
    ),
    # A post the size of a log.
    (
        "oversized",
        "docker run img " + "x " * MAX_RECIPE_BYTES,
        "post.txt: longer than 256 KiB; paste one `docker run …` command, not a log",
    ),
]


@pytest.mark.parametrize(("post", "message"), [c[1:] for c in IMPORT_CASES], ids=[c[0] for c in IMPORT_CASES])
def test_hostile_posts_are_refused_by_import(post: str, message: str) -> None:
    with pytest.raises(InputError) as caught:
        import_docker_run(post, source="post.txt")
    assert message in caught.value.message
    assert "\n" not in caught.value.message


def test_a_hostile_revision_is_refused_by_import() -> None:
    # `--revision` comes from the command line of whoever imports; it must meet the same grammar.
    with pytest.raises(InputError, match=r"^post.txt: model.revision: '--upload-pack=x' does not match"):
        import_with_notes("docker run img", source="post.txt", revision="--upload-pack=x")


# --- Credentials in a post, in every form: the recipe holds a reference, never the value ---
SECRET_POST_CASES = [
    # The classic: a token in -e.
    (
        "env-hf-token",
        "-e HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345 img",
        "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345",
        "- -e HF_TOKEN\n",
    ),
    # An NGC key: the value goes, Docker reads it from the environment.
    (
        "env-ngc-key",
        "-e NGC_API_KEY=nvapi-AbCdEfGhIjKlMnOpQrStUvWxYz0123 img",
        "nvapi-AbCdEfGhIjKlMnOpQrStUvWxYz0123",
        "- -e NGC_API_KEY\n",
    ),
    # A proxy password: the whole value comes from the environment.
    ("env-url-password", "-e HTTPS_PROXY=http://u:Pr0xyPass@proxy:3128 img", "Pr0xyPass", "- -e HTTPS_PROXY\n"),
    # An AWS key id under a name that is not a secret name.
    (
        "env-aws-key-id",
        "-e AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE img",
        "AKIAIOSFODNN7EXAMPLE",
        "- -e AWS_ACCESS_KEY_ID\n",
    ),
    # A JWT in a label.
    (
        "label-jwt",
        "-l auth=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl img",
        "eyJhbGciOiJIUzI1NiJ9",
        "auth={{env:JWT_TOKEN}}",
    ),
    # A GitHub token in a label.
    (
        "label-github",
        "-l gh=ghp_FAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKE0000 img",
        "ghp_FAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKE0000",
        "gh={{env:GITHUB_TOKEN}}",
    ),
    # A bearer token in a health check.
    (
        "health-cmd-bearer",
        "--health-cmd 'curl -H \"Authorization: Bearer B3arerValue\" x' img",
        "B3arerValue",
        "Bearer {{env:BEARER_TOKEN}}",
    ),
    # --api-key as two words.
    ("flag-api-key", "img sglang serve --api-key Plain-Key-123", "Plain-Key-123", "--api-key '{{env:SGLANG_API_KEY}}'"),
    # --api-key=K.
    (
        "flag-api-key-equals",
        "img sglang serve --api-key=Plain-Key-123",
        "Plain-Key-123",
        "--api-key={{env:SGLANG_API_KEY}}",
    ),
    # --hf-token.
    ("flag-hf-token", "img sglang serve --hf-token Plain-Tok-123", "Plain-Tok-123", "--hf-token '{{env:HF_TOKEN}}'"),
    # --token.
    ("flag-token", "img sglang serve --token Plain-Tok-123", "Plain-Tok-123", "--token '{{env:SGLANG_TOKEN}}'"),
    # A token assigned inside `sh -c '…'`.
    ("sh-c-assignment", "img sh -c 'MY_TOKEN=Plain-Tok-123 exec serve'", "Plain-Tok-123", "MY_TOKEN={{env:MY_TOKEN}}"),
    # A URL password in a server argument.
    (
        "server-arg-url-password",
        "img serve --index-url https://u:P1pPass@pypi.corp/simple",
        "P1pPass",
        "https://u:{{env:URL_PASSWORD}}@pypi.corp",
    ),
    # An OpenAI key anywhere.
    (
        "openai-key",
        "img serve --openai-base sk-proj-ZyXwVuTsRqPoNmLkJiHgFe98765",
        "sk-proj-ZyXwVuTsRqPoNmLkJiHgFe98765",
        "{{env:OPENAI_API_KEY}}",
    ),
    # A Slack token in an environment variable with an ordinary name.
    ("env-slack", "-e NOTIFY=xoxb-1234567890-abcdefghij img", "xoxb-1234567890-abcdefghij", "- -e NOTIFY\n"),
]


@pytest.mark.parametrize(
    ("post", "secret", "reference"), [c[1:] for c in SECRET_POST_CASES], ids=[c[0] for c in SECRET_POST_CASES]
)
def test_secrets_in_a_post_become_references(post: str, secret: str, reference: str) -> None:
    result = import_with_notes(f"docker run {post}", source="post.txt")
    text = dump_recipe(result.recipe)
    assert secret not in text
    assert not any(secret in note for note in result.notes)
    assert reference in text
    parse_recipe_text(text, source="again.yaml")  # what import writes loads back


def test_the_secrets_fixture_post_leaves_no_secret_in_any_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from hgxkit.cli import main

    out = tmp_path / "r.yaml"
    # The server runs inside `sh -c '… && exec sglang serve --model-path org/model …'`, where import cannot
    # rewrite the model flag: --model-repo says which model the deploy places.
    argv = ["recipe", "import", str(FIXTURES / "post-secrets.txt"), "--name", "s", "--model-repo", "org/model"]
    assert main([*argv, "-o", str(out)]) == 0
    assert main(["recipe", "render", str(out)]) == 0
    captured = capsys.readouterr()
    text = out.read_text() + captured.out + captured.err
    for secret in (
        "hf_AbCd",
        "hf_ZyXw",
        "nvapi-",
        "Pr0xyPass",
        "AKIAIOSFODNN7EXAMPLE",
        "eyJhbGci",
        "Bear3rT0kenValue",
        "P1pPass",
        "sk-proj",
    ):
        assert secret not in text


# --- Dangerous docker options: named by `recipe check` (error) and by `recipe import` (note) ---
DANGER_CASES = [
    ("--privileged", "--privileged", "--privileged"),  # every device and capability
    ("--privileged=true", "--privileged=true", "--privileged"),  # the same, spelled with a value
    ("pid-host", "--pid=host", "--pid=host"),  # the host's processes
    ("userns-host", "--userns host", "--userns=host"),  # no user-namespace remapping
    ("uts-host", "--uts=host", "--uts=host"),  # the host's hostname
    ("net-host", "--net=host", "--network=host"),  # the host's network, through the hidden alias
    ("cgroupns-host", "--cgroupns host", "--cgroupns=host"),  # the host's cgroup tree
    ("cap-add", "--cap-add SYS_ADMIN", "--cap-add"),  # a capability
    ("seccomp-unconfined", "--security-opt seccomp=unconfined", "--security-opt=seccomp=unconfined"),
    ("apparmor-unconfined-colon", "--security-opt apparmor:unconfined", "--security-opt=apparmor=unconfined"),
    ("label-disable", "--security-opt label=disable", "--security-opt=label=disable"),
    ("systempaths-unconfined", "--security-opt systempaths=unconfined", "--security-opt=systempaths=unconfined"),
    ("device", "--device /dev/mem", "--device"),  # a host device node
    ("device-cgroup-rule", "--device-cgroup-rule 'c 1:1 rwm'", "--device-cgroup-rule"),
    ("volumes-from", "--volumes-from other", "--volumes-from"),  # another container's volumes
    ("group-add", "--group-add 999", "--group-add"),  # the docker group's id
    ("use-api-socket", "--use-api-socket", "--use-api-socket"),  # Docker's API inside the container
    ("host-root", "-v /:/host", "host-system-mount"),
    ("etc", "-v /etc:/x:ro", "host-system-mount"),
    ("etc-obfuscated", "-v //etc/../etc/:/x", "host-system-mount"),  # normalised before comparing
    ("parent-of-docker-state", "-v /var/lib:/x", "host-system-mount"),  # a directory above /var/lib/docker
    ("home-from-env", "-v $HOME:/h", "host-system-mount"),  # $HOME is /root when hgxkit deploys
    ("relative-path", "-v ./x:/x", "host-system-mount"),  # depends on the working directory
    ("docker-socket", "-v /var/run/docker.sock:/var/run/docker.sock", "docker-socket-mount"),
    ("docker-socket-mount-syntax", "--mount type=bind,source=/run/docker.sock,target=/s", "docker-socket-mount"),
    ("ssh-keys", "-v /root/.ssh:/keys:ro", "hgxkit-secret-mount"),
    ("hgxkit-config-csv-quoted", "--mount 'type=bind,\"source=/etc/hgxkit\",target=/c'", "hgxkit-secret-mount"),
    (
        "volume-opt-device",
        "--mount type=volume,dst=/x,volume-opt=type=none,volume-opt=o=bind,volume-opt=device=/",
        "host-system-mount",
    ),
    (
        "env-file-secrets",
        "--env-file /etc/hgxkit/serve.env",
        "host-file-read",
    ),  # hgxkit's secrets into the container env
    ("label-file-shadow", "--label-file /etc/shadow", "host-file-read"),  # any host file, readable with docker inspect
    ("cidfile", "--cidfile /etc/cron.d/x", "--cidfile"),  # a file written on the host as root
]


@pytest.mark.parametrize(("option", "name"), [c[1:] for c in DANGER_CASES], ids=[c[0] for c in DANGER_CASES])
def test_dangerous_options_are_check_errors_and_import_notes(option: str, name: str) -> None:
    result = import_with_notes(f"docker run --rm {option} img", source="post.txt")
    dangers = dangerous_options(result.recipe)
    assert [d.name for d in dangers] == [name]
    assert name in DANGER_NAMES
    errors = [f for f in findings(result.recipe) if f.code == "docker-option"]
    assert [f.level for f in errors] == ["error"]
    assert f'set allow_docker_options: ["{name}"] in the inventory (--allow-docker-option={name} ' in errors[0].message
    assert any(
        note.startswith(f"dangerous option {dangers[0].option}: ") and f'"{name}"' in note for note in result.notes
    )


@pytest.mark.parametrize(
    "option",
    [
        "--ipc=host",
        "--privileged=false",
        "-v /data/models:/model:ro",
        "-v hf-cache:/root/.cache",
        "--gpus all",
        "--env-file /data/sglang.env",
    ],
)
def test_ordinary_options_are_not_dangerous(option: str) -> None:
    # --ipc=host is the seed post's and SGLang's documented setting for tensor parallelism (shared memory
    # between ranks); it shares IPC, not the host's processes, files or devices.
    assert dangerous_options(import_docker_run(f"docker run {option} img")) == []


def test_the_dangerous_fixture_post_names_every_danger_once() -> None:
    result = import_with_notes((FIXTURES / "post-dangerous.txt").read_text(), source="post.txt")
    assert [d.name for d in dangerous_options(result.recipe)] == [
        "--privileged",
        "--pid=host",
        "--network=host",
        "--cap-add",
        "--security-opt=seccomp=unconfined",
        "--security-opt=apparmor=unconfined",
        "host-system-mount",
        "docker-socket-mount",
        "hgxkit-secret-mount",
        "hgxkit-secret-mount",
        "--device",
    ]


# --- Rendered inert: payloads that may load reach docker as literal arguments, and nothing runs ---
def run_rendered(command: str, workdir: Path) -> list[str]:
    """Run a rendered command with `docker` replaced by `printf '%s\\0'`; the argv docker would get."""
    script = "docker() { printf '%s\\0' \"$@\"; }\n" + command
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(workdir)}
    out = subprocess.run(["sh", "-c", script], cwd=workdir, env=env, capture_output=True, check=True, timeout=10)
    return out.stdout.decode().split("\0")[:-1]


def markers(workdir: Path) -> list[str]:
    return sorted(p.name for p in workdir.iterdir() if p.name.startswith("PWNED"))


PAYLOAD = '`touch PWNED1`$(touch PWNED2);touch PWNED3 |touch PWNED4 \'"$HOME" && touch PWNED5\n touch PWNED6'


def test_env_reference_values_from_the_environment_stay_literal(tmp_path: Path) -> None:
    # {{env:NAME}} is filled from the environment when the command runs; whatever the value holds, it is one
    # literal argument, never shell syntax.
    recipe = parse_recipe_text(edited("- --tp 2", "- --tp 2\n  - --api-key {{env:SGLANG_API_KEY}}"), source="r.yaml")
    group = render_recipe(recipe, secrets="resolve", environ={"SGLANG_API_KEY": PAYLOAD})[0]
    argv = run_rendered(group.shell(), tmp_path)
    assert argv[argv.index("--api-key") + 1] == PAYLOAD
    assert markers(tmp_path) == []


@pytest.mark.parametrize(
    ("item", "literal"),
    [
        # Separators and pipes inside quotes are text.
        ("-l 'x=;touch PWNED1;|touch PWNED2'", "x=;touch PWNED1;|touch PWNED2"),
        # A newline inside quotes is text, not a second command.
        ("\"-l 'x=\\ntouch PWNED3'\"", "x=\ntouch PWNED3"),
        # A single-quoted dollar stays a dollar on the host.
        ("-l 'x=$HOME'", "x=$HOME"),
        # Globs and a tilde are text.
        ("-l '*' -l '~'", "*"),
    ],
    ids=["separators", "newline", "single-quoted-dollar", "glob"],
)
def test_quoted_payloads_in_recipe_words_render_inert(tmp_path: Path, item: str, literal: str) -> None:
    recipe = parse_recipe_text(
        edited("- -p '{{port}}:30000'", f"- -p '{{{{port}}}}:30000'\n  - {item}"), source="r.yaml"
    )
    argv = run_rendered(render_recipe(recipe)[0].shell(), tmp_path)
    assert literal in argv
    assert markers(tmp_path) == []


def test_the_container_command_is_an_argument_to_docker_not_a_host_command(tmp_path: Path, posix_argv) -> None:
    # `sh -c 'touch PWNED'` runs in the container; on the host it is two words given to docker.
    recipe = parse_recipe_text(dump_recipe(import_docker_run("docker run img sh -c 'touch PWNED7; touch PWNED8'")))
    command = render_recipe(recipe)[0].shell()
    assert run_rendered(command, tmp_path)[-2:] == ["-c", "touch PWNED7; touch PWNED8"]
    assert posix_argv(command.replace("\\\n", ""), {"PATH": "/usr/bin:/bin"})[-1] == "touch PWNED7; touch PWNED8"
    assert markers(tmp_path) == []


def double_quoted_parts(shell_text: str) -> list[str]:
    """The text inside each double-quoted part of a POSIX shell word (what the shell still expands)."""
    parts: list[str] = []
    i = 0
    while i < len(shell_text):
        char = shell_text[i]
        if char == "'":
            i = shell_text.index("'", i + 1) + 1
        elif char == "\\":
            i += 2
        elif char == '"':
            end = i + 1
            while shell_text[end] != '"':
                end += 2 if shell_text[end] == "\\" else 1
            parts.append(shell_text[i + 1 : end])
            i = end + 1
        else:
            i += 1
    return parts


def test_the_inert_harness_does_see_a_command_that_runs(tmp_path: Path) -> None:
    # The check above is only worth something if a substitution that does run leaves its marker.
    run_rendered('docker run "$(touch PWNED0)" img', tmp_path)
    assert markers(tmp_path) == ["PWNED0"]


@pytest.mark.parametrize(
    ("word", "quoted"),
    [
        # The word, were it built in code: its default is not an expansion hgxkit keeps, so it is text.
        ("${X:-`touch PWNED`}", "'${X:-`touch PWNED`}'"),
        # An expansion next to a literal backtick: only the expansion is double-quoted.
        ("$HOME`id`", "\"$HOME\"'`id`'"),
        # A literal `$(` (lexer notation `$$(`) next to an expansion.
        ("$$(id)$HOME", "'$(id)'\"$HOME\""),
    ],
    ids=["operator-expansion", "backtick-after-expansion", "substitution-before-expansion"],
)
def test_quote_word_never_double_quotes_a_substitution(word: str, quoted: str) -> None:
    assert quote_word(word) == quoted
    assert not any("`" in part or "$(" in part for part in double_quoted_parts(quoted))


@settings(max_examples=150, deadline=None)
@given(
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12),
    st.booleans(),
)
def test_quote_word_keeps_any_literal_text_literal(text: str, with_expansion: bool) -> None:
    # Any text as a literal word (a value from the environment, a single-quoted post word) comes back through
    # sh unchanged, also next to a kept expansion; no double-quoted part holds a backtick or `$(`.
    word = text.replace("$", LITERAL_DOLLAR) + ("$X" if with_expansion else "")
    quoted = quote_word(word)
    env = {"PATH": "/usr/bin:/bin", "X": "ex"}
    out = subprocess.run(["sh", "-c", f"printf '%s' {quoted}"], capture_output=True, check=True, env=env)
    assert out.stdout.decode() == text + ("ex" if with_expansion else "")
    assert not any("`" in part or "$(" in part for part in double_quoted_parts(quoted))
