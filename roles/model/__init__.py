"""Model: a pinned, resumable, verified copy of the recipe's model in its `local_dir` (default /data/models/...).

The check first: the host's program compares `.hgxkit-manifest.json` with the Hub's metadata (a branch is
resolved to its commit) and with the files' sizes and mtimes, with no hashing, so a synced model costs one
fact (≈1 s). Otherwise: huggingface_hub (with hf_xet) in a dedicated virtualenv, the downloader uploaded, and
the sync started as the transient unit `hgxkit-model-<name>` (`systemd-run`), which an SSH drop or a pyinfra
timeout cannot kill; the role prints its progress while it waits, and a re-run attaches to a running one.
Every knob: roles/model/defaults.py.

Example (deploys/model.py):
    from roles.model import model
    model()                                   # the recipe named by inventory data `recipe`
    model("recipes/deepseek-v4-flash-dspark-flashinfer.yaml")
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import uuid
from io import StringIO
from pathlib import Path
from shlex import quote

from pyinfra import host, logger
from pyinfra.api import StringCommand, deploy
from pyinfra.api.exceptions import DeployError
from pyinfra.operations import apt, files, python, server

from hgxkit import model_core
from hgxkit.errors import HgxkitError
from hgxkit.facts import FileText, ModelSyncStatus
from hgxkit.recipe.loader import load_recipe
from roles.model.defaults import DEFAULTS, TOKEN_DIR

HERE = Path(__file__).parent
REPO_ROOT = HERE.parents[1]


class SecretLines(list):
    """Stdin lines that print as `***`: pyinfra logs fact arguments (`_stdin` included) with -vv.

    >>> str(SecretLines(["hf_xyz"])), f"{SecretLines(['hf_xyz'])}"
    ('***', '***')
    """

    def __repr__(self) -> str:
        return "***"

    __str__ = __repr__


def controller_token() -> str | None:
    """The Hub token on the controller: `hf_token_file`, else the `hf_token_env` variable (HF_TOKEN)."""
    path = host.data.get("hf_token_file")
    if path:
        try:
            return Path(str(path)).expanduser().read_text().strip() or None
        except OSError as err:
            raise DeployError(f"{host.name}: hf_token_file {path}: {err.strerror}; fix the path or unset it") from None
    return os.environ.get(str(host.data.get("hf_token_env") or "HF_TOKEN")) or None


def build_spec(recipe_path: str) -> dict[str, object]:
    """The downloader's spec for this host from the recipe and inventory data (no credentials in it)."""
    path = Path(recipe_path)
    try:
        spec_model = load_recipe(path if path.is_absolute() or path.exists() else REPO_ROOT / path).model
    except HgxkitError as err:
        raise DeployError(f"{host.name}: {err.message}") from None
    if not spec_model.repo_id or not spec_model.local_dir:
        raise DeployError(f"{host.name}: {recipe_path}: model.repo_id and model.local_dir are needed to sync a model")
    data = host.data
    source = str(data.get("model_source"))
    if source not in ("hub", "dir", "peer"):
        raise DeployError(f"{host.name}: model_source {source!r}; use hub, dir or peer")
    spec: dict[str, object] = {
        "repo_id": spec_model.repo_id,
        "revision": spec_model.revision or "main",
        "local_dir": spec_model.local_dir,
        "allow_patterns": list(spec_model.allow_patterns),
        "endpoint": data.get("hf_endpoint") or "",
        "source": source,
        "margin_pct": float(data.get("model_disk_margin_pct")),
        "margin_gb": float(data.get("model_disk_margin_gb")),
        "full_rehash": bool(data.get("model_full_rehash")),
        "workers": int(data.get("model_download_workers")),
        "retries": int(data.get("model_retries")),
        "backoff_s": float(data.get("model_retry_backoff_s")),
        "corrupt_refetch": int(data.get("model_corrupt_refetch")),
        "state_dir": data.get("model_state_dir"),
        "program_sha": program_sha(),
    }
    if source == "peer":
        peer_name = data.get("model_peer")
        peer = host.inventory.get_host(peer_name) if peer_name else None
        if peer is None or peer_name == host.name:
            raise DeployError(
                f"{host.name}: model_source peer needs model_peer naming another inventory host (got {peer_name!r})"
            )
        spec.update(
            peer_name=peer.name,
            peer_address=peer.data.get("model_peer_address") or peer.data.get("ssh_hostname") or peer.name,
            peer_user=data.get("model_peer_user"),
            peer_dir=spec_model.local_dir,
            peer_key=data.get("model_peer_key"),
            peer_wait_s=float(data.get("model_peer_wait_s")),
        )
    return spec


