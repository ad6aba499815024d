"""Fixtures shared by unit tests: an in-process SGLang stand-in on 127.0.0.1 with a fast latency model."""

from __future__ import annotations

import importlib.util
import io
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hgxkit.sim.hub.makerepo import RepoSpec, make_repo
from hgxkit.sim.standin import client_store
from hgxkit.sim.standin.sglang import checks
from hgxkit.sim.standin.sglang.args import ModelFacts, build_parser, resolve
from hgxkit.sim.standin.sglang.engine import Engine, LatencyModel
from hgxkit.sim.standin.sglang.server import StubApp, StubServer, make_server

# Each package's tests live in their own folder; a few import fixtures from another folder's module by its
# basename (unique in the tree, tests/unit/project/test_test_layout.py), which pytest's default import mode
# finds only in folders on sys.path.
sys.path[:0] = sorted(str(d) for d in Path(__file__).parent.iterdir() if d.is_dir() and not d.name.startswith("_"))

# Fixtures that run the engines' real benchmark clients or parsers from the client store: each process imports
# torch and transformers (about 8 CPU s), so these tests are marked `client` and `make check` leaves them to `make test`.
REAL_CLIENT_FIXTURES = frozenset({"client_venv", "client_python", "vllm_cli", "real_vllm_python"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if REAL_CLIENT_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.client)


FAST = {
    "HGXKIT_SIM_TTFT_BASE_MS": "20",
    "HGXKIT_SIM_PREFILL_US_PER_TOKEN": "4",
    "HGXKIT_SIM_DECODE_STEP_MS": "1",
    "HGXKIT_SIM_DECODE_MS_PER_RUNNING": "0",
    "HGXKIT_SIM_SEED": "3",
    "HGXKIT_SIM_KV_POOL_GB_PER_RANK": "10",
}
Url = str


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("models")
    return make_repo(root, RepoSpec(repo_id="deepseek-ai/DeepSeek-V4-Flash-DSpark", total_bytes=32 << 10, shards=1)) / (
        "refs/main"
    )


StartStub = Callable[..., tuple[Url, StubApp]]


@pytest.fixture()
def start_stub(model_dir: Path) -> Iterator[StartStub]:
    servers: list[StubServer] = []

    def start(*flags: str, ready: bool = True, env: dict[str, str] | None = None) -> tuple[Url, StubApp]:
        env = {**FAST, **(env or {})}
        ns = build_parser("sglang").parse_args(["--model-path", str(model_dir), "--served-model-name", "dsv4", *flags])
        facts = ModelFacts.load(model_dir)
        args = resolve(ns, facts)
        plan = checks.memory_plan(args, env, facts.kv_bytes_per_token)
        model = LatencyModel.from_env(env, args["speculative_algorithm"], args.get("speculative_num_draft_tokens"))
        engine = Engine(model, max_running=int(args["max_running_requests"] or 2048), log=io.StringIO())
        app = StubApp(args, facts, plan, engine, ["sglang", "serve", *flags])
        if ready:
            app.ready_event.set()
        server = make_server(app, "127.0.0.1", 0)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}", app

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture()
def fast_latency_env() -> dict[str, str]:
    """The stand-in's latency knobs for quick tests (milliseconds, not seconds, per request)."""
    return dict(FAST)


@pytest.fixture()
def client_venv() -> Path:
    """SGLang's real benchmark client (`hgxkit sim client install`); required under CI=true, else a skip."""
    venv = os.environ.get("HGXKIT_SGLANG_CLIENT_VENV")
    if not venv:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but HGXKIT_SGLANG_CLIENT_VENV is unset (.ci/run installs the client and sets it)")
        pytest.skip("needs HGXKIT_SGLANG_CLIENT_VENV (a venv made by hgxkit/sim/standin/sglang/install_client.sh)")
    return Path(venv)


ClientPython = Callable[[str], Path]


@pytest.fixture()
def client_python() -> ClientPython:
    """The client store's python for a real engine (`sglang`, `vllm`; the store's python adds vLLM's layer where a
    script asks, as tools/gen_engine_options.py does): HGXKIT_SGLANG_CLIENT_VENV, else the host's store; a skip
    without that engine, a failure under CI=true."""

    def python(engine: str) -> Path:
        venv = os.environ.get("HGXKIT_SGLANG_CLIENT_VENV")
        store = Path(venv) if venv else client_store.store_path()
        held = engine in client_store.installed_clients(store) or (
            engine == "vllm" and client_store.vllm_command(store) is not None
        )
        if (store / "bin" / "python").is_file() and held:
            return store / "bin" / "python"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but the client store ({store}) has no {engine}: `hgxkit sim client install`")
        pytest.skip(f"needs the client store with {engine} at {store} (HGXKIT_SGLANG_CLIENT_VENV, else the host's)")

    return python


PosixArgv = Callable[[str, dict[str, str]], list[str]]


@pytest.fixture()
def posix_argv() -> PosixArgv:
    """The argv a real POSIX shell (`sh`) builds from a command line, with the given environment."""

    def argv(command: str, env: dict[str, str]) -> list[str]:
        out = subprocess.run(["sh", "-c", f"printf '%s\\0' {command}"], env=env, capture_output=True, check=True)
        return out.stdout.decode().split("\0")[:-1]

    return argv


def _router_python(module: str, requirement: str, variable: str, default: str) -> str:
    """This python when it imports the router's `module`, else the one `variable` names (default `default`, where
    .ci/run installs `requirement`); a skip without it, a failure under CI=true."""
    if importlib.util.find_spec(module) is not None:
        return sys.executable
    python = os.environ.get(variable, default)
    if Path(python).is_file():
        return python
    why = f"needs {requirement} (none importable here, and no {python}: {variable})"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but it {why}; .ci/run installs it")
    pytest.skip(why)


@pytest.fixture()
def router_python() -> str:
    """A python with the real SGLang router (sglang-router 0.3.2, a Rust binary in its wheel)."""
    return _router_python(
        "sglang_router",
        "sglang-router 0.3.2",
        "HGXKIT_TEST_SGLANG_ROUTER_PYTHON",
        "/var/lib/hgxkit/sglang-router/bin/python",
    )


@pytest.fixture()
def vllm_router_python() -> str:
    """A python with the real vLLM router (vllm-router 0.1.17, a Rust binary in its wheel)."""
    return _router_python(
        "vllm_router", "vllm-router 0.1.17", "HGXKIT_TEST_VLLM_ROUTER_PYTHON", "/var/lib/hgxkit/vllm-router/bin/python"
    )
