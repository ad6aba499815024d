"""Profile the model downloader (hgxkit/model/fetch.py) with py-spy: where a sync's CPU time goes, by function.

    pip install py-spy                      # into any venv; the script finds `py-spy` on PATH or next to python
    python bench/model_profile.py [--size-gb 2] [--shards 20] [--rev REV] [--top 14]

No simulated node: the program runs here as the role ships it (fetch.py as hgxkit_fetch.py, core.py as
model_core.py, in a temporary directory; `--rev` takes both from a git revision, e.g. the one before a
change), under `py-spy record` (every thread; time in C is charged to the Python line that called it), against the Hub
stand-in serving a synthetic repo from RAM in its own process on 127.0.0.1. Prints the sync's time next to 8
parallel `curl`s of the same files from the same server, then the functions that held the CPU: self time
(where the CPU was) and inclusive time (which part of the program asked for it).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hgxkit.sim.hub.makerepo import RepoSpec, make_repo  # noqa: E402

REPO = "hgxkit-bench/model"
RATE = 100  # py-spy samples per second


def ship(rev: str, into: Path) -> Path:
    """fetch.py and core.py of `rev` ("" = the working tree) under the names the role uploads them as."""
    if not rev:  # the working tree: the downloader built from hgxkit/model/fetch/ as the role builds it
        from hgxkit.model.nodeprogram import write

        return write(into)
    for src, dest in (("hgxkit/model/fetch.py", "hgxkit_fetch.py"), ("hgxkit/model/core.py", "model_core.py")):
        text = subprocess.check_output(["git", "show", f"{rev}:{src}"], cwd=ROOT, text=True)
        (into / dest).write_text(text)
    return into / "hgxkit_fetch.py"


def py_spy() -> str:
    found = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(found).exists():
        sys.exit("py-spy not found: `pip install py-spy` (into this venv or any on PATH)")
    return found


def summarize(raw: Path, top: int) -> None:
    """Self and inclusive seconds per function from py-spy's collapsed stacks (thread frames dropped)."""
    own: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        frames = [re.sub(r" \((?:.*/)?([^/]+\.py):\d+\)", r" (\1)", f) for f in stack.split(";")[1:]]
        if not frames:
            continue
        count = int(n)
        total += count
        own[frames[-1]] += count
        for f in set(frames):
            incl[f] += count
    print(f"samples: {total / RATE:.1f} thread-seconds not idle (on a CPU, or waiting for the GIL)")
    print("self (where the threads were):")
    for f, n in own.most_common(top):
        print(f"  {n / RATE:7.2f} s {100 * n / total:5.1f}%  {f[:110]}")
    print("inclusive (what asked for it):")
    skip = ("Thread.", "_worker", "_WorkItem.run", "<module>", "main (", "with_retries")
    for f, n in [(f, n) for f, n in incl.most_common(top * 3) if not f.startswith(skip)][:top]:
        print(f"  {n / RATE:7.2f} s {100 * n / total:5.1f}%  {f[:110]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-gb", type=float, default=2.0)
    parser.add_argument("--shards", type=int, default=20)
    parser.add_argument("--rev", default="", help="profile fetch.py/core.py of this git revision")
    parser.add_argument("--top", type=int, default=14)
    parser.add_argument("--workers", type=int, default=8)
    args = parser.parse_args()
    spy = py_spy()
    base = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())
    work = Path(tempfile.mkdtemp(prefix="hgxkit-profile-", dir=base))
    server = None
    try:
        make_repo(work / "hub", RepoSpec(repo_id=REPO, total_bytes=int(args.size_gb * 2**30), shards=args.shards))
        env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
        argv = [sys.executable, "-m", "hgxkit.sim.hub", "serve", "--root", str(work / "hub"), "--port", "0"]
        server = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, text=True)
        assert server.stderr is not None
        url = ""
        while not url:
            m = re.search(r"on (http://\S+)", server.stderr.readline())
            url = m.group(1) if m else ""
        info = json.loads(urllib.request.urlopen(f"{url}/api/models/{REPO}?blobs=true").read())
        names = [s["rfilename"] for s in info["siblings"] if s["rfilename"].endswith((".json", ".safetensors"))]
        (work / "curl").mkdir()
        start = time.perf_counter()
        xargs = ["xargs", "-P", str(args.workers), "-n", "1", "curl", "-sfLO"]
        urls = "".join(f"{url}/{REPO}/resolve/{info['sha']}/{n}\n" for n in names)
        subprocess.run(xargs, input=urls, text=True, cwd=work / "curl", check=True)
        curl_s = time.perf_counter() - start
        shutil.rmtree(work / "curl")
        program = ship(args.rev, Path(tempfile.mkdtemp(dir=work)))
        spec = {
            "repo_id": REPO,
            "local_dir": str(work / "model"),
            "allow_patterns": ["*.json", "*.safetensors"],
            "endpoint": url,
            "state_dir": str(work / "state"),
            "margin_gb": 0.1,
            "workers": args.workers,
        }
        (work / "spec.json").write_text(json.dumps(spec))
        raw = work / "profile.txt"
        record = [spy, "record", "--threads", "-r", str(RATE), "-f", "raw", "-o", str(raw), "--"]
        subprocess.run(
            [*record, sys.executable, str(program), "run", "--spec", str(work / "spec.json")],
            env={**env, "PYTHONPATH": ""},
            check=True,
            capture_output=True,
        )
        result = json.loads((work / "state" / "model.result.json").read_text())
        gb = sum(s["size"] for s in info["siblings"] if s["rfilename"] in names) / 1e9
        print(f"program: fetch.py of {args.rev or 'the working tree'}; {len(names)} files, {gb:.2f} GB from {url}")
        print(f"curl x{args.workers}: {curl_s:.2f} s; sync (under py-spy): {result['seconds']:.2f} s")
        summarize(raw, args.top)
    finally:
        if server is not None:
            server.terminate()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
