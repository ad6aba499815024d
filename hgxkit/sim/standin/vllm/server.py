"""HTTP endpoints of the vLLM stand-in, in vLLM 0.33's shapes (stdlib `http.server`; simulated, no model runs).

Served: ``/health`` and ``/ping`` (200), ``/version``, ``/load``, ``/metrics`` (`metrics`), ``/v1/models``,
``/v1/completions`` and ``/v1/chat/completions`` (streaming in vLLM's SSE format: ``data: {json}\\n\\n`` per
chunk, ``data: [DONE]``; with ``stream_options.include_usage`` a last chunk with ``"choices": []`` and
``usage``; per-request ``metrics`` in it with ``--enable-per-request-metrics``), ``/tokenize`` and
``/detokenize`` (what `vllm bench serve` calls to align prompts), and ``/hgxkit_sim/requests`` (the
ground-truth records; not a vLLM endpoint). Unknown paths: FastAPI's ``404 {"detail": "Not Found"}``.

``--api-key`` (several allowed) or ``VLLM_API_KEY``: paths under ``/v1``, ``/v2``, ``/inference``, ``/cohere``
need ``Authorization: Bearer <key>`` (else ``401 {"error": "Unauthorized"}``); ``/health``, ``/metrics``,
``/tokenize`` … stay open, as in vLLM. A request naming a model that is not served gets vLLM's 404
``The model `X` does not exist.``.

Token counts use `common.tokens` (exact for the simulated Hub's tokenizer). Generation runs to ``max_tokens``
(no EOS is simulated; `vllm bench serve` sends ``ignore_eos`` for random data anyway).

Example:
    >>> # server = make_server(app, "", 8000, listen=False); ...; server.activate()
"""

from __future__ import annotations

import hashlib
import json
import secrets
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from hgxkit.sim.standin.common.generation import run_request
from hgxkit.sim.standin.common.httpbase import StandinHandler
from hgxkit.sim.standin.common.tokens import WordTokenizer
from hgxkit.sim.standin.vllm import metrics
from hgxkit.sim.standin.vllm.nixl import Nixl, TransferError
from hgxkit.sim.standin.vllm.stats import VllmEngine

VERSION_DEFAULT = "0.33.0"
GUARDED_PREFIX = ("/v1", "/v2", "/inference", "/cohere")
DEFAULT_CHAT_MAX_TOKENS = 256  # no EOS is simulated: a chat request without max_tokens stops here


class BadRequest(Exception):
    """An OpenAI-style error answer (``{"error": {"message", "type", "param", "code"}}``)."""

    def __init__(self, status: int, message: str, err_type: str = "BadRequestError", param: str | None = None):
        super().__init__(message)
        self.status, self.message, self.err_type, self.param = status, message, err_type, param

    def doc(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.err_type, "param": self.param, "code": self.status}}


@dataclass
class VllmApp:
    """Everything the handlers share."""

    served_names: list[str]
    model_path: str
    max_model_len: int
    engine: VllmEngine
    tokenizer: WordTokenizer = field(default_factory=WordTokenizer)
    api_keys: list[str] = field(default_factory=list)
    spec: bool = False
    version: str = VERSION_DEFAULT
    log_stats: bool = True
    per_request_metrics: bool = False
    force_include_usage: bool = False
    nixl: Nixl | None = None  # NixlConnector (--kv-transfer-config): prefill/decode over a simulated transfer
    started_at: float = field(default_factory=time.time)
    load: int = 0

    def __post_init__(self) -> None:
        self._key_hashes = [hashlib.sha256(k.encode()).digest() for k in self.api_keys]
        self._lock = threading.Lock()
        self.words = self.tokenizer.words or [f"tok{i}" for i in range(1000)]

    def authorized(self, header: str) -> bool:
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer":
            return False
        digest = hashlib.sha256(token.encode()).digest()
        return any(secrets.compare_digest(digest, k) for k in self._key_hashes)

    def check_model(self, name: Any) -> None:
        if name and name not in self.served_names:
            raise BadRequest(
                404,
                f"The model `{name}` does not exist. Valid aliases: {', '.join(self.served_names)}.",
                "NotFoundError",
                "model",
            )

    def model_list(self) -> dict[str, Any]:
        cards = [
            {
                "id": name,
                "object": "model",
                "created": int(time.time()),
                "owned_by": "vllm",
                "root": self.model_path,
                "parent": None,
                "max_model_len": self.max_model_len,
                "permission": [
                    {
                        "id": f"modelperm-{uuid.uuid4().hex}",
                        "object": "model_permission",
                        "created": int(time.time()),
                        "allow_create_engine": False,
                        "allow_sampling": True,
                        "allow_logprobs": True,
                        "allow_search_indices": False,
                        "allow_view": True,
                        "allow_fine_tuning": False,
                        "organization": "*",
                        "group": None,
                        "is_blocking": False,
                    }
                ],
            }
            for name in self.served_names
        ]
        return {"object": "list", "data": cards}

    def busy(self, delta: int) -> None:
        with self._lock:
            self.load += delta


