"""A post that is a Jinja template (an Ansible role's launcher script, unit file or compose file) named as one.

Its `{{ name }}` placeholders and `{% if %}` lines are filled in by the tool that renders it, so no reading of
the template is the command the node runs: a placeholder read as a word becomes a model called `{{`, and an
`{% if %}` line between continuation lines looks like a lost backslash. The refusal names the first marker of a
paragraph that holds a launch (on the launch's own line where it has one), and the way out: the rendered file,
or the values written in. A chat template's words (`messages`, `bos_token`, …), a GitBook tag (`{% code %}`), Go
templates (`{{ .Values.x }}`, `{{json .Config}}`), GitHub's `${{ … }}` and hgxkit's own `{{head}}` are no such
template.

Example:
    >>> template_refusal("role.j2", "vllm serve {{ vllm_model }} --port 8000").split(" (")[0]
    "role.j2:1: `{{ vllm_model }}` is a template's placeholder"
"""

from __future__ import annotations

import re

from hgxkit.recipe.spec import PLACEHOLDER_RE

# `{{ name }}`, `{{ a.b }}`, `{{ x['k'] }}`, `{{ name | default(1) }}`; not `${{ … }}` nor `{{ .Values }}`.
_PLACEHOLDER = re.compile(
    r"(?<![$\w{])\{\{-?[ \t]*[A-Za-z_][\w.]*(?:\[[^\]\n]{0,80}\])?[ \t]*(?:\|[^{}\n]{0,200})?-?\}\}"
)
_STATEMENT = re.compile(
    r"\{%-?[ \t]*(?:if|elif|else|endif|for|endfor|set|endset|do|macro|endmacro|include|block|endblock|raw|endraw)\b"
    r"[^%\n]{0,300}-?%\}"
)
_CHAT_WORDS = re.compile(r"message|bos_token|eos_token|add_generation_prompt|raise_exception|tool|content|role\b")
_ENGINE = re.compile(
    r"vllm serve|sglang serve|sglang\.launch_server|vllm\.entrypoints|vllm/vllm-openai|lmsysorg/sglang"
)
_LAUNCH = re.compile(rf"{_ENGINE.pattern}|docker run|docker_container|ExecStart=|^\s*(?:-\s*)?(?:image|command):")


def template_refusal(name: str, text: str) -> str | None:
    """The refusal of a post whose launch is a Jinja template's, naming its first marker; None for any other.
    Only the markers of a paragraph that holds a launch count (a chat template shown in a fence of its own is the
    template a flag names, not the post's)."""
    lines = text.split("\n")
    found = [(n, m.group()) for n in _launch_paragraphs(lines) for m in _markers(lines[n])]
    if not found:
        return None
    on_engine = ((n, m) for n, m in found if _ENGINE.search(lines[n]))
    on_launch = ((n, m) for n, m in found if _LAUNCH.search(lines[n]))
    number, marker = next(on_engine, None) or next(on_launch, None) or found[0]
    what = "statement" if marker.startswith("{%") else "placeholder"
    return (
        f"{name}:{number + 1}: `{marker}` is a template's {what} (the file is a template that a tool such as "
        "Ansible renders, not the command it runs); render it (the file the tool writes on the node) or write the "
        "values in, and import that"
    )


def _launch_paragraphs(lines: list[str]) -> list[int]:
    """The numbers (0-based) of the lines of each paragraph (lines between blank lines and fences) with a launch."""
    out: list[int] = []
    paragraph: list[int] = []
    for n, line in enumerate([*lines, ""]):
        if line.strip() and not line.lstrip().startswith(("```", "~~~")):
            paragraph.append(n)
            continue
        if any(_LAUNCH.search(lines[k]) for k in paragraph):
            out += paragraph
        paragraph = []
    return out


def _markers(line: str) -> list[re.Match[str]]:
    found = [*_PLACEHOLDER.finditer(line), *_STATEMENT.finditer(line)]
    return sorted(
        (m for m in found if not _CHAT_WORDS.search(m.group()) and not PLACEHOLDER_RE.fullmatch(m.group())),
        key=lambda m: m.start(),
    )


def template_file(lines: list[str] | tuple[str, ...]) -> tuple[int, str] | None:
    """(1-based line, marker) of the first of a file's Jinja statements when it is a template of an engine's
    deployment (three or more lines start with one, and vLLM or SGLang is named): a launch it builds from values
    (`{% set cmd = ["--model", values.vllm.model_name] %}`) is no command until rendered; None otherwise."""
    starts = [(n, m.group()) for n, line in enumerate(lines, 1) if (m := _STATEMENT.match(line.strip()))]
    if len(starts) < 3 or not any(re.search(r"(?i)vllm|sglang", line) for line in lines):
        return None
    return starts[0]
