"""Reading the parent (a peer, or the fleet host above): its state and its files, over HTTP or SSH."""

from __future__ import annotations

import contextlib
import fcntl
import http.client
import json
import os
import shlex
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from hgxkit.model import core

from .errors import FetchError
from .fleetauth import FLEET_TIMEOUT_S, fleet_auth
from .hubbodies import _NoRedirects
from .partial import Partial, pump
from .peerserve import _STATE_SPLIT


def _ssh_opts(spec: core.Spec, control: bool = False) -> list[str]:
    """SSH to the parent with the host's peer key; AES-GCM first (AES-NI makes it the cheapest cipher per byte).
    `control`: share one connection for the small state reads; bulk streams get their own connection each."""
    opts = [
        "-i",
        spec.peer_key,
        "-T",
        "-o",
        "BatchMode=yes",
        "-o",
        "StrictHostKeyChecking=accept-new",
        "-o",
        f"UserKnownHostsFile={os.path.join(spec.state_dir, 'peer_known_hosts')}",
        "-o",
        "ConnectTimeout=10",
        "-o",
        "ServerAliveInterval=15",
        "-o",
        "LogLevel=ERROR",
        "-o",
        "Compression=no",
        "-o",
        "Ciphers=aes128-gcm@openssh.com,aes256-gcm@openssh.com,chacha20-poly1305@openssh.com,aes128-ctr",
    ]
    if control:
        path = os.path.join(spec.state_dir, "ssh-%C")
        return [*opts, "-o", "ControlMaster=auto", "-o", f"ControlPath={path}", "-o", "ControlPersist=15"]
    return [*opts, "-o", "ControlPath=none"]


def _target(spec: core.Spec) -> str:
    return f"{spec.peer_user}@{spec.peer_address}"


def _parent_dir(spec: core.Spec) -> str:
    return (spec.peer_dir or spec.local_dir).rstrip("/")


@dataclass
class ParentState:
    """What the parent holds: its commit, its whole file list (when it has one), the files it has verified,
    and whether its sync ended (complete, or failed with `error`)."""

    commit: str = ""
    repo_id: str = ""
    allow_patterns: list[str] = field(default_factory=list)
    plan: list[core.FileMeta] | None = None
    verified: dict[str, tuple[int, str | None, str | None]] = field(default_factory=dict)
    complete: bool = False
    error: str = ""
    error_at: float = 0.0


def _listing(doc: dict[str, Any], key: str, parent: str) -> list[core.FileMeta]:
    """File entries of a parent's manifest or journal; untrusted: every name must be harmless."""
    out = []
    for f in doc.get(key) or []:
        meta = core.FileMeta(str(f["path"]), int(f["size"]), f.get("sha256") or None, f.get("git_oid") or None)
        why = core.name_problem(meta.path)
        if why:
            raise FetchError(f"{parent} lists {meta.path!r}, which {why}: refusing its listing")
        out.append(meta)
    return out


def _who(spec: core.Spec) -> str:
    return f"fleet parent {spec.peer_name}" if spec.source == "fleet" else f"peer {spec.peer_name}"


def _parse_state(doc: Any, result: Any, who: str) -> ParentState | None:
    """A parent's manifest (complete) or journal (syncing) and its last result, as ParentState (None: neither)."""
    state = ParentState()
    try:
        if isinstance(result, dict) and result.get("ok") is False:
            state.error, state.error_at = str(result.get("error", "failed"))[:300], float(result.get("finished_at", 0))
        if not doc:
            return state if state.error else None
        state.commit = str(doc["commit"])
        state.repo_id = str(doc.get("repo_id", ""))
        state.allow_patterns = [str(p) for p in doc.get("allow_patterns") or []]
        state.complete = doc.get("schema") == core.MANIFEST_SCHEMA and "verified_at" in doc
        files = _listing(doc, "files", who)
        state.plan = files if state.complete else (_listing(doc, "plan", who) if "plan" in doc else None)
        state.verified = {f.path: (f.size, f.sha256, f.git_oid) for f in files}
    except (ValueError, TypeError, KeyError, AttributeError) as err:
        raise FetchError(f"{who}: its manifest or journal is not valid ({err})") from None
    return state


def _ssh_read(spec: core.Spec, remote: str) -> str:
    res = subprocess.run(["ssh", *_ssh_opts(spec, control=True), _target(spec), remote], capture_output=True, text=True)
    if res.returncode == 255:
        msg = (res.stderr.strip().splitlines() or ["ssh failed"])[-1]
        raise FetchError(f"cannot reach {spec.peer_name} at {_target(spec)} over SSH: {msg}", transient=True)
    return res.stdout


def peer_command(spec: core.Spec, verb: str, *args: str) -> str:
    """The remote command of a read from the parent: its program's `peer-serve` (which the parent's
    authorized_keys also forces for this host's key, so the key can run nothing else)."""
    words = [*shlex.split(spec.peer_program), "peer-serve", "--dir", _parent_dir(spec), "--state-dir", spec.state_dir]
    return shlex.join([*words, verb, *args])