def _sources() -> list[Path]:
    return [HERE / "files" / "hgxkit_fetch.py", REPO_ROOT / "hgxkit" / "model_core.py"]


def program_sha() -> str:
    """The downloader's version as the host program computes it (hgxkit_fetch.program_sha)."""
    h = hashlib.sha256()
    for src in _sources():
        h.update(hashlib.sha256(src.read_bytes()).digest())
    return h.hexdigest()


def _paths() -> tuple[str, str, str]:
    venv = str(host.data.get("model_venv"))
    lib = str(host.data.get("model_lib_dir"))
    return f"{venv}/bin/python", f"{lib}/hgxkit_fetch.py", str(host.data.get("model_state_dir"))


def _run(command: str, **kwargs: object) -> tuple[bool, list[str]]:
    sudo = {"_sudo": True} if host.data.get("_sudo") else {}
    ok, output = host.run_shell_command(StringCommand(command), **sudo, **kwargs)
    return ok, output.stdout_lines


def _authorize_on_peer(peer_name: str, key: str, user: str) -> None:
    """Put this host's peer key into the peer's authorized_keys (once; the line is marked hgxkit-model-peer)."""
    ok, lines = _run(f"cat {quote(key + '.pub')}")
    pub = " ".join(lines).strip()
    if not ok or not pub.startswith("ssh-"):
        raise DeployError(f"{host.name}: no peer key at {key}.pub")
    peer = host.inventory.get_host(peer_name)
    if not peer.connected:
        peer.connect(raise_exceptions=True)
    home = "~" if user == "root" else f"~{user}"
    auth = f"{home}/.ssh/authorized_keys"
    cmd = (
        f"mkdir -p -m 700 {home}/.ssh && touch {auth} && chmod 600 {auth} && "
        f"(grep -qxF {quote(pub)} {auth} || echo {quote(pub)} >> {auth})"
    )
    ok, out = peer.run_shell_command(StringCommand(cmd))
    if not ok:
        raise DeployError(f"{host.name}: could not authorize the peer key on {peer_name}: {out.stderr[:200]}")


def _start_or_attach(spec_path: str, local_dir: str, with_token: bool) -> None:
    """Start the sync unit (or attach to the running one) and print its progress until it ends or we time out."""
    token = controller_token() if with_token else None  # read here, so it is never an operation argument
    py, script, state_dir = _paths()
    unit = model_core.unit_name(local_dir)
    name = model_core.model_name(local_dir)
    progress_path, result_path = f"{state_dir}/{name}.progress.json", f"{state_dir}/{name}.result.json"
    active, _ = _run(f"systemctl is-active --quiet {unit}")
    if active:
        host.log(f"attached to the running download ({unit})", log_func=logger.info)
    else:
        token_file = f"{TOKEN_DIR}/{name}.token"
        _run(f"rm -f {quote(result_path)} {quote(progress_path)}")
        if token:
            ok, _ = _run(f"umask 077 && mkdir -p {TOKEN_DIR} && cat > {token_file}", _stdin=SecretLines([token]))
            if not ok:
                raise DeployError(f"{host.name}: could not write the token file under {TOKEN_DIR}")
        argv = [
            "systemd-run",
            f"--unit={unit}",
            "--collect",
            "--quiet",
            f"--description=hgxkit model sync of {local_dir}",
            "--setenv=HF_HUB_DISABLE_PROGRESS_BARS=1",
            "--setenv=HF_HUB_DISABLE_TELEMETRY=1",
            py,
            script,
            "run",
            "--spec",
            spec_path,
            "--run-id",
            uuid.uuid4().hex[:12],
        ]
        if token:
            argv += ["--token-file", token_file]
        ok, _ = _run(" ".join(quote(a) for a in argv))
        if not ok:
            _run(f"rm -f {token_file}")
            raise DeployError(f"{host.name}: systemd-run could not start {unit}: see `journalctl -u {unit}`")
        host.log(f"download started in {unit} (follow it with `journalctl -fu {unit}`)", log_func=logger.info)
    interval = float(host.data.get("model_poll_interval_s"))
    every = float(host.data.get("model_progress_every_s"))
    deadline = time.time() + float(host.data.get("model_wait_timeout_s"))
    last_print = 0.0
    while True:
        time.sleep(interval)
        _, lines = _run(f"systemctl is-active --quiet {unit}; echo $?; cat {quote(progress_path)} 2>/dev/null")
        still = bool(lines) and lines[0].strip() == "0"
        try:
            progress = model_core.Progress(**json.loads("\n".join(lines[1:])))
        except (ValueError, TypeError):
            progress = None
        if progress is not None and (time.time() - last_print >= every or not still):
            last_print = time.time()
            host.log(f"model {name}: {model_core.format_progress(progress)}", log_func=logger.info)
        if not still:
            return
        if time.time() > deadline:
            host.log(f"stopped waiting; the download goes on in {unit}; re-run to attach", log_func=logger.warning)
            return


