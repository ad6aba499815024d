"""Keep credentials out of everything hgxkit prints or writes.

Example:
    >>> redact("docker run -e HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz0123 img")
    'docker run -e HF_TOKEN=*** img'
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# Values that are credentials whatever they are called: Hugging Face and OpenAI-style keys.
SECRET_VALUE_RE = re.compile(r"hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{20,}")
# Environment variable names whose values are credentials (matched on the upper-cased name).
SECRET_NAME_RE = re.compile(
    r"^(HF_TOKEN|HUGGING_FACE_HUB_TOKEN|HUGGINGFACE_TOKEN|API_KEY|TOKEN|.*_API_KEY|.*_TOKEN|.*_SECRET|"
    r".*_SECRET_KEY|.*PASSWORD)$"
)
_ASSIGNMENT_RE = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)=([^\s'\"]+)")
_SECRET_FLAG_RE = re.compile(r"(--[A-Za-z0-9-]*(?:api-key|token|secret|password))(=|\s+)([^\s'\"]+)")
MASK = "***"


def is_secret_name(name: str) -> bool:
    """True when an environment variable of this name holds a credential (`HF_TOKEN`, `*_API_KEY`, …)."""
    return bool(SECRET_NAME_RE.match(name.upper()))


def is_secret_flag(flag: str) -> bool:
    """True for server flags that take a credential (`--api-key`, `--admin-api-key`, `--hf-token`)."""
    return bool(re.fullmatch(r"--[A-Za-z0-9-]*(api-key|token|secret|password)", flag))


def redact(text: str, known: Iterable[str] = ()) -> str:
    """Mask credentials in `text`: known secret values, `NAME=value` for secret names, secret flags."""
    for value in known:
        if value:
            text = text.replace(value, MASK)
    text = SECRET_VALUE_RE.sub(MASK, text)
    text = _ASSIGNMENT_RE.sub(
        lambda m: f"{m.group(1)}={MASK}" if is_secret_name(m.group(1)) and m.group(2) != MASK else m.group(0),
        text,
    )
    return _SECRET_FLAG_RE.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
