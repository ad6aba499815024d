"""Model: a pinned, resumable, verified copy of the recipe's model in its `local_dir` (default /data/models/...).

The check first: the host's program compares `.hgxkit-manifest.json` with the Hub's metadata (a branch is
resolved to its commit) and with the files' sizes and mtimes, with no hashing, so a synced model costs one
fact (≈1 s). Otherwise: huggingface_hub (with hf_xet) in a dedicated virtualenv, the downloader (hgxkit/model/fetch/
built into one file, and core.py) uploaded, and the sync started as the transient unit `hgxkit-model-<name>`
(`systemd-run`), which an SSH drop or a pyinfra timeout cannot kill; the role prints its progress while it
waits, and a re-run attaches to a running one. Every knob: roles/model/defaults.py.

With `model_source: fleet` the hosts form a tree in inventory order (`model_fleet_fanout` children each): the
first downloads from the Hub, every other host streams each file from its parent as soon as the parent has
verified it, and checks it against the Hub's hashes itself.

Example (deploys/model.py):
    from roles.model import model
    model()                                   # the recipe named by the `recipe` knob
"""

from __future__ import annotations

import json
import os
import re
import shlex
import time
import uuid
from dataclasses import replace
from io import BytesIO, StringIO
from pathlib import Path
from typing import Any

from pyinfra import host, logger
from pyinfra.api import Host, deploy
from pyinfra.api.exceptions import DeployError
from pyinfra.operations import apt, files, python, server

from hgxkit.bundle.source import NodeBundle, delivered
from hgxkit.errors import HgxkitError
from hgxkit.hostcmd import HostRunner, SecretLines, argv, script
from hgxkit.knobs import ssh_hostname
from hgxkit.model import core, nodeprogram
from hgxkit.model.facts import ModelSyncStatus
from hgxkit.model.placement import model_dir_problems
from hgxkit.node.facts_files import FileText, RealPath
from hgxkit.planfacts import plan_fact
from hgxkit.problems import refuse
from hgxkit.recipe.host_recipe import recipe_for
from hgxkit.recipe.spec import ModelSpec, Recipe
from hgxkit.runfailure import RunFailure
from hgxkit.serving.nodegroups import fabric_address
from hgxkit.serving.steps import judged_for
from roles.model.defaults import DEFAULTS, TOKEN_DIR, ModelKnobs


def controller_token() -> str | None:
    """The Hub token on the controller: `hf_token_file`, else the `hf_token_env` variable (HF_TOKEN)."""
    path = ModelKnobs.from_host(host).hf_token_file
    if path:
        try:
            return Path(str(path)).expanduser().read_text().strip() or None
        except OSError as err:
            refuse(f"{host.name}: no Hub token", [f"hf_token_file {path}: {err.strerror}; fix the path or unset it"])
    return os.environ.get(str(ModelKnobs.from_host(host).hf_token_env or "HF_TOKEN")) or None


def _model_roots() -> list[str]:
    return [str(ModelKnobs.from_host(host).models_dir), *(ModelKnobs.from_host(host).model_dirs_allowed or [])]


def build_spec(check: bool = True) -> core.Spec:
    """The downloader's spec for this host from the recipe and the role's knobs (no credentials in it); with
    `check`, from the judged recipe, first refusing a local_dir outside the allowed roots (read on the node).
    Without (`plan_reads`, before the run lock is held), from the recipe as loaded: judging it reads the node's
    memory and GPUs, and those reads are to ride in the lock's batch, not go ahead of it on their own channels."""
    recipe = judged_for(host).recipe if check else recipe_for(host)
    model = recipe.model
    if not model.repo_id or not model.local_dir:
        refuse(
            f"{host.name}: no model to sync",
            [f"{recipe.path}: model.repo_id and model.local_dir are needed to sync a model"],
        )
    if check:
        _refuse_misplaced_model(recipe)
    knobs = ModelKnobs.from_host(host)
    bundle = delivered(host)  # the `bundle` knob: the model and its manifest from the bundle, no Hub at all
    source = _model_source(knobs, bundle)
    spec = _download_spec(model, knobs, source, bundle)
    if source == "fleet":
        spec, peer = _place_in_fleet(spec, knobs)
        if peer is None:
            return spec  # the root: from the Hub
    elif source == "peer":
        peer = _named_peer(knobs)
    else:
        return spec
    return _copy_from_peer(spec, peer, knobs)


