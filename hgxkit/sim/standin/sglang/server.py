"""HTTP endpoints of the SGLang stand-in (stdlib `http.server`; simulated, no model runs).

Served: ``/health``, ``/health_generate``, ``/ready``, ``/model_info`` (+ ``/get_model_info``),
``/server_info`` (+ ``/get_server_info``), ``/flush_cache``, ``/v1/models[/{name}]``, ``/generate``
(SGLang's native format; streaming sends ``data: {…}`` chunks with cumulative ``text`` and ``meta_info``),
``/v1/completions`` and ``/v1/chat/completions`` (streaming and not, with ``usage``), ``/metrics`` (only with
``--enable-metrics``), and ``/hgxkit_sim/requests`` (the ground-truth records; not an SGLang endpoint).

``--disaggregation-mode prefill|decode``: a generation request needs ``bootstrap_room`` (else SGLang's 400); the
prefill side runs the prefill only and serves the room's KV on its bootstrap port, the decode side waits for it
(a simulated transfer) before it decodes; see `hgxkit.sim.standin.sglang.disagg`.

``--api-key``: every endpoint needs ``Authorization: Bearer <key>`` except ``/health*``, ``/ready*`` and
``/metrics*``; admin endpoints (``/flush_cache``) take ``--admin-api-key`` when set.

Token counts: ``input_ids`` are counted exactly; text is counted as whitespace-separated words + 1 (BOS),
which is exact for the synthetic WordLevel tokenizer of `hgxkit.sim.hub` and approximate otherwise.
Generation always runs to ``max_new_tokens``/``max_tokens`` (no EOS is simulated).

Example:
    >>> # server = make_server(app, "127.0.0.1", 0); server.serve_forever()
"""

from __future__ import annotations

import shlex
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from hgxkit.sim.standin.common.engine import Engine
from hgxkit.sim.standin.common.generation import Piece, run_request
from hgxkit.sim.standin.common.httpbase import StandinHandler
from hgxkit.sim.standin.sglang import disagg, metrics
from hgxkit.sim.standin.sglang.args import ModelFacts
from hgxkit.sim.standin.sglang.checks import MemoryPlan

VERSION_DEFAULT = "0.5.23"
_EXEMPT_PREFIXES = ("/health", "/ready", "/metrics")
_ADMIN_PATHS = ("/flush_cache",)


class StubApp:
    """Everything the handlers share: resolved args, model facts, memory plan, engine, identity."""

    def __init__(
        self,
        args: dict[str, Any],
        facts: ModelFacts,
        plan: MemoryPlan,
        engine: Engine,
        argv: list[str],
        version: str = VERSION_DEFAULT,
        pd: disagg.Disaggregation | None = None,
    ) -> None:
        self.args = args
        self.pd = pd
        self.facts = facts
        self.plan = plan
        self.engine = engine
        self.version = version
        self.launch_command = " ".join(shlex.quote(a) for a in argv)
        self.started_at = time.time()
        self.ready_event = threading.Event()
        self.spec = args.get("speculative_algorithm") is not None
        self._vocab = facts.vocab or [f"tok{i}" for i in range(1000)]

    @property
    def served_model_name(self) -> str:
        return str(self.args["served_model_name"])

    # -- documents ---------------------------------------------------------------------------------------

    def model_info(self) -> dict[str, Any]:
        return {
            "model_path": self.args["model_path"],
            "tokenizer_path": self.args["tokenizer_path"],
            "served_model_name": self.served_model_name,
            "is_generation": True,
            "preferred_sampling_params": self.args.get("preferred_sampling_params"),
            "weight_version": self.args.get("weight_version", "default"),
            "load_format": self.args.get("load_format"),
            "reasoning_parser": self.args.get("reasoning_parser"),
            "tool_call_parser": self.args.get("tool_call_parser"),
            "disaggregation_mode": self.args.get("disaggregation_mode"),
            "has_image_understanding": False,
            "has_audio_understanding": False,
            "model_type": self.facts.model_type,
            "architectures": self.facts.architectures,
            "simulated": True,
        }

    def server_info(self) -> dict[str, Any]:
        ranks = max(int(self.args["dp_size"]) if self.args["enable_dp_attention"] else 1, 1)
        state: dict[str, Any] = {
            **self.args,
            "world_size": self.plan.ranks,
            "effective_max_running_requests_per_dp": self.engine.max_running // ranks,
            "last_gen_throughput": self.engine.last_gen_throughput,
            "memory_usage": {
                "weight": 160.0 / max(int(self.args["tp_size"]), 1),
                "kvcache": round(self.plan.kv_pool_bytes_per_rank / (1 << 30), 2),
                "startup_available": 141.0,
                "token_capacity": self.plan.max_total_num_tokens,
                "token_capacity_swa": self.plan.max_total_num_tokens,
                "graph": {},
            },
        }
        # Real SGLang reports the accept length only when a speculative algorithm runs.
        if self.spec:
            state["avg_spec_accept_length"] = self.engine.avg_spec_accept_length
            if self.args["speculative_algorithm"] == "DSPARK":
                state["dspark_info_record"] = {"simulated": True}
        return {
            **self.args,
            "launch_command": self.launch_command,
            "max_total_num_tokens": self.plan.max_total_num_tokens,
            "max_req_input_len": int(self.args["context_length"]) - 1,
            "kv_events": None,
            "startup_time": self.started_at,
            "version": self.version,
            "frontend": "python",
            "internal_states": [state],
            "simulated": True,
        }

    # -- generation --------------------------------------------------------------------------------------

    @staticmethod
    def count_text(text: str) -> int:
        return len(text.split()) + 1

    def generate(
        self, rid: str, endpoint: str, input_tokens: int, max_new: int, received: float, body: dict[str, Any]
    ) -> Iterator[Piece]:
        """Run one simulated request; yields the first token's piece, then one piece per decode step. A
        disaggregated server runs its side of the request (`disagg`), with the bootstrap fields of `body`."""
        if self.pd is not None:
            return self.pd.run(self.engine, (rid, endpoint, input_tokens, max_new, received), self._vocab, body)
        return run_request(self.engine, rid, endpoint, input_tokens, max_new, received, self._vocab)

    def refusal(self, body: dict[str, Any], rid: str) -> str | None:
        """SGLang's 400 message for a request a disaggregated server does not take, else None."""
        return None if self.pd is None else disagg.refusal(body, self.pd.mode, self.pd.backend, rid)


