"""The fault matrix's judge (`service_problems` in tests/e2e/sim_steps.py): every request that overlaps the window
is judged, also one already in flight when the window opens or still in flight when it closes, and a probe that
stalled is caught wherever its gap lies against the window."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

E2E = Path(__file__).resolve().parents[2] / "e2e"
_spec = importlib.util.spec_from_file_location("sim_steps_judge_under_test", E2E / "sim_steps.py")
assert _spec is not None and _spec.loader is not None
sim_steps = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = sim_steps
_spec.loader.exec_module(sim_steps)
Sample = sim_steps.Sample

S = 1_000_000_000
PORT = 5001
WINDOW = (10 * S, 20 * S)


def steady(start: float, end: float, step: float = 0.5) -> list:
    """Health checks (0.1 s each) and chat requests (back to back), all answered, from `start` to `end` (s)."""
    out, t = [], start
    while t < end:
        out += [
            Sample(int(t * S), int((t + 0.1) * S), PORT, "health", "200"),
            Sample(int(t * S), int((t + step) * S), PORT, "chat", "200"),
        ]
        t += step
    return out


def with_chat(start: float, end: float, code: str) -> list:
    """A steady probe with one more chat request from `start` to `end` (s) answered `code`."""
    return [*steady(0, 30), Sample(int(start * S), int(end * S), PORT, "chat", code)]


def test_a_steady_probe_over_the_window_is_no_problem() -> None:
    assert sim_steps.service_problems(steady(0, 30), PORT, WINDOW) == []


def test_a_request_in_flight_when_the_window_opens_that_fails_inside_it_is_a_problem() -> None:
    assert sim_steps.service_problems(with_chat(8, 12, "000"), PORT, WINDOW) == [
        f"port {PORT}: 1 of 121 requests failed (chat 000 at 8.0)"
    ]


def test_a_request_in_flight_over_the_whole_window_that_fails_is_a_problem() -> None:
    assert sim_steps.service_problems(with_chat(5, 25, "502"), PORT, WINDOW) == [
        f"port {PORT}: 1 of 121 requests failed (chat 502 at 5.0)"
    ]


def test_a_request_sent_inside_the_window_that_fails_after_it_closes_is_a_problem() -> None:
    assert sim_steps.service_problems(with_chat(19, 23, "503"), PORT, WINDOW) == [
        f"port {PORT}: 1 of 121 requests failed (chat 503 at 19.0)"
    ]


def test_requests_that_fail_wholly_before_or_after_the_window_are_not_its_problem() -> None:
    samples = [*with_chat(2, 9.5, "000"), Sample(int(20.5 * S), int(22 * S), PORT, "health", "000")]
    assert sim_steps.service_problems(samples, PORT, WINDOW) == []


def test_a_probe_stalled_over_the_whole_window_is_a_problem() -> None:
    # Samples before and after the window, none inside it: the first starts before it, the last ends after it.
    samples = steady(0, 8) + steady(22, 30)
    assert sim_steps.service_problems(samples, PORT, WINDOW) == [
        f"port {PORT}: no health sample for 10.0 s in the window",
        f"port {PORT}: no chat sample for 10.0 s in the window",
    ]


def test_a_gap_that_opens_before_the_window_counts_its_part_inside_it() -> None:
    samples = steady(0, 8) + steady(16.5, 30)  # 6.5 s of the window without a sample
    assert sim_steps.service_problems(samples, PORT, WINDOW) == [
        f"port {PORT}: no health sample for 6.5 s in the window",
        f"port {PORT}: no chat sample for 6.5 s in the window",
    ]
    short = steady(0, 8) + steady(14, 30)  # 4 s inside the window: within the allowed gap
    assert sim_steps.service_problems(short, PORT, WINDOW) == []


def test_the_probe_counts_a_200_whose_body_is_no_completion_as_a_failed_request(tmp_path: Path) -> None:
    """The probe's own shell loop against a local server: a completion counts by its body, not its status."""
    import json
    import subprocess
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # /health
            self.send_response(200)
            self.end_headers()

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            body = json.dumps(self.server.body).encode()  # type: ignore[attr-defined]
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    completion = {"choices": [{"message": {"content": "ok"}, "finish_reason": "length"}]}
    servers = [ThreadingHTTPServer(("127.0.0.1", 0), Handler) for _ in range(2)]
    for server, body in zip(servers, (completion, {"error": "no model"}), strict=True):
        server.body = body  # type: ignore[attr-defined]
        threading.Thread(target=server.serve_forever, daemon=True).start()
    good, bad = (server.server_address[1] for server in servers)
    script = sim_steps._PROBE.format(tag=tmp_path.name, ports=f"{good} {bad}", model="m", tokens=4, health_timeout=5)
    probe = subprocess.Popen(["sh", "-c", script], stdout=subprocess.PIPE, text=True)
    lines: list[str] = []
    try:
        assert probe.stdout is not None
        while {s.port for s in sim_steps.parse_samples("\n".join(lines)) if s.kind == "chat"} != {good, bad}:
            line = probe.stdout.readline()
            if not line:  # the probe ended: the assertion below says what it printed
                break
            lines.append(line)
    finally:
        Path(f"/tmp/hgxkit-probe-{tmp_path.name}.stop").touch()
        probe.wait(timeout=30)
        Path(f"/tmp/hgxkit-probe-{tmp_path.name}.stop").unlink()
        for server in servers:
            server.shutdown()
    chat = {s.port: s.code for s in sim_steps.parse_samples("\n".join(lines)) if s.kind == "chat"}
    assert chat == {good: "200", bad: "200-but-no-completion"}