def _refuse_misplaced_model(recipe: Recipe) -> None:
    """Stop before anything changes when the recipe's local_dir, as the node resolves it, is outside the
    allowed roots."""
    roots = _model_roots()
    refuse(
        f"{host.name}: {recipe.path}: the model may not go where the recipe says; nothing was changed",
        model_dir_problems(
            recipe.model.local_dir,
            roots,
            plan_fact(host, RealPath, path=recipe.model.local_dir),
            [plan_fact(host, RealPath, path=root) for root in roots],
        ),
    )


def _model_source(knobs: ModelKnobs, bundle: NodeBundle | None) -> str:
    """Where the model comes from: the bundle when one is delivered, else the `model_source` knob."""
    source = "bundle" if bundle else str(knobs.model_source)
    if source not in ("hub", "dir", "peer", "fleet", "bundle"):
        refuse(f"{host.name}: the model role's knobs", [f"model_source {source!r}; use hub, dir, peer or fleet"])
    return source


def _download_spec(model: ModelSpec, knobs: ModelKnobs, source: str, bundle: NodeBundle | None) -> core.Spec:
    """The spec of a copy from the Hub, a directory or the bundle: what every source shares."""
    return core.Spec(
        repo_id=model.repo_id,
        revision=model.revision or "main",
        local_dir=model.local_dir,
        allow_patterns=list(model.allow_patterns),
        endpoint=knobs.hf_endpoint or "",
        source=source,
        margin_pct=float(knobs.model_disk_margin_pct),
        margin_gb=float(knobs.model_disk_margin_gb),
        full_rehash=bool(knobs.model_full_rehash),
        workers=int(knobs.model_download_workers),
        retries=int(knobs.model_retries),
        backoff_s=float(knobs.model_retry_backoff_s),
        corrupt_refetch=int(knobs.model_corrupt_refetch),
        state_dir=str(knobs.model_state_dir),
        program_sha=program_sha(),
        xet=bool(knobs.model_xet),
        xet_high_performance=bool(knobs.model_xet_high_performance),
        xet_cache_dir=str(knobs.model_xet_cache_dir or ""),
        xet_chunk_cache_gb=float(knobs.model_xet_chunk_cache_gb),
        xet_shard_cache_gb=float(knobs.model_xet_shard_cache_gb),
        bundle_dir=bundle.model_dir if bundle else "",
    )


def _place_in_fleet(spec: core.Spec, knobs: ModelKnobs) -> tuple[core.Spec, Host | None]:
    """The spec of this host's place in the fleet tree (where it serves the children within `--limit`), and the
    parent it copies from (None for the root, which downloads from the Hub)."""
    order, fanout = fleet_order(), int(knobs.model_fleet_fanout)
    children = [h for h in order if h != host.name and fleet_parent(h, order, fanout) == host.name]
    spec = replace(
        spec,
        host_name=host.name,
        fleet_port=int(knobs.model_fleet_port),
        fleet_bind=fabric_address(host) or "",
        fleet_bind_any=bool(knobs.model_fleet_bind_any),
        fleet_children=[h for h in children if host.state.is_host_in_limit(host.inventory.get_host(h))],
    )
    parent = fleet_parent(host.name, order, fanout)
    return spec, None if parent is None else host.inventory.get_host(parent)


def _named_peer(knobs: ModelKnobs) -> Host:
    """The inventory host `model_peer` names for model_source peer; refused unless it is another host."""
    peer_name = knobs.model_peer
    peer = host.inventory.get_host(peer_name, None) if peer_name else None
    if peer is None or peer_name == host.name:
        refuse(
            f"{host.name}: the model role's knobs",
            [f"model_source peer needs model_peer naming another inventory host (got {peer_name!r})"],
        )
        raise AssertionError  # refuse stopped the run
    return peer


def _copy_from_peer(spec: core.Spec, peer: Host, knobs: ModelKnobs) -> core.Spec:
    """The spec with what a copy streamed over SSH from `peer` needs: where it is reached, as whom, with which
    key, and its downloader."""
    return replace(
        spec,
        peer_name=peer.name,
        peer_address=ModelKnobs.from_host(peer).model_peer_address or ssh_hostname(peer) or peer.name,
        peer_user=str(knobs.model_peer_user),
        peer_dir=spec.local_dir,
        peer_key=str(knobs.model_peer_key),
        peer_wait_s=float(knobs.model_peer_wait_s),
        peer_program=peer_program(peer),
    )


def fleet_order() -> list[str]:
    """The hosts of the fleet tree: every inventory host with model_source fleet, in inventory order (the same
    on every host, whatever `--limit` says)."""
    return [h.name for h in host.inventory if ModelKnobs.from_host(h).model_source == "fleet"]


