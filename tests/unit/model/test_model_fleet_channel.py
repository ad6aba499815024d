"""The fleet channel: the fleet file server binds the fabric address only, signs every
request, drops idle connections and caps them, serves regular files only; a peer key may run only the
read-only `peer-serve` on its parent, from the child's addresses."""

from __future__ import annotations

import contextlib
import io
import json
import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import test_model_fetch
from test_model_fetch import fetch, fleet_get, run, spec_file

from roles.model import peer_key_line

hub, hub_root = test_model_fetch.hub, test_model_fetch.hub_root  # the Hub stand-in's fixtures


@pytest.fixture()
def served(request: pytest.FixtureRequest, tmp_path: Path):  # type: ignore[no-untyped-def]
    """A synced model and a fleet server on 127.0.0.1 with a 1 s timeout and a cap of 8 connections."""
    url = request.getfixturevalue("hub")[1]
    spec_path = spec_file(tmp_path, url, source="fleet", fleet_port=0, fleet_bind="127.0.0.1")
    assert run(spec_path)[0] == 0
    spec = fetch.core.Spec.load(spec_path)
    syncer = fetch.Syncer(spec, None, fetch.Reporter(spec, "t"))
    syncer.manifest = fetch.load_manifest(spec.local_dir)
    server = fetch.FleetServer(spec, syncer, timeout_s=1.0, max_connections=8)
    doc = json.loads((tmp_path / "state" / "tiny.serve.json").read_text())
    yield server, f"http://127.0.0.1:{doc['port']}", doc, Path(spec.local_dir)
    server.close()


@pytest.mark.parametrize("bind", ["", "0.0.0.0", "::"])
def test_the_server_refuses_every_address_without_the_knob(tmp_path: Path, bind: str) -> None:
    spec = fetch.core.Spec(
        repo_id="o/m", local_dir=str(tmp_path / "m"), state_dir=str(tmp_path), fleet_port=0, fleet_bind=bind
    )
    with pytest.raises(fetch.FleetRefused, match=r"would listen on every address.*model_fleet_bind_any: true"):
        fetch.FleetServer(spec, None)  # type: ignore[arg-type]
    assert not (tmp_path / "m.serve.json").exists()
    if bind == "0.0.0.0":
        spec.fleet_bind_any = True
        server = fetch.FleetServer(spec, None)  # type: ignore[arg-type]
        assert server.httpd.server_address[0] == "0.0.0.0"
        server.close()


def test_the_server_listens_on_its_fabric_address_only(served) -> None:  # type: ignore[no-untyped-def]
    server, _, doc, _ = served
    assert server.httpd.server_address[0] == "127.0.0.1" and doc["address"] == "127.0.0.1"


def test_unsigned_or_wrongly_signed_requests_get_403_and_keep_nothing_alive(served) -> None:  # type: ignore[no-untyped-def]
    server, base, doc, _ = served
    server.last = 0.0
    assert fleet_get(base, "/state", None)[0] == 403
    assert fleet_get(base, "/files/config.json", "not-the-secret")[0] == 403
    bearer = fleet_get(base, "/state", None, Authorization=f"Bearer {doc['secret']}")  # the old scheme
    assert bearer[0] == 403
    signed = fetch.fleet_auth(doc["secret"], "GET", "/state")
    assert fleet_get(base, "/files/config.json", None, **signed)[0] == 403  # signed for another path
    stale = fetch.fleet_auth(doc["secret"], "GET", "/state")
    stale["X-Hgxkit-Time"] = str(int(time.time()) - 3600)
    assert fleet_get(base, "/state", None, **stale)[0] == 403
    assert server.last == 0.0  # none of these extended the server's life
    good = fetch.fleet_auth(doc["secret"], "GET", "/state")
    assert fleet_get(base, "/state", None, **good)[0] == 200 and server.last > 0
    assert fleet_get(base, "/state", None, **good)[0] == 403  # the same nonce again: a replay


