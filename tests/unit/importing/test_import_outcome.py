"""What an import hands out (`ImportOutcome`): an account of every line it read, and the source formats' registry
that a new format joins by one module and one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from hgxkit.importing import formats
from hgxkit.importing.commands import Simple
from hgxkit.importing.docker_run import import_with_notes
from hgxkit.importing.importer import ImportOptions, import_post
from hgxkit.importing.reading import Reading

POSTS = Path(__file__).resolve().parents[2] / "fixtures" / "posts"
FATES = {"taken", "changed", "read", "set aside"}
POST = """Serve it:

```
$ vllm serve org/Tiny-1B --port 8001 -tp 1
```
Then `vllm bench serve --model org/Tiny-1B --num-prompts 5`
"""


def test_every_line_has_one_fate() -> None:
    outcome = import_post([("post.md", POST)], ImportOptions(image="vllm/vllm-openai:v0.33.0"))
    shown = [(a.line, a.fate, a.into) for a in outcome.lines]
    assert shown == [
        (1, "set aside", ""),
        (2, "set aside", ""),
        (3, "set aside", ""),
        (4, "changed", "image, docker, server, model"),  # the prompt removed, the model placed
        (5, "set aside", ""),
        (6, "changed", "matrix"),
        (7, "set aside", ""),
    ]
    assert [a.why for a in outcome.lines if a.fate == "set aside"] == [
        "prose, comments or output",
        "a blank line",
        "a Markdown code fence",
        "a Markdown code fence",
        "a blank line",
    ]
    assert "post.md:4: prompt '$' removed" in outcome.lines[3].notes
    assert [a.text for a in outcome.lines] == POST.split("\n")


def test_one_docker_run_is_taken_whole() -> None:
    outcome = import_with_notes("docker run --gpus all img \\\n  python3 -m sglang.launch_server --tp 8\n")
    assert [(a.line, a.fate) for a in outcome.lines] == [(1, "taken"), (2, "taken"), (3, "set aside")]


class _Kubectl:
    """A made-up source format: `kubectl apply -f FILE` read as the manifest it names."""

    name = "kubectl apply"

    def claims(self, simple: Simple) -> bool:
        return simple.texts[:2] == ["kubectl", "apply"]

    def take(self, simple: Simple, reading: Reading) -> None:
        reading.said(simple, "read", f"manifest {simple.texts[-1]}", into="")


def test_a_new_format_joins_by_one_registry_line(monkeypatch: pytest.MonkeyPatch) -> None:
    assert [f.name for f in formats.FORMATS] == [
        "docker run",
        "docker build/tag",
        "bare launch",
        "benchmark command",
        "docker compose",
        "Kubernetes manifest",
        "SkyPilot task",
        "dstack run configuration",
        "Truss config",
        "Helm values file",
        "Slurm script",
        "Ray cluster",
    ]
    post = "kubectl apply -f server.yaml\nvllm serve org/Tiny-1B\n"
    before = import_post([("p.md", post)], ImportOptions(image="vllm/vllm-openai:v0.33.0"))
    assert before.lines[0].fate == "set aside" and "not a serving or benchmark command" in before.lines[0].why
    monkeypatch.setattr(formats, "FORMATS", (*formats.FORMATS, _Kubectl()))
    after = import_post([("p.md", post)], ImportOptions(image="vllm/vllm-openai:v0.33.0"))
    assert (after.lines[0].fate, after.lines[0].why) == ("read", "manifest server.yaml")
    assert after.recipe == before.recipe
