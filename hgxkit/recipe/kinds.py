"""Server kinds: what hgxkit knows about each serving engine, in one table that check, import, serving,
verify, the fingerprint and compare ask instead of assuming SGLang.

A kind is detected from the image and the server program (`detect_kind`), stored in the recipe
(`server.kind`) and can be overridden there. Engines hgxkit does not drive yet are recognised and refused
by name (`UNSUPPORTED`), never imported as something else.

Example:
    >>> detect_kind("vllm/vllm-openai:latest", ()).name
    'vllm'
    >>> KINDS["vllm"].canonical_flag("-tp"), KINDS["vllm"].canonical_flag("--enable_expert_parallel")
    ('--tensor-parallel-size', '--enable-expert-parallel')
    >>> KINDS["sglang"].canonical_flag("--tp")
    '--tp-size'
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from hgxkit.errors import InputError
from hgxkit.recipe.imageref import repository


@dataclass(frozen=True)
class ServerKind:
    """One serving engine: its command line, network defaults, endpoints, API key and benchmark client."""

    name: str
    title: str
    images: tuple[str, ...]  # image repositories (without tag) that hold this engine
    programs: tuple[tuple[str, ...], ...]  # how its server is launched (first words of the container command)
    flag_aliases: dict[str, str]  # alias -> canonical spelling
    underscores_are_dashes: bool  # `--max_model_len` == `--max-model-len` (vLLM's FlexibleArgumentParser)
    positional_model: bool  # `vllm serve MODEL`, `sglang serve MODEL`
    model_flag: str  # canonical flag naming the model
    tp_flag: str
    pp_flag: str
    dp_flag: str
    default_host: str  # where the server listens unless --host says otherwise
    default_port: int
    health_path: str  # 200 only when the server can generate (the serving role waits on it)
    ready_path: str  # 200 when it answers at all (verify asks this before judging)
    info_path: str | None  # version / server info (fingerprint)
    metrics_path: str
    metrics_flag: str | None  # flag that turns /metrics on; None: always on
    api_key_env: str | None  # environment variable the server reads its API key from; None: only --api-key
    client: str  # the engine's own benchmark client
    client_backend: str  # its --backend for this engine
    flush_cache: bool  # the server has /flush_cache (the client's --flush-cache)
    default_image: str  # for a bare launch imported without --image
    image_entrypoint: tuple[str, ...] = ()  # the official image's ENTRYPOINT, when it is the server itself
    speculative_flags: tuple[str, ...] = ()  # flags that turn speculative decoding on
    multinode_flags: tuple[str, ...] = ()  # flags of a group spanning nodes
    deprecated_programs: tuple[tuple[str, ...], ...] = field(default_factory=tuple)
    # A server spanning nodes: the same command on every host but for these (canonical spellings).
    nnodes_flag: str = "--nnodes"
    rank_flag: str = "--node-rank"
    head_flag: str = ""  # the head node's address (SGLang: HOST:PORT in one value)
    head_port_flag: str | None = None  # the rendezvous port, when it is a flag of its own
    default_dist_port: int | None = None  # the rendezvous port when the command gives none
    worker_flags: tuple[str, ...] = ()  # added on hosts of rank >= 1
    env_report: tuple[str, ...] = ()  # its own environment report (what people attach to bug reports), in a container

    def canonical_flag(self, flag: str) -> str:
        """The canonical spelling of `flag` for this engine (aliases, `_` for `-` where the parser allows)."""
        name = flag
        if self.underscores_are_dashes and name.startswith("--"):
            head, dot, rest = name[2:].partition(".")
            name = "--" + head.replace("_", "-") + dot + rest
        return self.flag_aliases.get(name, name)

    def launches(self, words: Sequence[str]) -> bool:
        """True when the container command starts with one of this engine's launch programs."""
        return _program_of(words, self.programs + self.deprecated_programs) is not None