def _chat_tokens(app: VllmApp, messages: Any, add_generation_prompt: bool) -> int:
    """Prompt tokens of a chat request: BOS, per message a role token + its words, the generation prompt."""
    if not isinstance(messages, list) or not messages:
        raise BadRequest(400, "messages must be a non-empty list")
    n = 1
    for m in messages:
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, list):  # [{"type": "text", "text": …}, …]
            content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        n += 1 + app.tokenizer.count(str(content or ""), add_special_tokens=False)
    return n + (1 if add_generation_prompt else 0)


class VllmHandler(StandinHandler):
    """Routes one request; `server.app` is the shared `VllmApp`."""

    server_version = "uvicorn"  # what vLLM's server header says
    sys_version = ""

    @property
    def app(self) -> VllmApp:
        return self.server.app  # type: ignore[attr-defined]

    # vLLM serialises compactly (pydantic's model_dump_json, FastAPI's JSONResponse): no spaces.
    def _json(self, status: int, doc: Any) -> None:
        self._send(status, json.dumps(doc, separators=(",", ":")).encode())

    def _sse(self, doc: Any) -> None:
        payload = doc if isinstance(doc, str) else json.dumps(doc, separators=(",", ":"))
        self._chunk(f"data: {payload}\n\n".encode())

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_HEAD(self) -> None:
        self._dispatch("GET")

    def _routes(self) -> dict[str, tuple[tuple[str, ...], Callable[[], None]]]:
        return {
            "/health": (("GET",), lambda: self._send(200, b"", "text/plain")),
            "/ping": (("GET", "POST"), lambda: self._send(200, b"", "text/plain")),
            "/version": (("GET",), lambda: self._json(200, {"version": self.app.version})),
            "/load": (("GET",), lambda: self._json(200, {"server_load": self.app.load})),
            "/metrics": (("GET",), self._metrics),
            "/v1/models": (("GET",), lambda: self._json(200, self.app.model_list())),
            "/v1/completions": (("POST",), lambda: self._generate(chat=False)),
            "/v1/chat/completions": (("POST",), lambda: self._generate(chat=True)),
            "/tokenize": (("POST",), self._tokenize),
            "/detokenize": (("POST",), self._detokenize),
            "/hgxkit_sim/requests": (("GET",), lambda: self._json(200, [asdict(t) for t in self.app.engine.truths])),
        }

    def _dispatch(self, method: str) -> None:
        path = urlsplit(self.path).path
        try:
            guarded = path.startswith(GUARDED_PREFIX) and bool(self.app.api_keys)
            if guarded and not self.app.authorized(self.headers.get("Authorization", "")):
                self._json(401, {"error": "Unauthorized"})
                return
            route = self._routes().get(path)
            if route is None:
                self._json(404, {"detail": "Not Found"})
            elif method not in route[0]:
                self._json(405, {"detail": "Method Not Allowed"})
            else:
                route[1]()
        except BadRequest as err:
            self._json(err.status, err.doc())
        except (ValueError, TypeError, KeyError) as exc:
            self._json(400, BadRequest(400, f"{type(exc).__name__}: {exc}").doc())
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _metrics(self) -> None:
        xfer = self.app.nixl.xfer_time if self.app.nixl is not None else None
        text = metrics.render(self.app.engine, self.app.served_names[0], self.app.spec, self.app.log_stats, xfer)
        self._send(200, text.encode(), "text/plain; version=0.0.4; charset=utf-8")

    # -- tokenizer endpoints -------------------------------------------------------------------------------

    def _tokenize(self) -> None:
        body = self._body()
        self.app.check_model(body.get("model"))
        tok = self.app.tokenizer
        if "messages" in body:
            n = _chat_tokens(self.app, body["messages"], bool(body.get("add_generation_prompt", True)))
            text = " ".join(
                str(m.get("content", ""))
                for m in body["messages"]
                if isinstance(m, dict) and isinstance(m.get("content"), str)
            )
            ids = tok.encode(text, add_special_tokens=False)
            ids = ([tok.bos_id or 0] + ids + [0] * n)[:n]
        elif isinstance(body.get("prompt"), str):
            ids = tok.encode(body["prompt"], add_special_tokens=bool(body.get("add_special_tokens", True)))
        else:
            raise BadRequest(400, "prompt (a string) or messages is required")
        doc: dict[str, Any] = {
            "count": len(ids),
            "max_model_len": self.app.max_model_len,
            "tokens": ids,
            "token_strs": None,
        }
        if body.get("return_token_strs"):
            doc["token_strs"] = [tok.decode([i]) for i in ids]
        self._json(200, doc)

    def _detokenize(self) -> None:
        body = self._body()
        self.app.check_model(body.get("model"))
        tokens = body.get("tokens")
        if not isinstance(tokens, list) or not all(isinstance(t, int) and t >= 0 for t in tokens):
            raise BadRequest(400, "tokens must be a list of non-negative integers")
        self._json(200, {"prompt": self.app.tokenizer.decode(tokens)})

    # -- generation ----------------------------------------------------------------------------------------

    def _prompt_tokens(self, body: dict[str, Any], chat: bool) -> int:
        if chat:
            return _chat_tokens(self.app, body.get("messages"), bool(body.get("add_generation_prompt", True)))
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and not isinstance(prompt[0], int):
            prompt = prompt[0]  # a batch of one
        if isinstance(prompt, list) and all(isinstance(t, int) for t in prompt):
            return len(prompt)
        if isinstance(prompt, str):
            return self.app.tokenizer.count(prompt, add_special_tokens=bool(body.get("add_special_tokens", True)))
        raise BadRequest(400, "prompt must be a string, a list of token ids, or a batch of one (simulated stand-in)")

    def _generate(self, chat: bool) -> None:
        received = time.monotonic()
        body = self._body()
        app = self.app
        app.check_model(body.get("model"))
        n_in = self._prompt_tokens(body, chat)
        if n_in > app.max_model_len:
            raise BadRequest(
                400, f"Input length ({n_in}) exceeds model's maximum context length ({app.max_model_len})."
            )
        wanted = body.get("max_completion_tokens") or body.get("max_tokens")
        if wanted is None:
            wanted = DEFAULT_CHAT_MAX_TOKENS if chat else 16
        max_new = min(int(wanted), app.max_model_len - n_in)
        if max_new < 1:
            raise BadRequest(400, f"max_tokens must be at least 1, got {wanted}.", param="max_tokens")
        rid = (self.headers.get("X-Request-Id") or uuid.uuid4().hex).strip()
        rid = ("chatcmpl-" if chat else "cmpl-") + rid
        created = int(time.time())
        model = body.get("model") or app.served_names[0]
        stream = bool(body.get("stream"))
        options = body.get("stream_options") or {}
        include_usage = app.force_include_usage or bool(options.get("include_usage"))
        continuous = app.force_include_usage or (include_usage and bool(options.get("continuous_usage_stats")))
        endpoint = "/v1/chat/completions" if chat else "/v1/completions"
        remote_decode, pulled = self._kv_transfer(body)
        app.busy(+1)
        app.engine.hold_tokens(n_in)
        pieces = run_request(app.engine, rid, endpoint, n_in, max_new, received, app.words, prefill=pulled)
        text, produced, finished, first = "", 0, False, True
        first_token_at = 0.0
        obj = "chat.completion.chunk" if chat else "text_completion"
        head = {"id": rid, "object": obj, "created": created, "model": model}
        try:
            if stream:
                self._start_stream()
            for piece in pieces:
                if not first_token_at:
                    first_token_at = time.monotonic()
                text += piece.delta
                app.engine.hold_tokens(piece.tokens)
                produced = piece.produced
                if not stream:
                    continue
                if chat and first:  # with the first output vLLM sends the role, then the content
                    role = {
                        "index": 0,
                        "delta": {"role": "assistant", "content": ""},
                        "logprobs": None,
                        "finish_reason": None,
                    }
                    self._sse({**head, "choices": [role], "prompt_token_ids": None})
                choice = self._stream_choice(chat, piece.delta, "length" if piece.finished else None)
                chunk: dict[str, Any] = {**head, "choices": [choice], "kv_transfer_params": None}
                if continuous:
                    chunk["usage"] = {
                        "prompt_tokens": n_in,
                        "total_tokens": n_in + produced,
                        "completion_tokens": produced,
                    }
                self._sse(chunk)
                first = False
            finished = True
        finally:
            pieces.close()
            app.engine.hold_tokens(-(n_in + produced))
            app.engine.finish("length" if finished else "abort")
            app.busy(-1)
        usage = {"prompt_tokens": n_in, "total_tokens": n_in + produced, "completion_tokens": produced}
        per_request = self._per_request_metrics(rid, first_token_at, produced) if app.per_request_metrics else None
        if stream:
            if include_usage:
                last: dict[str, Any] = {**head, "choices": [], "usage": usage}
                if per_request is not None:
                    last["metrics"] = per_request
                self._sse(last)
            self._sse("[DONE]")
            self._end_stream()
            return
        doc = self._full_response(chat, head, text, usage, per_request)
        if remote_decode and app.nixl is not None and finished:
            doc["kv_transfer_params"] = app.nixl.hold(rid, n_in)  # the decode pulls these blocks
        self._json(200, doc)

    def _kv_transfer(self, body: dict[str, Any]) -> tuple[bool, Callable[[int], float] | None]:
        """A NIXL request's part: (the prefill of a remote decode, the pull that replaces a remote prefill's
        own prefill); a failed pull fails the request (nixl module doc)."""
        params = body.get("kv_transfer_params")
        if self.app.nixl is None or not isinstance(params, dict):
            return False, None
        if params.get("do_remote_prefill"):
            try:
                return False, self.app.nixl.pull(params)
            except TransferError as err:
                raise BadRequest(500, str(err), "InternalServerError") from None
        return bool(params.get("do_remote_decode")), None

    @staticmethod
    def _stream_choice(chat: bool, delta: str, finish: str | None) -> dict[str, Any]:
        if chat:
            choice: dict[str, Any] = {
                "index": 0,
                "delta": {"content": delta},
                "logprobs": None,
                "finish_reason": finish,
            }
            if finish is not None:
                choice["stop_reason"] = None
            choice["token_ids"] = None
            if finish is not None:
                choice["weight_versions"] = None
            return choice
        return {
            "index": 0,
            "text": delta,
            "logprobs": None,
            "finish_reason": finish,
            "stop_reason": None,
            "prompt_token_ids": None,
            "token_ids": None,
            "weight_versions": None,
        }

    def _per_request_metrics(self, rid: str, first: float, produced: int) -> dict[str, Any]:
        """vLLM's per-request timing metrics, from this request's ground truth (scheduled = after queueing)."""
        truth = next((t for t in reversed(self.app.engine.truths) if t.rid == rid), None)
        if truth is None or not first:
            return {"simulated": True}
        ttft_ms = truth.ttft_ms - truth.queue_ms
        decode_ms = truth.e2e_ms - truth.ttft_ms
        out: dict[str, Any] = {
            "time_to_first_token_ms": ttft_ms,
            "generation_time_ms": decode_ms,
            "queue_time_ms": truth.queue_ms,
            "mean_itl_ms": decode_ms / (produced - 1) if produced > 1 else None,
            "tokens_per_second": produced / ((truth.e2e_ms - truth.queue_ms) / 1000.0)
            if truth.e2e_ms > truth.queue_ms
            else None,
            "simulated": True,
        }
        return {k: v for k, v in out.items() if v is not None}

    def _full_response(
        self, chat: bool, head: dict[str, Any], text: str, usage: dict[str, Any], per_request: dict[str, Any] | None
    ) -> dict[str, Any]:
        if chat:
            message = {
                "role": "assistant",
                "content": text,
                "refusal": None,
                "annotations": None,
                "audio": None,
                "function_call": None,
                "tool_calls": [],
                "reasoning": None,
            }
            choice: dict[str, Any] = {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": "length",
                "stop_reason": None,
                "token_ids": None,
            }
        else:
            choice = {
                "index": 0,
                "text": text,
                "logprobs": None,
                "finish_reason": "length",
                "stop_reason": None,
                "token_ids": None,
                "prompt_logprobs": None,
                "prompt_token_ids": None,
            }
        return {
            **head,
            "object": "chat.completion" if chat else "text_completion",
            "choices": [choice],
            "service_tier": None,
            "system_fingerprint": None,
            "usage": {**usage, "prompt_tokens_details": None},
            "kv_transfer_params": None,
            "metrics": per_request,
        }


class VllmServer(ThreadingHTTPServer):
    """Threaded server whose socket is bound at start but listens only when `activate` is called, as vLLM 0.33
    binds its port before the engine starts and uvicorn listens once the engine is ready (connections are
    refused until then)."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 2048

    def __init__(self, addr: tuple[str, int], app: VllmApp) -> None:
        family = socket.AF_INET6 if ":" in addr[0] else socket.AF_INET
        self.address_family = family
        super().__init__(addr, VllmHandler, bind_and_activate=False)
        self.app = app
        try:
            self.server_bind()
        except OSError:
            self.server_close()
            raise

    def activate(self) -> None:
        self.server_activate()


def make_server(app: VllmApp, host: str, port: int, listen: bool = True) -> VllmServer:
    """Bind (and, unless `listen` is False, listen on) ``host:port``; host ``""`` = all IPv4 interfaces."""
    server = VllmServer((host, port), app)
    if listen:
        server.activate()
    return server