class StubHandler(StandinHandler):
    """Routes one request; `server.app` is the shared `StubApp`."""

    server_version = "hgxkit-sglang-stub (simulated)"

    @property
    def app(self) -> StubApp:
        return self.server.app  # type: ignore[attr-defined]

    def _authorized(self, path: str) -> bool:
        args = self.app.args
        if path.startswith(_EXEMPT_PREFIXES):
            return True
        key = args.get("admin_api_key") if path in _ADMIN_PATHS and args.get("admin_api_key") else args.get("api_key")
        if not key:
            return True
        return self.headers.get("Authorization", "") == f"Bearer {key}"

    # -- verbs ------------------------------------------------------------------------------------------

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def do_HEAD(self) -> None:
        self._dispatch()

    def _dispatch(self) -> None:
        split = urlsplit(self.path)
        path = split.path.rstrip("/") or "/"
        query = parse_qs(split.query)
        try:
            if not self._authorized(path):
                self._json(401, {"error": "Unauthorized"})
                return
            route = self._routes().get(path)
            if route is None and path.startswith("/v1/models/"):
                self._model(path[len("/v1/models/") :])
                return
            if route is None:
                self._json(404, {"detail": "Not Found"})
                return
            route(query)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except (ValueError, KeyError, TypeError) as exc:
            self._json(400, {"error": {"message": f"{type(exc).__name__}: {exc}", "code": 400}})

    def _routes(self) -> dict[str, Callable[[dict[str, list[str]]], None]]:
        return {
            "/health": self._health,
            "/health_generate": self._health,
            "/ready": self._ready,
            "/model_info": lambda q: self._json(200, self.app.model_info()),
            "/get_model_info": lambda q: self._json(200, self.app.model_info()),
            "/server_info": lambda q: self._json(200, self.app.server_info()),
            "/get_server_info": lambda q: self._json(200, self.app.server_info()),
            "/flush_cache": self._flush,
            "/v1/models": self._models,
            "/metrics": self._metrics,
            "/generate": self._generate,
            "/v1/completions": self._completions,
            "/v1/chat/completions": self._chat,
            "/hgxkit_sim/requests": lambda q: self._json(200, [asdict(t) for t in list(self.app.engine.truths)]),
        }

    def _not_ready(self) -> bool:
        if self.app.ready_event.is_set():
            return False
        self._send(503, b"", ctype="text/plain")
        return True

    def _health(self, query: dict[str, list[str]]) -> None:
        if not self._not_ready():
            self._send(200, b"", ctype="text/plain")

    def _ready(self, query: dict[str, list[str]]) -> None:
        if not self._not_ready():
            self._json(200, {"status": "ready"})

    def _flush(self, query: dict[str, list[str]]) -> None:
        timeout = float(query.get("timeout", ["0"])[0] or 0)
        if self.app.engine.flush(timeout):
            msg = (
                "Cache flushed.\nPlease check backend logs for more details. (When there are running or "
                "waiting requests, the operation will not be performed.)\n"
            )
            self._send(200, msg.encode(), ctype="text/plain")
        else:
            self._send(400, b"Cache not flushed: the server is busy.\n", ctype="text/plain")

    def _model_card(self) -> dict[str, Any]:
        return {
            "id": self.app.served_model_name,
            "object": "model",
            "created": int(self.app.started_at),
            "owned_by": "sglang",
            "root": self.app.served_model_name,
            "max_model_len": self.app.args["context_length"],
        }

    def _models(self, query: dict[str, list[str]]) -> None:
        if not self._not_ready():
            self._json(200, {"object": "list", "data": [self._model_card()]})

    def _model(self, name: str) -> None:
        if name != self.app.served_model_name:
            err = {"message": f"The model `{name}` does not exist.", "type": "NotFoundError", "code": 404}
            self._json(404, {"error": {**err, "param": "model_not_found"}})
            return
        self._json(200, self._model_card())

    def _metrics(self, query: dict[str, list[str]]) -> None:
        if not self.app.args["enable_metrics"]:
            self._json(404, {"detail": "Not Found"})
            return
        text = metrics.render(
            self.app.engine,
            self.app.served_model_name,
            self.app.plan.max_total_num_tokens,
            self.app.plan.host_pool_tokens,
        )
        self._send(200, text.encode(), ctype="text/plain; version=0.0.4; charset=utf-8")

    # -- generation endpoints ----------------------------------------------------------------------------

    def _generate(self, query: dict[str, list[str]]) -> None:
        received = time.monotonic()
        if self._not_ready():
            return
        body = self._body()
        if "input_ids" in body and body["input_ids"] is not None:
            if body["input_ids"] and isinstance(body["input_ids"][0], list):
                raise ValueError("batched requests are not supported by the stand-in")
            n_in = len(body["input_ids"])
        elif isinstance(body.get("text"), str):
            n_in = self.app.count_text(body["text"])
        else:
            raise ValueError("either text or input_ids (one request, not a batch) is required")
        params = body.get("sampling_params") or {}
        max_new = int(params.get("max_new_tokens", 128))
        rid = str(body.get("rid") or uuid.uuid4().hex)
        stream = bool(body.get("stream"))
        if refused := self.app.refusal(body, rid):
            self._json(400, {"error": {"message": refused}})
            return
        text = ""
        pieces = self.app.generate(rid, "/generate", n_in, max_new, received, body)
        if stream:
            self._start_stream()
        meta: dict[str, Any] = {}
        try:
            for piece in pieces:
                text += piece.delta
                meta = self._meta(rid, n_in, piece, received)
                if stream:
                    self._sse({"text": text, "meta_info": meta, "index": 0})
        except disagg.TransferError as err:
            self._transfer_failed(str(err), stream)
            return
        finally:
            pieces.close()
        if stream:
            self._sse("[DONE]")
            self._end_stream()
        else:
            self._json(200, {"text": text, "meta_info": meta})

    def _transfer_failed(self, message: str, stream: bool) -> None:
        """SGLang aborts a request whose KV never came with a 500; a stream has sent its 200 already, so the
        error is its last event."""
        error = _error_response(message, "500", 500)
        if not stream:
            self._json(500, error)
            return
        self._sse({"error": error})
        self._sse("[DONE]")
        self._end_stream()

    def _meta(self, rid: str, n_in: int, piece: Piece, received: float) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "id": rid,
            "finish_reason": {"type": "length", "length": piece.produced} if piece.finished else None,
            "prompt_tokens": n_in,
            "weight_version": self.app.args.get("weight_version", "default"),
            "total_retractions": 0,
            "completion_tokens": piece.produced,
            "cached_tokens": 0,
            "e2e_latency": time.monotonic() - received,
        }
        if self.app.spec:
            meta["spec_verify_ct"] = piece.steps
            meta["spec_accept_length"] = (piece.produced - 1) / piece.steps if piece.steps else 1.0
        return meta

    def _usage(self, n_in: int, produced: int) -> dict[str, Any]:
        usage: dict[str, Any] = {
            "prompt_tokens": n_in,
            "completion_tokens": produced,
            "total_tokens": n_in + produced,
        }
        if self.app.args.get("enable_cache_report"):
            usage["prompt_tokens_details"] = {"cached_tokens": 0}
        return usage

    def _openai(self, chat: bool) -> None:
        received = time.monotonic()
        if self._not_ready():
            return
        body = self._body()
        if chat:
            messages = body.get("messages") or []
            n_in = 1 + sum(len(str(m.get("content") or "").split()) + 2 for m in messages)
        else:
            prompt = body.get("prompt", "")
            if isinstance(prompt, list) and prompt and isinstance(prompt[0], int):
                n_in = len(prompt)
            elif isinstance(prompt, str):
                n_in = self.app.count_text(prompt)
            else:
                raise ValueError("prompt must be a string or a list of token ids")
        max_new = int(body.get("max_completion_tokens") or body.get("max_tokens") or 128)
        rid = uuid.uuid4().hex
        created = int(time.time())
        stream = bool(body.get("stream"))
        obj = "chat.completion" if chat else "text_completion"
        model = body.get("model") or self.app.served_model_name
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        if refused := self.app.refusal(body, rid):
            self._json(400, _error_response(refused, "BadRequestError", 400))
            return
        endpoint = "/v1/chat/completions" if chat else "/v1/completions"
        pieces = self.app.generate(rid, endpoint, n_in, max_new, received, body)
        text, produced = "", 0
        if stream:
            self._start_stream()
        try:
            for i, piece in enumerate(pieces):
                text += piece.delta
                produced = piece.produced
                if not stream:
                    continue
                finish = "length" if piece.finished else None
                if chat:
                    delta = {"role": "assistant", "content": piece.delta} if i == 0 else {"content": piece.delta}
                    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
                else:
                    choice = {"index": 0, "text": piece.delta, "logprobs": None, "finish_reason": finish}
                chunk = {
                    "id": rid,
                    "object": obj + ".chunk" if chat else obj,
                    "created": created,
                    "model": model,
                }
                self._sse({**chunk, "choices": [choice], "usage": None})
        except disagg.TransferError as err:
            self._transfer_failed(str(err), stream)
            return
        finally:
            pieces.close()
        usage = self._usage(n_in, produced)
        if stream:
            if include_usage:
                head = {
                    "id": rid,
                    "object": obj + ".chunk" if chat else obj,
                    "created": created,
                    "model": model,
                }
                self._sse({**head, "choices": [], "usage": usage})
            self._sse("[DONE]")
            self._end_stream()
            return
        if chat:
            choice = {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": text,
                    "reasoning_content": None,
                    "tool_calls": None,
                },
                "logprobs": None,
                "finish_reason": "length",
                "matched_stop": None,
            }
        else:
            choice = {
                "index": 0,
                "text": text,
                "logprobs": None,
                "finish_reason": "length",
                "matched_stop": None,
            }
        self._json(
            200,
            {
                "id": rid,
                "object": obj,
                "created": created,
                "model": model,
                "choices": [choice],
                "usage": usage,
            },
        )

    def _completions(self, query: dict[str, list[str]]) -> None:
        self._openai(chat=False)

    def _chat(self, query: dict[str, list[str]]) -> None:
        self._openai(chat=True)


