"""Resolve a model argument like vLLM (through huggingface_hub) would: a local directory, or a Hub repo id in the
Hugging Face cache, downloaded from ``HF_ENDPOINT`` unless ``HF_HUB_OFFLINE`` is set (stdlib only; simulated).

- A local path (it exists, or it starts with ``/``, ``./`` or ``~``) is used as it is.
- A repo id ``org/name`` is looked up in the cache: ``HF_HUB_CACHE``, else ``HF_HOME/hub``, else
  ``~/.cache/huggingface/hub``; ``models--org--name/refs/<revision>`` names the commit whose
  ``snapshots/<commit>/`` holds the files (a 40-hex revision is a commit itself).
- Online (no ``HF_HUB_OFFLINE=1``), the repo is fetched from ``HF_ENDPOINT`` (default https://huggingface.co;
  the simulated nodes run the Hub stand-in) into that cache first, in huggingface_hub's layout (blobs named by
  ETag, snapshot symlinks, refs), with ``HF_TOKEN`` as bearer token; ``*.bin``/``*.pt`` are skipped when
  safetensors exist, like vLLM's weight download. When the Hub cannot be reached, the cached snapshot is used,
  as huggingface_hub falls back to the cache.

Example:
    >>> resolve_model("/models/tiny", {}).source
    'local'
"""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

_COMMIT = re.compile(r"[0-9a-f]{40}")


class ModelNotFound(Exception):
    """The model cannot be resolved; `detail` says why (vLLM reports it as an invalid repository id)."""

    def __init__(self, model: str, detail: str) -> None:
        super().__init__(detail)
        self.model = model
        self.detail = detail


@dataclass(frozen=True)
class ResolvedModel:
    """Where the model's files are, and how they were found (``local``, ``cache`` or ``download``)."""

    path: Path
    source: str
    commit: str | None = None


def hub_cache(env: Mapping[str, str]) -> Path:
    """The huggingface_hub cache directory for `env`."""
    if env.get("HF_HUB_CACHE"):
        return Path(env["HF_HUB_CACHE"]).expanduser()
    home = (
        Path(env["HF_HOME"]).expanduser()
        if env.get("HF_HOME")
        else Path(env.get("HOME", "/root")) / ".cache/huggingface"
    )
    return home / "hub"


def is_local(model: str) -> bool:
    return model.startswith(("/", "./", "../", "~")) or Path(model).expanduser().exists()


def offline(env: Mapping[str, str]) -> bool:
    return env.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "on", "yes", "true")


def cached_snapshot(repo_id: str, revision: str, env: Mapping[str, str]) -> Path | None:
    """The cached snapshot directory of `repo_id` at `revision`, or None."""
    root = hub_cache(env) / ("models--" + repo_id.replace("/", "--"))
    commit = revision
    if not _COMMIT.fullmatch(revision):
        ref = root / "refs" / revision
        if not ref.is_file():
            return None
        commit = ref.read_text().strip()
    snap = root / "snapshots" / commit
    return snap if snap.is_dir() else None


def _get(url: str, token: str | None, accept_json: bool = False) -> tuple[bytes, dict[str, str]]:
    req = urllib.request.Request(url, headers={"User-Agent": "hgxkit-vllm-standin (simulated)"})
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    if accept_json:
        req.add_header("Accept", "application/json")
    with urllib.request.urlopen(req, timeout=60) as resp:
        return resp.read(), {k.lower(): v for k, v in resp.headers.items()}


def download_snapshot(repo_id: str, revision: str, env: Mapping[str, str]) -> Path:
    """Fetch `repo_id` at `revision` from ``HF_ENDPOINT`` into the cache; returns the snapshot directory."""
    endpoint = (env.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")
    token = env.get("HF_TOKEN") or env.get("HUGGING_FACE_HUB_TOKEN") or None
    rev = urllib.parse.quote(revision, safe="")
    raw, _ = _get(f"{endpoint}/api/models/{repo_id}/revision/{rev}", token, accept_json=True)
    info = json.loads(raw)
    commit = str(info["sha"])
    names = [str(s["rfilename"]) for s in info.get("siblings", [])]
    if any(n.endswith(".safetensors") for n in names):
        names = [n for n in names if not n.endswith((".bin", ".pt"))]
    root = hub_cache(env) / ("models--" + repo_id.replace("/", "--"))
    snap = root / "snapshots" / commit
    for name in names:
        target = snap / name
        if target.exists():
            continue
        body, headers = _get(f"{endpoint}/{repo_id}/resolve/{commit}/{urllib.parse.quote(name)}", token)
        etag = (headers.get("x-linked-etag") or headers.get("etag") or "").strip('"').removeprefix("W/").strip('"')
        blob = root / "blobs" / (etag or f"sim-{commit}-{name.replace('/', '_')}")
        blob.parent.mkdir(parents=True, exist_ok=True)
        tmp = blob.with_suffix(".incomplete")
        tmp.write_bytes(body)
        tmp.replace(blob)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(os.path.relpath(blob, target.parent))
    (root / "refs").mkdir(parents=True, exist_ok=True)
    if not _COMMIT.fullmatch(revision):
        (root / "refs" / revision).write_text(commit)
    return snap


def resolve_model(model: str, env: Mapping[str, str], revision: str | None = None) -> ResolvedModel:
    """Find `model`'s files (see the module doc); raises `ModelNotFound`."""
    if is_local(model):
        path = Path(model).expanduser()
        if not (path / "config.json").is_file():
            raise ModelNotFound(model, f"{path} has no config.json")
        return ResolvedModel(path, "local")
    if model.count("/") != 1 or not re.fullmatch(r"[\w.\-]+/[\w.\-]+", model):
        raise ModelNotFound(model, f"{model!r} is neither a local directory nor a repo id (org/name)")
    revision = revision or "main"
    error = ""
    if not offline(env):
        try:
            snap = download_snapshot(model, revision, env)
            if (snap / "config.json").is_file():
                return ResolvedModel(snap, "download", snap.name)
            error = "the repository has no config.json"
        except urllib.error.HTTPError as err:
            code = err.headers.get("X-Error-Code", "") if err.headers else ""
            error = f"{err.code} {code or err.reason} from {env.get('HF_ENDPOINT') or 'https://huggingface.co'}"
            if err.code in (401, 403, 404):  # not found / gated: no fallback to the cache, as huggingface_hub
                raise ModelNotFound(model, error) from err
        except (urllib.error.URLError, OSError, ValueError, KeyError) as err:
            error = f"cannot reach {env.get('HF_ENDPOINT') or 'https://huggingface.co'} ({err})"
    snap = cached_snapshot(model, revision, env)
    if snap is not None and (snap / "config.json").is_file():
        return ResolvedModel(snap, "cache", snap.name)
    where = hub_cache(env)
    reason = "HF_HUB_OFFLINE is set and" if offline(env) else f"{error};"
    raise ModelNotFound(model, f"{reason} no snapshot with config.json in the cache {where}")