def python_program(words: Sequence[str]) -> list[str]:
    """`words` with a Python interpreter (`python`, `python3.12`, `/opt/conda/bin/python`) written `python3`.

    Example:
        >>> python_program(["/data/conda/envs/x/bin/python", "-m", "sglang.launch_server"])
        ['python3', '-m', 'sglang.launch_server']
    """
    return [re.sub(r"^(?:\S*/)?python[0-9.]*$", "python3", w) if i == 0 else w for i, w in enumerate(words)]


def _program_of(words: Sequence[str], programs: Sequence[tuple[str, ...]]) -> tuple[str, ...] | None:
    normal = tuple(python_program(words))
    for program in programs:
        if normal[: len(program)] == program:
            return program
    return None


SGLANG = ServerKind(
    name="sglang",
    title="SGLang",
    images=("lmsysorg/sglang", "docker.io/lmsysorg/sglang"),
    programs=(("sglang", "serve"), ("python3", "-m", "sglang.launch_server")),
    flag_aliases={
        "--tp": "--tp-size",
        "--tensor-parallel-size": "--tp-size",
        "--dp": "--dp-size",
        "--data-parallel-size": "--dp-size",
        "--pp": "--pp-size",
        "--pipeline-parallel-size": "--pp-size",
        "--model": "--model-path",
        "--enable-hicache": "--enable-hierarchical-cache",
        "--nccl-init-addr": "--dist-init-addr",
    },
    underscores_are_dashes=False,
    positional_model=True,  # `sglang serve MODEL` (0.5.23)
    model_flag="--model-path",
    tp_flag="--tp-size",
    pp_flag="--pp-size",
    dp_flag="--dp-size",
    default_host="127.0.0.1",
    default_port=30000,
    health_path="/health_generate",
    ready_path="/health",
    info_path="/server_info",
    metrics_path="/metrics",
    metrics_flag="--enable-metrics",
    api_key_env=None,
    client="sglang.benchmark.serving",
    client_backend="sglang",
    flush_cache=True,
    default_image="lmsysorg/sglang:latest",
    speculative_flags=("--speculative-algorithm",),
    multinode_flags=("--nnodes", "--node-rank", "--dist-init-addr"),
    head_flag="--dist-init-addr",
    env_report=("python3", "-m", "sglang.check_env"),
)

VLLM = ServerKind(
    name="vllm",
    title="vLLM",
    images=("vllm/vllm-openai", "docker.io/vllm/vllm-openai"),
    programs=(("vllm", "serve"), ("python3", "-m", "vllm.entrypoints.openai.api_server")),
    flag_aliases={
        "-tp": "--tensor-parallel-size",
        "-pp": "--pipeline-parallel-size",
        "-dp": "--data-parallel-size",
        "-q": "--quantization",
        "-ep": "--enable-expert-parallel",
        "-sc": "--speculative-config",
        "-cc": "--compilation-config",
        "-n": "--nnodes",
        "-r": "--node-rank",
        "-asc": "--api-server-count",
        "-dcp": "--decode-context-parallel-size",
        "-pcp": "--prefill-context-parallel-size",
        "-dpl": "--data-parallel-size-local",
        "-dpa": "--data-parallel-address",
        "-dpp": "--data-parallel-rpc-port",
        "-dpn": "--data-parallel-rank",
        "-dpr": "--data-parallel-start-rank",
        "-dpb": "--data-parallel-backend",
    },
    underscores_are_dashes=True,
    positional_model=True,  # `vllm serve MODEL`; the 0.33 image's ENTRYPOINT is `vllm serve`
    model_flag="--model",
    tp_flag="--tensor-parallel-size",
    pp_flag="--pipeline-parallel-size",
    dp_flag="--data-parallel-size",
    default_host="0.0.0.0",  # host None: the socket binds every IPv4 interface
    default_port=8000,
    health_path="/health",
    ready_path="/health",
    info_path="/version",
    metrics_path="/metrics",
    metrics_flag=None,
    api_key_env="VLLM_API_KEY",
    client="vllm bench serve",
    client_backend="vllm",
    flush_cache=False,
    default_image="vllm/vllm-openai:latest",
    image_entrypoint=("vllm", "serve"),  # 0.33-era images; words after the image are `MODEL flags`
    speculative_flags=("--speculative-config",),
    env_report=("vllm", "collect-env"),
    multinode_flags=("--nnodes", "--node-rank", "--master-addr"),
    head_flag="--master-addr",
    head_port_flag="--master-port",
    default_dist_port=29501,
    worker_flags=("--headless",),  # ranks >= 1 start no API server (vLLM multiprocessing across nodes)
)