def _error_response(message: str, err_type: str, code: int) -> dict[str, Any]:
    """SGLang's `ErrorResponse` body (its OpenAI endpoints and its HTTPException handler)."""
    return {"object": "error", "message": message, "type": err_type, "param": None, "code": code}


class StubServer(ThreadingHTTPServer):
    """Threaded server: one thread per connection (the benchmark client keeps one per request)."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024

    def __init__(self, addr: tuple[str, int], app: StubApp) -> None:
        super().__init__(addr, StubHandler)
        self.app = app


def make_server(app: StubApp, host: str, port: int) -> StubServer:
    return StubServer((host, port), app)


class _DummyHealthHandler(BaseHTTPRequestHandler):
    """SGLang's dummy health server of a node_rank >= 1: 200 on /health, /health_generate and /ping whatever
    the group's state (a 200 from a worker node says nothing about serving: probe rank 0)."""

    server_version = "hgxkit-sglang-stub dummy health (simulated)"

    def do_GET(self) -> None:
        status = 200 if self.path.split("?")[0] in ("/health", "/health_generate", "/ping") else 404
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


def make_dummy_health_server(host: str, port: int) -> ThreadingHTTPServer:
    """The dummy health server a worker node runs on `--host:--port`."""
    server = ThreadingHTTPServer((host, port), _DummyHealthHandler)
    server.daemon_threads = True
    return server
