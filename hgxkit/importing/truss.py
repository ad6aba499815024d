"""A Baseten Truss config (`config.yaml` with `docker_server.start_command`) as the `docker run` of its server.

Truss runs a custom server's `start_command` in the container of `base_image.image`; the file's keys become the
container:
- `base_image.image` is the image (a config without one runs Truss's own image, which serves nothing of itself:
  it imports only in the image `--image` names);
- `resources.accelerator: H100:8` the GPUs, `docker_server.server_port` the published port,
  `environment_variables` its environment (`secrets` names taken from the environment), and `--ipc=host` (the
  shared memory Baseten's runtime gives tensor-parallel ranks);
- `start_command` is the container's command (`sh -c "LAUNCH"` is the launch, as in any `docker run`).
What changes nothing the container runs with (`model_metadata`, `model_name`, `runtime`, the server's readiness,
liveness and predict endpoints) is set aside with one note; `build_commands` and `requirements`, which install
into the image, are refused by name (the recipe runs the image as it is).

Example:
    >>> from hgxkit.importing.documents import load_documents, yaml_regions
    >>> from hgxkit.importing.post import read_post
    >>> post = read_post("config.yaml", "base_image:\\n  image: lmsysorg/sglang:v0.5.6\\ndocker_server:\\n"
    ...                  "  start_command: python3 -m sglang.launch_server --model-path org/m --port 8000\\n"
    ...                  "  server_port: 8000\\nresources:\\n  accelerator: H100:2\\n")
    >>> [simple] = TRUSS.simples(load_documents(post, yaml_regions(post)[0]))
    >>> " ".join(simple.texts)
    'docker run --gpus "device=0,1" --ipc=host -p 8000:8000 lmsysorg/sglang:v0.5.6 python3 -m \
sglang.launch_server --model-path org/m --port 8000'
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hgxkit.errors import InputError
from hgxkit.importing.commands import Simple
from hgxkit.importing.documents import (
    LINE,
    LINES,
    SHAPE_ERRORS,
    Document,
    WordAt,
    as_input_error,
    document_simple,
    literal,
    refused,
    take_document,
)
from hgxkit.importing.reading import Reading
from hgxkit.recipe.nodes import HGX_GPUS
from hgxkit.recipe.shellwords import split_words

_SET_ASIDE = ("model_metadata", "model_name", "runtime", "description", "python_version", "external_package_dirs")
_INSTALLS = ("build_commands", "requirements", "system_packages")


class Truss:
    """A Truss config with a custom server: its start command in its base image (see the module docstring)."""

    name = "Truss config"

    def claims(self, simple: Simple) -> bool:
        return simple.kind == "truss"

    def take(self, simple: Simple, reading: Reading) -> None:
        take_document(simple, reading)

    def claims_document(self, data: Any) -> bool:
        server = data.get("docker_server") if isinstance(data, dict) else None
        return isinstance(server, dict) and "start_command" in server

    def simples(self, documents: Sequence[Document]) -> list[Simple]:
        out = []
        for document in documents:
            try:
                words, notes = _run_words(document)
            except (InputError, *SHAPE_ERRORS) as err:
                error = as_input_error(err, document.where(), "Truss config")
                out.append(refused(document, "truss", error, document.first, document.last))
                continue
            out.append(document_simple(document, "truss", words, document.first, document.last, notes))
        return out


TRUSS = Truss()


def _run_words(document: Document) -> tuple[list[WordAt], list[str]]:
    data = document.data
    lines: dict[str, int] = data.get(LINES, {})
    at = lines.get("docker_server", document.first)
    installs = [key for key in _INSTALLS if data.get(key)]
    if installs:
        raise InputError(
            f"{document.where(lines.get(installs[0]))}: {installs[0]}: installs into the Truss image, which a recipe "
            "runs as it is; give --image REF of an image that has it"
        )
    image = str((data.get("base_image") or {}).get("image") or "") or document.image
    if not image:
        raise InputError(
            f"{document.where(at)}: no base_image.image: Truss runs the command in its own image; give --image REF "
            "of an image that has the server"
        )
    server = data["docker_server"]
    words: list[WordAt] = [("docker", at), ("run", at), ("--gpus", at), (_gpus(data.get("resources")), at)]
    words.append(("--ipc=host", at))
    port = server.get("server_port")
    if port is not None:
        words += [("-p", at), (f"{literal(port)}:{literal(port)}", at)]
    for name, value in (data.get("environment_variables") or {}).items():
        if name not in (LINE, LINES):
            words += [("-e", at), (f"{name}={literal(value)}", at)]
    for name in data.get("secrets") or {}:
        if name not in (LINE, LINES):
            words += [("-e", at), (str(name), at)]
    words.append((image, lines.get("base_image", at)))
    command = split_words(str(server["start_command"]), source=document.post.name)
    words += [(word.text, at) for word in command]
    endpoints = [key for key in server if str(key).endswith("_endpoint")]
    aside = [key for key in _SET_ASIDE if key in data] + endpoints
    notes = [f"{document.where()}: a Truss config: {', '.join(aside)} set aside (Baseten's own settings)"]
    notes.append(
        f"{document.where(at)}: --ipc=host added: tensor-parallel ranks share memory through /dev/shm, which "
        "Baseten's runtime sizes and Docker's default 64 MB does not hold"
    )
    return words, notes


def _gpus(resources: Any) -> str:
    """`--gpus` for `resources.accelerator` (`H100:8`: the first 8; no count: 1)."""
    accelerator = str((resources or {}).get("accelerator") or "") if isinstance(resources, dict) else ""
    if not accelerator:
        return "all"
    count = int(accelerator.rpartition(":")[2]) if ":" in accelerator else 1
    return "all" if count >= HGX_GPUS else f'"device={",".join(str(i) for i in range(count))}"'