def test_a_symlinked_or_special_file_is_not_served(served, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _, base, doc, local_dir = served
    secret = tmp_path / "shadow"
    secret.write_text("root:secret\n")
    config = local_dir / "config.json"
    config.unlink()
    config.symlink_to(secret)
    assert fleet_get(base, "/files/config.json", doc["secret"]) == (404, b"")
    config.unlink()
    os.mkfifo(config)  # would block a plain open
    assert fleet_get(base, "/files/config.json", doc["secret"]) == (404, b"")


def test_idle_connections_are_dropped_within_the_timeout_and_capped(served) -> None:  # type: ignore[no-untyped-def]
    _, base, _, _ = served
    port = int(base.rsplit(":", 1)[1])
    before = threading.active_count()
    socks = []
    try:
        for _ in range(500):  # unauthenticated, idle: not a byte sent
            socks.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        most = threading.active_count() - before
        for s in socks:
            # A server that kept idle connections would leave recv waiting: the generous deadline (the server's
            # timeout is 1 s) fails the test then, however busy the machine, and the cap holds all along.
            s.settimeout(60)
            with contextlib.suppress(ConnectionResetError):
                assert s.recv(1) == b""  # closed by the server
            most = max(most, threading.active_count() - before)
        assert most <= 8  # the cap: the rest were closed as they were accepted
        assert wait_until(lambda: threading.active_count() <= before, 60)  # every handler gone
    finally:
        for s in socks:
            s.close()


def wait_until(condition: Callable[[], bool], deadline_s: float) -> bool:
    """Whether `condition` came true within `deadline_s` (checked every 10 ms)."""
    end = time.monotonic() + deadline_s
    while not condition():
        if time.monotonic() > end:
            return False
        time.sleep(0.01)
    return True


def test_peer_key_line_is_restricted_to_the_child_and_the_one_transfer() -> None:
    pub = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIH hgxkit-model-peer@node2"
    line = peer_key_line(pub, ["10.0.0.2", "10.0.0.2", "fd00::2"], "/opt/v/bin/python /usr/lib/f.py", "/m/x y", "/s")
    options, _, key = line.partition(" ssh-ed25519 ")
    assert key == "AAAAC3NzaC1lZDI1NTE5AAAAIH hgxkit-model-peer@node2"
    assert options == (
        'restrict,from="10.0.0.2,fd00::2",'
        "command=\"/opt/v/bin/python /usr/lib/f.py peer-serve --dir '/m/x y' --state-dir /s\""
    )
    for addresses in ([], ["node2"], ['1.2.3.4",command="sh']):
        with pytest.raises(ValueError, match="IP addresses"):
            peer_key_line(pub, addresses, "/p", "/m", "/s")
    with pytest.raises(ValueError, match="not one public key line"):
        peer_key_line(pub + "\nssh-ed25519 AAAA other", ["10.0.0.2"], "/p", "/m", "/s")
    with pytest.raises(ValueError, match="quote"):
        peer_key_line(pub, ["10.0.0.2"], "/p", '/m/"x', "/s")


def peer(served, monkeypatch: pytest.MonkeyPatch, original: str | None) -> tuple[int, bytes]:  # type: ignore[no-untyped-def]
    """Run the forced command as sshd would: fixed --dir/--state-dir, the client's words in SSH_ORIGINAL_COMMAND."""
    _, _, _, local_dir = served
    out = io.BytesIO()
    monkeypatch.setattr(fetch.sys, "stdout", type("O", (), {"buffer": out})())
    if original is None:
        monkeypatch.delenv("SSH_ORIGINAL_COMMAND", raising=False)
    else:
        monkeypatch.setenv("SSH_ORIGINAL_COMMAND", original)
    state_dir = str(local_dir.parents[1] / "state")
    code = fetch.main(["peer-serve", "--dir", str(local_dir), "--state-dir", state_dir])
    return code, out.getvalue()


def test_the_forced_command_serves_state_and_verified_files_only(served, monkeypatch, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _, _, doc, local_dir = served
    code, out = peer(served, monkeypatch, "python3 f.py peer-serve --dir /elsewhere --state-dir /etc state")
    head = out.decode().partition(fetch._STATE_SPLIT)[0]
    assert code == 0 and json.loads(head)["repo_id"] == "org/tiny"  # its own --dir, not the client's
    code, out = peer(served, monkeypatch, "x peer-serve serve")
    assert code == 0 and json.loads(out)["secret"] == doc["secret"]
    config = (local_dir / "config.json").read_bytes()
    assert peer(served, monkeypatch, "x peer-serve tail 5 config.json") == (0, config[5:])
    for evil in (
        "cat /etc/shadow",
        "x peer-serve tail 0 ../../state/tiny.serve.json",
        "x peer-serve tail 0 .hgxkit-manifest.json",
        "x peer-serve tail 0 not-listed.json",
        "x peer-serve state; rm -rf /",
        "x peer-serve tail 0 config.json extra",
    ):
        assert peer(served, monkeypatch, evil) == (2, b""), evil
    (tmp_path / "secret").write_text("s")
    (local_dir / "config.json").unlink()
    (local_dir / "config.json").symlink_to(tmp_path / "secret")
    assert peer(served, monkeypatch, "x peer-serve tail 0 config.json") == (2, b"")


def test_bytes_are_counted_served_by_the_time_the_child_has_them(served, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A child can get a file's last byte, say it is done and end the server before the sending thread runs
    again (on a busy machine: "served 0.00 GB" in test_a_fleet_streams_down_a_tree…): that thread is held
    here after its bytes went, until the count has been read, and the count must already hold them, then and
    after."""
    server, base, doc, local_dir = served
    sent, release = threading.Event(), threading.Event()
    real = socket.socket.sendfile

    def sendfile_then_stall(self, file, offset=0, count=None):  # type: ignore[no-untyped-def]
        try:
            return real(self, file, offset, count)
        finally:
            sent.set()
            release.wait(60)

    monkeypatch.setattr(socket.socket, "sendfile", sendfile_then_stall)
    before = threading.active_count()
    status, body = fleet_get(base, "/files/config.json", doc["secret"])
    assert status == 200 and body == (local_dir / "config.json").read_bytes()
    # The child can hold every byte before the sending thread runs its `finally`: wait for it, then read the
    # count while that thread stalls.
    assert sent.wait(60) and server.served == len(body)  # while the sender stalls
    release.set()
    assert wait_until(lambda: threading.active_count() <= before, 60)  # the sender's thread has finished
    assert server.served == len(body)  # counted once
    tail = fleet_get(base, "/files/config.json", doc["secret"], Range="bytes=10-")
    assert tail[0] == 206 and server.served == 2 * len(body) - 10