def parent_state(spec: core.Spec) -> ParentState | None:
    """The parent's state read over SSH: its manifest or journal, and its last result."""
    head, _, tail = _ssh_read(spec, peer_command(spec, "state")).partition(_STATE_SPLIT)
    try:
        doc, result = (json.loads(head) if head.strip() else None), (json.loads(tail) if tail.strip() else None)
    except ValueError as err:
        raise FetchError(f"{_who(spec)}: its manifest or journal is not valid ({err})") from None
    return _parse_state(doc, result, _who(spec))


class ParentLink:
    """How this host reads its parent: over HTTP when the parent serves its verified files (a fleet host does,
    while its sync runs and until the hosts below it are done: no encryption cost per byte, sendfile on its
    side), with the port and a secret read over SSH from a root-only file; else over SSH (`peer-serve tail`)."""

    def __init__(self, spec: core.Spec) -> None:
        self.spec = spec
        self.base = ""  # http://parent:port when the parent serves
        self._secret = ""
        self._next_look = 0.0
        self._opener = urllib.request.build_opener(_NoRedirects())

    def _look(self, now: bool = False) -> None:
        """Read the parent's serve file over SSH (at most once a second): its port and secret, or nothing."""
        if self.base or (time.time() < self._next_look and not now) or self.spec.source != "fleet":
            return
        self._next_look = time.time() + 1
        text = _ssh_read(self.spec, peer_command(self.spec, "serve"))
        try:
            doc = json.loads(text) if text.strip() else {}
            port, secret = int(doc["port"]), str(doc["secret"])
            address = str(doc.get("address") or self.spec.peer_address)
        except (ValueError, TypeError, KeyError, AttributeError):
            return
        address = f"[{address}]" if ":" in address else address
        self.base, self._secret = f"http://{address}:{port}", secret

    def _req(self, path: str, headers: dict[str, str] | None = None, data: bytes | None = None) -> Any:
        """One request to the parent's server, signed with the secret (the secret itself never goes on the wire)."""
        headers = dict(headers or {})
        method = "POST" if data is not None else "GET"
        headers.update(fleet_auth(self._secret, method, path, headers.get("Range", ""), data or b""))
        req = urllib.request.Request(self.base + path, data=data, headers=headers, method=method)
        return self._opener.open(req, timeout=FLEET_TIMEOUT_S)

    def _drop(self) -> None:
        """The parent's server did not answer: SSH for a minute, then its serve file is read again."""
        self.base = ""
        self._next_look = time.time() + 60

    def state(self) -> ParentState | None:
        self._look()
        if self.base:
            try:
                with self._req("/state") as resp:
                    doc = json.loads(resp.read())
                return _parse_state(doc.get("state"), doc.get("result"), _who(self.spec))
            except (OSError, ValueError, http.client.HTTPException, AttributeError):
                self._drop()
        return parent_state(self.spec)

    def stream(self, meta: core.FileMeta, part: Partial) -> None:
        if not self.base:
            return ssh_stream(self.spec, meta, part)
        part.open()
        headers = {"Range": f"bytes={part.offset}-"} if part.offset else {}
        try:
            resp = self._req("/files/" + quote(meta.path), headers)
        except urllib.error.HTTPError as err:
            raise FetchError(
                f"{self.spec.peer_name} answered HTTP {err.code} for {meta.path}", transient=True
            ) from None
        except OSError as err:
            self._drop()
            raise FetchError(f"copying {meta.path} from {self.spec.peer_name}: {err}", transient=True) from None
        with resp:
            if part.offset and resp.status != 206:
                part.restart()
            try:
                pump(resp.readinto, part, meta.size - part.offset, f"copying {meta.path} from {self.spec.peer_name}")
            except (OSError, http.client.HTTPException) as err:
                raise FetchError(f"copying {meta.path} from {self.spec.peer_name}: {err}", transient=True) from None

    def done(self) -> None:
        """Tell a serving parent this host has its copy (it stops serving once all its children said so)."""
        with contextlib.suppress(FetchError):
            self._look(now=True)
        if self.base:
            with contextlib.suppress(OSError, http.client.HTTPException):
                self._req("/done", data=self.spec.host_name.encode()).close()


def ssh_stream(spec: core.Spec, meta: core.FileMeta, part: Partial) -> None:
    """The rest of `meta` from the parent over SSH (its `peer-serve tail`: the file from an offset), into `part`."""
    part.open()
    remote = peer_command(spec, "tail", str(part.offset), meta.path)
    argv = ["ssh", *_ssh_opts(spec), _target(spec), remote]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    with contextlib.suppress(OSError):
        fcntl.fcntl(proc.stdout.fileno(), 1031, 1 << 20)  # F_SETPIPE_SZ: 1 MB reads from ssh
    problem: FetchError | None = None
    try:
        pump(proc.stdout.readinto, part, meta.size - part.offset, f"copying {meta.path} from {spec.peer_name}")
        if proc.stdout.read(1):
            problem = FetchError(f"{meta.path} on {spec.peer_name} is longer than {meta.size} bytes")
    except FetchError as err:
        problem = err
    finally:
        proc.stdout.close()
        if problem is not None:
            proc.kill()
        code = proc.wait()
        err_text = proc.stderr.read().decode(errors="replace").strip()
        proc.stderr.close()
    if code not in (0, -9) or (problem is not None and err_text):
        msg = (err_text.splitlines() or [f"exit {code}"])[-1]
        raise FetchError(f"copying {meta.path} from {spec.peer_name}: {msg}", transient=True)
    if problem is not None:
        raise problem