KINDS: dict[str, ServerKind] = {kind.name: kind for kind in (SGLANG, VLLM)}


@dataclass(frozen=True)
class UnsupportedKind:
    """An engine hgxkit recognises but does not drive yet: refused by name."""

    name: str
    title: str
    images: tuple[str, ...]
    programs: tuple[tuple[str, ...], ...]
    # What gives the engine away when neither image nor program is known (`$NIM_IMAGE`): environment names,
    # container paths, image name parts.
    hints: tuple[str, ...] = ()

    def hinted_by(self, text: str) -> str | None:
        """The first hint of this engine found in `text` (a command as posted), or None."""
        return next((hint for hint in self.hints if re.search(hint, text)), None)


UNSUPPORTED = (
    UnsupportedKind("tgi", "Hugging Face TGI (text-generation-inference)",
                    ("ghcr.io/huggingface/text-generation-inference",), (("text-generation-launcher",),),
                    (r"text-generation-inference",)),
    UnsupportedKind("nim", "NVIDIA NIM", ("nvcr.io/nim/",), (),
                    (r"\bNIM_[A-Z_]+=", r"/opt/nim/", r"\bnvcr\.io/nim/", r"\b[a-z0-9-]*-nim\b")),
    UnsupportedKind("trtllm", "TensorRT-LLM", ("nvcr.io/nvidia/tensorrt-llm",), (("trtllm-serve",),),
                    (r"tensorrt[-_]llm",)),
    UnsupportedKind("ollama", "Ollama", ("ollama/ollama",), (("ollama",),), (r"\bollama/ollama\b",)),
    UnsupportedKind("llama.cpp", "llama.cpp server", ("ghcr.io/ggml-org/llama.cpp", "ghcr.io/ggerganov/llama.cpp"),
                    (("llama-server",), ("./llama-server",)), (r"\bllama\.cpp[:/]", r"\.gguf\b.*--n-gpu-layers")),
    UnsupportedKind("lmdeploy", "LMDeploy", ("openmmlab/lmdeploy",),
                    (("lmdeploy", "serve"), ("python3", "-m", "lmdeploy")), (r"\blmdeploy\b",)),
    UnsupportedKind("triton", "Triton Inference Server", ("nvcr.io/nvidia/tritonserver",), (("tritonserver",),),
                    (r"tritonserver",)),
)  # fmt: skip


def image_matches(image: str | None, prefixes: Sequence[str]) -> bool:
    """True when `image` is in one of these repositories (a prefix ending in `/` names a registry path)."""
    repo = repository(image or "").lower()
    return any(repo == p.rstrip("/") or (p.endswith("/") and repo.startswith(p)) for p in prefixes)


def detect_kind(image: str | None, program: Sequence[str], explicit: str | None = None) -> ServerKind:
    """The kind of a server from the recipe's `server.kind`, else its program, else its image.

    Raises InputError naming an engine hgxkit does not support, or asking for `server.kind` when nothing tells.
    """
    if explicit:
        if explicit in KINDS:
            return KINDS[explicit]
        raise InputError(f"server.kind {explicit!r}: use one of {', '.join(KINDS)}")
    for kind in KINDS.values():
        if kind.launches(program):
            return kind
    for other in UNSUPPORTED:
        if _program_of(program, other.programs) or image_matches(image, other.images):
            raise InputError(
                f"{other.title} ({other.name}) is not supported yet: hgxkit serves "
                f"{', '.join(k.title for k in KINDS.values())}"
            )
    for kind in KINDS.values():
        if image_matches(image, kind.images):
            return kind
    raise InputError(
        f"cannot tell which server {image or 'this command'} runs: set server.kind to one of {', '.join(KINDS)}"
    )