@deploy("hgxkit model", data_defaults=DEFAULTS)
def model(recipe: str | None = None) -> None:
    """Make the recipe's model a verified copy in its local_dir; a verified copy costs one metadata check."""
    spec = build_spec(recipe or str(host.data.get("recipe")))
    spec_json = json.dumps(spec, sort_keys=True)
    local_dir = str(spec["local_dir"])
    name = model_core.model_name(local_dir)
    py, script, state_dir = _paths()
    token = controller_token() if spec["source"] != "peer" else None
    extra = {"_stdin": SecretLines([token])} if token else {}
    started = time.perf_counter()
    status = host.get_fact(ModelSyncStatus, python=py, script=script, spec=spec_json, token=bool(token), **extra)
    took = time.perf_counter() - started
    state = status.get("state")
    if state == "complete":
        host.log(f"model {name}: {status.get('reason')}; check took {took:.2f}s", log_func=logger.info)
        return
    if state == "error":
        raise DeployError(f"{host.name}: {status.get('reason')}")

    files.directory(name="Model state directory", path=state_dir, mode="0755")
    files.directory(name="Model downloader directory", path=str(host.data.get("model_lib_dir")), mode="0755")
    apt.packages(name="python3-venv, rsync and ssh for the model downloader", packages=_host_packages())
    requirement = str(host.data.get("model_hf_hub_requirement"))
    venv = str(host.data.get("model_venv"))
    stamp = f"{venv}/.hgxkit-requirement"
    if (host.get_fact(FileText, path=stamp) or "").strip() != requirement:
        server.shell(
            name=f"Virtualenv {venv} with {requirement}",
            commands=[
                f"python3 -m venv {quote(venv)}",
                f"{quote(venv)}/bin/pip install --quiet --disable-pip-version-check {quote(requirement)}",
                f"echo {quote(requirement)} > {quote(stamp)}",
            ],
        )
    for src in _sources():
        files.put(
            name=f"Upload {src.name}", src=str(src), dest=f"{host.data.get('model_lib_dir')}/{src.name}", mode="0755"
        )
    spec_path = f"{state_dir}/{name}.spec.json"
    files.put(name=f"Sync spec {spec_path}", src=StringIO(spec_json + "\n"), dest=spec_path, mode="0644")
    if spec["source"] == "peer":
        key = str(spec["peer_key"])
        server.shell(
            name="SSH key for peer copies",
            commands=[
                f"mkdir -p -m 700 {quote(os.path.dirname(key))}",
                f"test -f {quote(key)} || "
                f"ssh-keygen -q -t ed25519 -N '' -C hgxkit-model-peer@{host.name} -f {quote(key)}",
            ],
        )
        python.call(
            name=f"Authorize the peer key on {spec['peer_name']}",
            function=_authorize_on_peer,
            peer_name=str(spec["peer_name"]),
            key=key,
            user=str(spec["peer_user"]),
        )
    python.call(
        name=f"Sync {spec['repo_id']}@{spec['revision']} to {local_dir} (unit {model_core.unit_name(local_dir)})",
        function=_start_or_attach,
        spec_path=spec_path,
        local_dir=local_dir,
        with_token=bool(token),
    )
    server.shell(
        name=f"Verified {local_dir}",
        commands=[f"{quote(py)} {quote(script)} result --spec {quote(spec_path)}"],
    )


def _host_packages() -> list[str]:
    return ["python3-venv", "rsync", "openssh-client"]