def fleet_parent(name: str, order: list[str], fanout: int) -> str | None:
    """The host `name` copies from in a tree of `fanout` children per host over `order`; None for the root.

    >>> [fleet_parent(n, ["a", "b", "c", "d", "e"], 2) for n in "abcde"]
    [None, 'a', 'a', 'b', 'b']
    """
    if fanout < 1:
        refuse("the model role's knobs", [f"model_fleet_fanout {fanout}: use 1 (a chain) or more"])
    i = order.index(name)
    return None if i == 0 else order[(i - 1) // fanout]


def program_sha() -> str:
    """The downloader's version as the host program computes it over the uploads (hgxkit.model.nodeprogram)."""
    return nodeprogram.program_sha()


def _paths() -> tuple[str, str, str]:
    venv = str(ModelKnobs.from_host(host).model_venv)
    lib = str(ModelKnobs.from_host(host).model_lib_dir)
    return f"{venv}/bin/python", f"{lib}/hgxkit_fetch.py", str(ModelKnobs.from_host(host).model_state_dir)


def peer_program(peer: Any) -> str:
    """The downloader on `peer` as a command prefix: its virtualenv's python and its hgxkit_fetch.py."""
    venv = str(ModelKnobs.from_host(peer).model_venv or DEFAULTS["model_venv"])
    lib = str(ModelKnobs.from_host(peer).model_lib_dir or DEFAULTS["model_lib_dir"])
    return shlex.join([f"{venv}/bin/python", f"{lib}/hgxkit_fetch.py"])


_PUB_KEY = re.compile(r"(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp\d+) [A-Za-z0-9+/=]+( [\x21-\x7e]+)?")
_FROM_PATTERN = re.compile(r"[0-9A-Fa-f.:/]+")


def peer_key_line(pub: str, child_addresses: list[str], program: str, local_dir: str, state_dir: str) -> str:
    """The authorized_keys line of a child's peer key on its parent: `restrict` (no pty, forwarding, agent or
    X11), `from=` the child's addresses, and `command=` the one read-only transfer (the downloader's
    `peer-serve`, which serves the verified files of `local_dir` and its state, whatever the client asks).

    >>> peer_key_line("ssh-ed25519 AAAA c@n2", ["10.0.0.2"], "/v/python /f.py", "/m/x", "/s")
    'restrict,from="10.0.0.2",command="/v/python /f.py peer-serve --dir /m/x --state-dir /s" ssh-ed25519 AAAA c@n2'
    """
    pub = pub.strip()
    if not _PUB_KEY.fullmatch(pub):
        raise ValueError(f"not one public key line: {pub[:60]!r}")
    addresses = sorted(set(child_addresses))
    bad = [a for a in addresses if not _FROM_PATTERN.fullmatch(a)]
    if not addresses or bad:
        raise ValueError(f"the child's addresses must be IP addresses (got {child_addresses})")
    command = f"{program} " + shlex.join(["peer-serve", "--dir", local_dir, "--state-dir", state_dir])
    if '"' in command or "\\" in command or "\n" in command:
        raise ValueError(f"the forced command may not hold a quote, backslash or newline: {command!r}")
    return f'restrict,from="{",".join(addresses)}",command="{command}" {pub}'


def _addresses(runner: HostRunner, name: str | None = None) -> list[str]:
    """IP addresses: the host's own (`hostname -I`), or what `name` resolves to on the host."""
    ok, lines = runner.status(argv("getent", "ahosts", name) if name else argv("hostname", "-I"))
    words = [w for line in lines for w in (line.split()[:1] if name else line.split())] if ok else []
    return [w for w in words if _FROM_PATTERN.fullmatch(w)]


def _authorize_on_peer(peer_name: str, key: str, user: str, local_dir: str) -> None:
    """Put this host's peer key into the peer's authorized_keys, restricted (peer_key_line), replacing any
    line of the same key (the comment marks it hgxkit-model-peer)."""
    ok, lines = HostRunner(host).status(argv("cat", key + ".pub"))
    pub = " ".join(lines).strip()
    if not ok or not pub.startswith("ssh-"):
        raise RunFailure(f"no peer key at {key}.pub", [], "run the model role again to generate it")
    peer = host.inventory.get_host(peer_name)
    if not peer.connected:
        peer.connect(raise_exceptions=True)
    seen_as = fabric_address(host) or ssh_hostname(host) or host.name
    addresses = _addresses(HostRunner(host)) + _addresses(HostRunner(peer), str(seen_as))
    state_dir = str(ModelKnobs.from_host(peer).model_state_dir or DEFAULTS["model_state_dir"])
    try:
        line = peer_key_line(pub, addresses, peer_program(peer), local_dir, state_dir)
    except ValueError as err:
        raise RunFailure(
            f"cannot authorize the peer key on {peer_name}", str(err), "check the peer's SSH access"
        ) from None
    blob = pub.split()[1]
    ok, _ = HostRunner(peer).status(
        script(
            'h=$(getent passwd {user} | cut -d: -f6) && [ -n "$h" ] && a="$h/.ssh/authorized_keys" && '
            'mkdir -p -m 700 "$h/.ssh" && touch "$a" && chmod 600 "$a" && '
            '{{ grep -vF {blob} "$a" || true; }} > "$a.hgxkit" && echo {line} >> "$a.hgxkit" && '
            'chmod 600 "$a.hgxkit" && mv -f "$a.hgxkit" "$a"',
            user=user,
            blob=blob,
            line=line,
        )
    )
    if not ok:
        raise RunFailure(
            f"could not authorize the peer key on {peer_name}", [], "check model_peer_user's home on the peer"
        )


def _start_or_attach(spec_path: str, local_dir: str, with_token: bool) -> None:
    """Start the sync unit (or attach to the running one) and print its progress until it ends or we time out."""
    token = controller_token() if with_token else None  # read here, so it is never an operation argument
    run = HostRunner(host)
    py, program, state_dir = _paths()
    unit = core.unit_name(local_dir)
    name = core.model_name(local_dir)
    progress_path, result_path = f"{state_dir}/{name}.progress.json", f"{state_dir}/{name}.result.json"
    active, _ = run.status(argv("systemctl", "is-active", "--quiet", unit))
    if active:
        host.log(f"attached to the running download ({unit})", log_func=logger.info)
    else:
        token_file = f"{TOKEN_DIR}/{name}.token"
        # The stamp first: from here on only the sync says whether the copy is complete (hgxkit.model.facts).
        run(argv("rm", "-f", result_path, progress_path, f"{state_dir}/{name}.stamp"))
        if token:
            ok, _ = run.status(
                script("umask 077 && mkdir -p {dir} && cat > {file}", dir=TOKEN_DIR, file=token_file),
                _stdin=SecretLines([token]),
            )
            if not ok:
                raise RunFailure(f"could not write the token file under {TOKEN_DIR}", [], "check /run on the node")
        words = [
            "systemd-run",
            f"--unit={unit}",
            "--collect",
            "--quiet",
            f"--description=hgxkit model sync of {local_dir}",
            "--setenv=HF_HUB_DISABLE_PROGRESS_BARS=1",
            "--setenv=HF_HUB_DISABLE_TELEMETRY=1",
            py,
            program,
            "run",
            "--spec",
            spec_path,
            "--run-id",
            uuid.uuid4().hex[:12],
        ]
        if token:
            words += ["--token-file", token_file]
        ok, _ = run.status(argv(*words))
        if not ok:
            run(argv("rm", "-f", token_file))
            raise RunFailure(f"could not start the unit {unit} (systemd-run)", [], f"see `journalctl -u {unit}`")
        host.log(f"download started in {unit} (follow it with `journalctl -fu {unit}`)", log_func=logger.info)
    interval = float(ModelKnobs.from_host(host).model_poll_interval_s)
    every = float(ModelKnobs.from_host(host).model_progress_every_s)
    deadline = time.time() + float(ModelKnobs.from_host(host).model_wait_timeout_s)
    last_print = 0.0
    poll = script(
        "systemctl is-active --quiet {unit}; echo $?; cat {progress} 2>/dev/null", unit=unit, progress=progress_path
    )
    while True:
        time.sleep(interval)
        lines = run(poll)
        still = bool(lines) and lines[0].strip() == "0"
        try:
            progress = core.Progress(**json.loads("\n".join(lines[1:])))
        except (ValueError, TypeError):
            progress = None
        if progress is not None and (time.time() - last_print >= every or not still):
            last_print = time.time()
            host.log(f"model {name}: {core.format_progress(progress)}", log_func=logger.info)
        if not still:
            return
        if time.time() > deadline:
            host.log(f"stopped waiting; the download goes on in {unit}; re-run to attach", log_func=logger.warning)
            return


@deploy("hgxkit model", data_defaults=DEFAULTS)
def model() -> None:
    """Make the recipe's model a verified copy in its local_dir; a verified copy costs one metadata check."""
    spec = build_spec()
    spec_json = spec.to_json()
    name = core.model_name(spec.local_dir)
    py, program, state_dir = _paths()
    # A fleet host reads the Hub's file list; a bundle needs no Hub.
    token = controller_token() if spec.source not in ("peer", "bundle") else None
    extra = {"_stdin": SecretLines([token])} if token else {}
    started = time.perf_counter()
    # A pinned commit's check never asks the Hub, so it needs no token and is read with the other plan-time facts.
    if token and not core.is_commit(spec.revision):  # the token goes on stdin: a read of its own
        status = host.get_fact(ModelSyncStatus, python=py, script_path=program, spec=spec_json, token=True, **extra)
    else:  # usually read already, with the other plan-time facts (plan_reads)
        status = plan_fact(host, ModelSyncStatus, python=py, script_path=program, spec=spec_json, token=False)
    took = time.perf_counter() - started
    state = status.get("state")
    if state == "complete":
        host.log(f"model {name}: {status.get('reason')}; check took {took:.2f}s", log_func=logger.info)
        return
    if state == "error":
        refuse(f"{host.name}: the model was not synced", [str(status.get("reason"))])

    files.directory(name="Model state directory", path=state_dir, mode="0755")
    files.directory(name="Model downloader directory", path=str(ModelKnobs.from_host(host).model_lib_dir), mode="0755")
    apt.packages(name="python3-venv and ssh for the model downloader", packages=_host_packages())
    requirement = str(ModelKnobs.from_host(host).model_hf_hub_requirement)
    venv = str(ModelKnobs.from_host(host).model_venv)
    stamp = f"{venv}/.hgxkit-requirement"
    if (host.get_fact(FileText, path=stamp) or "").strip() != requirement:
        server.shell(
            name=f"Virtualenv {venv} with {requirement}",
            commands=[
                argv("python3", "-m", "venv", venv),
                *(
                    bundle.pip_install(f"{venv}/bin/pip")
                    if (bundle := delivered(host))
                    else [argv(f"{venv}/bin/pip", "install", "--quiet", "--disable-pip-version-check", requirement)]
                ),
                script("echo {requirement} > {stamp}", requirement=requirement, stamp=stamp),
            ],
        )
    for upload, data in nodeprogram.uploads().items():  # the downloader built from hgxkit/model/fetch/, and its core
        files.put(
            name=f"Upload {upload}",
            src=BytesIO(data),
            dest=f"{ModelKnobs.from_host(host).model_lib_dir}/{upload}",
            mode="0755",
        )
    spec_path = f"{state_dir}/{name}.spec.json"
    files.put(name=f"Sync spec {spec_path}", src=StringIO(spec_json + "\n"), dest=spec_path, mode="0644")
    if spec.from_parent:
        server.shell(
            name="SSH key for peer copies",
            commands=[
                argv("mkdir", "-p", "-m", "700", os.path.dirname(spec.peer_key)),
                script(
                    "test -f {key} || ssh-keygen -q -t ed25519 -N '' -C {comment} -f {key}",
                    key=spec.peer_key,
                    comment=f"hgxkit-model-peer@{host.name}",
                ),
            ],
        )
        python.call(
            name=f"Authorize the peer key on {spec.peer_name} ({spec.source})",
            function=_authorize_on_peer,
            peer_name=spec.peer_name,
            key=spec.peer_key,
            user=spec.peer_user,
            local_dir=spec.peer_dir,
        )
    python.call(
        name=f"Sync {spec.repo_id}@{spec.revision} to {spec.local_dir} (unit {core.unit_name(spec.local_dir)})",
        function=_start_or_attach,
        spec_path=spec_path,
        local_dir=spec.local_dir,
        with_token=bool(token),
    )
    server.shell(name=f"Verified {spec.local_dir}", commands=[argv(py, program, "result", "--spec", spec_path)])


def plan_reads() -> list[tuple[type, dict[str, Any]]]:
    """The facts `model()` reads while pyinfra plans, for `hgxkit.planfacts.prefetch` to read in one round trip
    with the other roles' (none when the spec cannot be made: `model()` then says why)."""
    reads: list[tuple[type, dict[str, Any]]] = []
    _collect_reads(reads)
    return reads


@deploy("hgxkit model: plan-time reads", data_defaults=DEFAULTS)
def _collect_reads(reads: list[tuple[type, dict[str, Any]]]) -> None:
    """Inside the role's knob defaults (as `model()` sees them); adds no operation."""
    try:
        spec = build_spec(check=False)
    except (DeployError, HgxkitError):
        return
    reads += [(RealPath, {"path": path}) for path in (spec.local_dir, *_model_roots())]
    py, program, _ = _paths()
    if spec.source == "peer" or core.is_commit(spec.revision) or not controller_token():
        reads.append((ModelSyncStatus, {"python": py, "script_path": program, "spec": spec.to_json(), "token": False}))


def _host_packages() -> list[str]:
    return ["python3-venv", "openssh-client"]
