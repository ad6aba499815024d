"""A client asking a prefill/decode split's router on a simulated node, one request at a time, while a deploy
replaces a group: what it was answered, in order (tests/e2e/test_pd_one_node.py, test_pd_split_over_hosts.py)."""

from __future__ import annotations

import shlex
import subprocess
import threading

from sim_steps import ssh_to

# A client on the node asking the router at the port its first argument names, one request at a time: SGLang's
# /generate, each with its own rid (the stand-ins record it), or, given a model name, OpenAI's /v1/completions.
# One line per answer (`rid status seconds`; status 0: no answer within 20 s, or the connection dropped), until
# its stdin closes (the request then in flight is answered first).
CLIENT = """
import http.client, json, sys, threading, time
PORT, MODEL = int(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else ""
PATH = "/v1/completions" if MODEL else "/generate"
def ask(i):
    if MODEL:
        body = json.dumps({"model": MODEL, "prompt": "ba be", "max_tokens": 4})
    else:
        body = json.dumps({"text": "ba be", "rid": f"gap-{i}", "sampling_params": {"max_new_tokens": 4}})
    start = time.monotonic()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=20)
        conn.request("POST", PATH, body, {"Content-Type": "application/json"})
        status = conn.getresponse().status
        conn.close()
    except (OSError, http.client.HTTPException):
        status = 0
    print(f"gap-{i}", status, round(time.monotonic() - start, 3), flush=True)
stop = threading.Event()
def loop():
    i = 0
    while not stop.is_set():
        i += 1
        ask(i)
asking = threading.Thread(target=loop)
asking.start()
sys.stdin.read()
stop.set()
asking.join()
"""


class RouterClient:
    """CLIENT running on the node over SSH; its answers as they come, in order: (rid, status, seconds)."""

    def __init__(self, cluster: str, port: int, node: str = "node1", model: str = "") -> None:
        argv = ssh_to(cluster, node, f"python3 -u -c {shlex.quote(CLIENT)} {port} {shlex.quote(model)}")
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.answers: list[tuple[str, int, float]] = []
        self.changed = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout or []:
            rid, status, seconds = line.split()
            with self.changed:
                self.answers.append((rid, int(status), float(seconds)))
                self.changed.notify_all()

    def wait_for_200(self, after: int = 0, timeout: float = 60) -> None:
        """Until an answer after the first `after` ones is a 200 (fails the test after `timeout` seconds)."""
        with self.changed:
            ok = self.changed.wait_for(lambda: any(s == 200 for _, s, _ in self.answers[after:]), timeout)
        assert ok, f"no 200 through the router in {timeout} s: {self.answers[after:][-20:]}"

    def stop(self) -> list[tuple[str, int, float]]:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)
        with self.changed:
            return list(self.answers)
