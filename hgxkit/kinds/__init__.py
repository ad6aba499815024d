"""Server kinds: the registry of the serving engines hgxkit drives, and which kind a command is.

One module per engine (hgxkit/kinds/sglang.py, hgxkit/kinds/vllm.py), registered here; check, import, serving,
verify, telemetry and the fingerprint ask the kind instead of naming an engine.

A kind is detected from the image and the server program (`detect_kind`), stored in the recipe
(`server.kind`) and can be overridden there. Engines hgxkit does not drive yet are recognised and refused
by name (`UNSUPPORTED`), never imported as something else. A new engine is one module that builds a
`ServerKind` (hgxkit/kinds/base.py) and is passed to `register_kind`.

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
from dataclasses import dataclass

from hgxkit.errors import InputError
from hgxkit.imageref import repository
from hgxkit.kinds.base import PostedClient, ServerKind, program_of, python_program
from hgxkit.kinds.lengths import SHARE, Rule
from hgxkit.kinds.sglang import SGLANG
from hgxkit.kinds.vllm import VLLM

__all__ = [
    "DEFAULT_KIND",
    "KINDS",
    "KIND_NAMES",
    "UNSUPPORTED",
    "ServerKind",
    "UnsupportedKind",
    "detect_kind",
    "image_file_kind",
    "image_matches",
    "kind_programs",
    "launcher_prefixes",
    "legacy_version_keys",
    "posted_clients",
    "posted_lengths",
    "python_program",
    "register_kind",
    "unregister_kind",
]

KINDS: dict[str, ServerKind] = {}
# The registered names, one list that lives as long as the process (the recipe schema's `server.kind` enum
# holds this very list, so a kind registered later validates too).
KIND_NAMES: list[str] = []
# The kind of a command nothing else tells (a bare `--flags` line, a recipe written before kinds).
DEFAULT_KIND = "sglang"


def posted_lengths(client: str | None) -> Rule:
    """How the client that ran a posted cell read its lengths: a kind's own client's convention; any other
    (the old `benchmark_serving.py` and the suites that forked it, a client not named) the one SGLang kept."""
    posted = next((k for k in KINDS.values() if (client or "").startswith(k.client)), None)
    return posted.bench.lengths if posted else SHARE


def register_kind(kind: ServerKind) -> ServerKind:
    """Add an engine: from now on it is detected, imported, checked, served and verified like the others."""
    if kind.name in KINDS or any(kind.name == other.name for other in UNSUPPORTED):
        raise ValueError(f"server kind {kind.name!r} is already known")
    KINDS[kind.name] = kind
    KIND_NAMES.append(kind.name)
    return kind


def unregister_kind(name: str) -> None:
    """Forget an engine added by `register_kind` (tests)."""
    del KINDS[name]
    KIND_NAMES.remove(name)


def posted_clients() -> tuple[PostedClient, ...]:
    """The benchmark clients of every kind that posts use (engine-neutral ones are hgxkit/recipe/clients.py's)."""
    return tuple(client for kind in KINDS.values() for client in kind.posted_clients)


def launcher_prefixes() -> tuple[tuple[str, ...], ...]:
    """Launch programs that are their own command (`sglang serve`, `vllm serve`), not `python3 -m MODULE`."""
    return tuple(p for kind in KINDS.values() for p in kind.programs if p[0] != "python3")


def kind_programs() -> frozenset[str]:
    """The first words of every kind's server, client and posted router programs (`sglang`, `vllm`, `python3`)."""
    programs = [p for kind in KINDS.values() for p in (*kind.programs, *kind.deprecated_programs)]
    programs += [p for client in posted_clients() for p in client.programs]
    routers = [(p,) for kind in KINDS.values() if kind.prefill_decode for p in kind.prefill_decode.router_programs]
    return frozenset(p[0] for p in programs + routers)


def legacy_version_keys() -> tuple[str, ...]:
    """Every kind's own fingerprint version fields, in registration order (each is written, None when unset)."""
    return tuple(dict.fromkeys(key for kind in KINDS.values() for key in kind.version_keys))


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
    hardware: bool = False  # an accelerator other than NVIDIA's (the refusal says hgxkit serves HGX-H200 nodes)
    # Why a launcher of a served engine is not imported, with the way out (the refusal says it in place of the
    # engines hgxkit serves)
    remedy: str = ""

    def hinted_by(self, text: str) -> str | None:
        """The first hint of this engine found in `text` (a command as posted), or None."""
        return next((hint for hint in self.hints if re.search(hint, text)), None)


# FastChat's processes around its vLLM worker: each is a part of FastChat's serving, none a server of its own.
_FASTCHAT = ("vllm_worker", "model_worker", "controller", "openai_api_server")

UNSUPPORTED = (
    UnsupportedKind(
        "sglang-router",
        "SGLang's router launcher",
        (),
        (("python3", "-m", "sglang_router.launch_server"),),
        remedy=(
            "python -m sglang_router.launch_server starts --dp-size SGLang servers and sglang-router in front of them "
            "in one process, which a recipe (one server command) does not hold; serve with SGLang's own data "
            "parallelism instead (python -m sglang.launch_server, the same flags without --router-*)"
        ),
    ),
    UnsupportedKind(
        "tgi",
        "Hugging Face TGI (text-generation-inference)",
        ("ghcr.io/huggingface/text-generation-inference",),
        (("text-generation-launcher",),),
        (r"text-generation-inference",),
    ),
    UnsupportedKind(
        "nim",
        "NVIDIA NIM",
        ("nvcr.io/nim/",),
        (),
        (r"\bNIM_[A-Z_]+=", r"/opt/nim/", r"\bnvcr\.io/nim/", r"\b[a-z0-9-]*-nim\b"),
    ),
    UnsupportedKind(
        "trtllm", "TensorRT-LLM", ("nvcr.io/nvidia/tensorrt-llm",), (("trtllm-serve",),), (r"tensorrt[-_]llm",)
    ),
    UnsupportedKind("ollama", "Ollama", ("ollama/ollama",), (("ollama",),), (r"\bollama/ollama\b",)),
    UnsupportedKind(
        "llama.cpp",
        "llama.cpp server",
        ("ghcr.io/ggml-org/llama.cpp", "ghcr.io/ggerganov/llama.cpp"),
        (("llama-server",), ("./llama-server",)),
        (r"\bllama\.cpp[:/]", r"\.gguf\b.*--n-gpu-layers"),
    ),
    UnsupportedKind(
        "lmdeploy",
        "LMDeploy",
        ("openmmlab/lmdeploy",),
        (("lmdeploy", "serve"), ("python3", "-m", "lmdeploy")),
        (r"\blmdeploy\b",),
    ),
    UnsupportedKind(
        "lightllm",
        "LightLLM",
        ("ghcr.io/modeltc/lightllm",),
        (("python3", "-m", "lightllm.server.api_server"),),
        (r"\blightllm\.server\b", r"\bmodeltc/lightllm\b"),
    ),
    UnsupportedKind(
        "mini-sglang",
        "Mini-SGLang",
        (),
        (("python3", "-m", "minisgl"),),
        (r"\bminisgl\b", r"\bmini-sglang\b"),
        remedy=(
            "Mini-SGLang (python -m minisgl) is a small separate server with its own flags, not SGLang's "
            "launch_server; import SGLang's own command (python -m sglang.launch_server) with the same model and "
            "--tp"
        ),
    ),
    UnsupportedKind(
        "vllm-demo-server",
        "vLLM's demo API server",
        (),
        (("python3", "-m", "vllm.entrypoints.api_server"),),
        (r"\bvllm\.entrypoints\.api_server\b",),
        remedy=(
            "python -m vllm.entrypoints.api_server is vLLM's demo server (its own /generate API, not OpenAI's; "
            "vLLM 0.33 has it no more), not the OpenAI-compatible server hgxkit deploys; import `vllm serve` with "
            "the same model and flags"
        ),
    ),
    UnsupportedKind(
        "trl-vllm-serve",
        "TRL's vLLM server",
        (),
        (
            ("trl", "vllm-serve"),
            ("python3", "-m", "trl.cli", "vllm-serve"),
            ("python3", "-m", "trl.scripts.vllm_serve"),
        ),
        (r"\btrl(?:\.cli)?\s+vllm-serve\b", r"\btrl\.scripts\.vllm_serve\b"),
        remedy=(
            "`trl vllm-serve` (python -m trl.cli vllm-serve) runs vLLM for TRL's training (its own generate and "
            "weight-sync endpoints), not the OpenAI-compatible server hgxkit deploys; import `vllm serve` with the "
            "same model and parallel sizes"
        ),
    ),
    UnsupportedKind(
        "fastchat",
        "FastChat's vLLM worker",
        (),
        tuple(("python3", "-m", f"fastchat.serve.{part}") for part in _FASTCHAT),
        (rf"\bfastchat\.serve\.(?:{'|'.join(_FASTCHAT)})\b",),
        remedy=(
            "FastChat's vllm_worker runs vLLM inside FastChat's own controller, workers and API server, not the "
            "OpenAI-compatible server hgxkit deploys; import `vllm serve` with the worker's --model-path (its "
            "--num-gpus as --tensor-parallel-size)"
        ),
    ),
    UnsupportedKind(
        "aphrodite",
        "Aphrodite Engine",
        ("alpindale/aphrodite-openai", "alpindale/aphrodite-engine"),
        (("aphrodite", "run"), ("python3", "-m", "aphrodite.endpoints.openai.api_server")),
        (r"\baphrodite run\b", r"\baphrodite\.endpoints\b", r"\balpindale/aphrodite"),
    ),
    UnsupportedKind(
        "xinference",
        "Xinference",
        ("xprobe/xinference",),
        (("xinference", "launch"), ("xinference-local",), ("xinference-supervisor",), ("xinference-worker",)),
        (r"\bxinference-(?:local|supervisor|worker)\b", r"\bxinference\s+launch\b", r"\bxprobe/xinference\b"),
        remedy=(
            "Xinference starts the engine itself (`xinference launch --model-engine vllm`) behind its own "
            "supervisor and API; import `vllm serve` (or `python -m sglang.launch_server`) with the same model"
        ),
    ),
    UnsupportedKind(
        "tabbyapi",
        "TabbyAPI, an ExLlama server",
        ("ghcr.io/theroyallab/tabbyapi",),
        (),
        (r"\btheroyallab/tabbyapi\b",),
    ),
    UnsupportedKind(
        "ms-swift-deploy",
        "ms-swift's `swift deploy`",
        (),
        (("swift", "deploy"),),
        (r"\bswift\s+deploy\b",),
        remedy=(
            "`swift deploy` is ms-swift's own server (its flags, its adapters and templates), which runs vLLM or "
            "SGLang in-process as its --infer_backend; import `vllm serve` (or `sglang serve`) with the same model "
            "and sizes"
        ),
    ),
    UnsupportedKind(
        "llamafactory-api",
        "LLaMA-Factory's `llamafactory-cli api`",
        (),
        (("llamafactory-cli", "api"),),
        (r"\bllamafactory-cli\s+api\b",),
        remedy=(
            "`llamafactory-cli api` is LLaMA-Factory's own OpenAI-style server, which runs vLLM in-process when its "
            "config says infer_backend: vllm; import `vllm serve` with the model (and adapter) its config names"
        ),
    ),
    UnsupportedKind(
        "axolotl-vllm-serve",
        "Axolotl's `axolotl vllm-serve`",
        (),
        (("axolotl", "vllm-serve"),),
        (r"\baxolotl\s+vllm-serve\b",),
        remedy=(
            "`axolotl vllm-serve` runs vLLM for Axolotl's GRPO training (TRL's generate and weight-sync endpoints), "
            "not the OpenAI-compatible server hgxkit deploys; import `vllm serve` with the model its config names"
        ),
    ),
    UnsupportedKind(
        "skyrl-server",
        "SkyRL's inference server",
        (),
        (("python3", "-m", "skyrl_train.inference_engines.sglang.sglang_server"),),
        (r"\bskyrl_train\.inference_engines\.\w+",),
        remedy=(
            "SkyRL's inference-engine module (skyrl_train.inference_engines.…) wraps vLLM or SGLang for its "
            "training loop, not the server hgxkit deploys; import the engine's own command (vllm serve, python -m "
            "sglang.launch_server) with the same model and sizes"
        ),
    ),
    UnsupportedKind(
        "triton", "Triton Inference Server", ("nvcr.io/nvidia/tritonserver",), (("tritonserver",),), (r"tritonserver",)
    ),
    UnsupportedKind(
        "kserve-huggingface",
        "KServe Hugging Face runtime",
        ("kserve/huggingfaceserver",),
        (("python", "-m", "huggingfaceserver"),),
        (r"\bhuggingfaceserver\b",),
    ),
    UnsupportedKind(
        "docker-model-runner",
        "Docker Model Runner",
        ("docker/model-runner",),
        (("docker", "model"),),
        remedy=(
            "no serving command of the engine's own: `docker model …` has Docker's model runner pull and serve the "
            "model with a backend it starts itself (its own flags, not the engine's), which hgxkit does not read; "
            "import the engine's own command (vllm serve, python -m sglang.launch_server) or its docker run"
        ),
    ),
    UnsupportedKind(
        "runai",
        "Run:ai's CLI",
        (),
        (("runai",),),
        remedy=(
            "`runai … submit` has Run:ai's scheduler start the workload from the CLI's own flags (its image, GPUs and "
            "command), which hgxkit does not read; import the server command it runs, with --image naming its image"
        ),
    ),
    UnsupportedKind(
        "dynamo",
        "NVIDIA Dynamo",
        ("nvcr.io/nvidia/ai-dynamo/",),
        tuple(("python3", "-m", f"dynamo.{part}") for part in ("sglang", "vllm", "trtllm", "frontend")),
        (r"\bdynamo\.(?:sglang|vllm|trtllm|frontend)\b", r"\bai-dynamo\b"),
        remedy=(
            "its workers run the engine inside Dynamo's own runtime (registered with dynamo.frontend, which routes "
            "to them), not as the engine's HTTP server that hgxkit deploys and its router joins; import the "
            "engine's own commands (python -m sglang.launch_server, vllm serve) with the same flags"
        ),
    ),
    # Accelerators: an Ascend NPU (its devices, quay.io/ascend images, SGLang's `-cann…-a2`/`-a3` NPU tags), a
    # Tenstorrent card (its device, images and vLLM fork's --tt-device) and AMD's ROCm (its devices and images);
    # refused before anything else is read of the command.
    UnsupportedKind(
        "ascend",
        "Huawei Ascend NPU",
        ("quay.io/ascend/", "ascendhub.huawei.com/"),
        (),
        (r"/dev/davinci", r"\bascend\b", r":\S*-a[23]\b"),
        hardware=True,
    ),
    UnsupportedKind(
        "tenstorrent",
        "Tenstorrent",
        ("ghcr.io/tenstorrent/",),
        (),
        (r"/dev/tenstorrent\b", r"--tt-device\b", r"\btt-metal\b"),
        hardware=True,
    ),
    UnsupportedKind(
        "rocm",
        "AMD ROCm",
        ("rocm/", "vllm/vllm-openai-rocm"),
        (),
        (r"/dev/kfd", r"[:/-]rocm", r"\bamd\.com/gpu\b"),
        hardware=True,
    ),
)

register_kind(SGLANG)
register_kind(VLLM)


def image_matches(image: str | None, prefixes: Sequence[str]) -> bool:
    """True when `image` is in one of these repositories (a prefix ending in `/` names a registry path)."""
    repo = repository(image or "").lower()
    # a registry mirror that keeps Docker Hub's path (`swr.…/ddn-k8s/docker.io/vllm/vllm-openai`) holds that image
    repos = {repo, repo.split("/docker.io/", 1)[-1]}
    return any(r == p.rstrip("/") or (p.endswith("/") and r.startswith(p)) for r in repos for p in prefixes)


def image_file_kind(path: str) -> ServerKind | None:
    """The kind whose server an image file holds, by the words of its name (`vllm-0.8.5p1.sif`,
    `vllm-openai_latest.sif`: vLLM); None when no kind's name or image repository is one of them.

    >>> image_file_kind("/opt/vllm-0.8.5p1.sif").name, image_file_kind("sglang_v0.5.sif").name
    ('vllm', 'sglang')
    >>> image_file_kind("/scratch/llm-api.sif") is None
    True
    """
    stem = path.rsplit("/", 1)[-1].lower()
    words = set(re.split(r"[-_.:]+", stem))
    for kind in KINDS.values():
        names = {kind.name, *(image.rsplit("/", 1)[-1] for image in kind.images)}
        if words & names or any(name in stem for name in names if "-" in name):
            return kind
    return None


def image_names_kind(image: str, kind: str) -> bool:
    """Whether an image's repository name holds kind `kind`'s name as one of its parts (`jdopensource/joyai-llm-vllm`
    for vllm): a build of that engine that hgxkit does not know by its name, not any image a post happens to pull."""
    name = repository(image).rsplit("/", 1)[-1].lower()
    return kind in re.split(r"[-_.]", name)


def kind_named_like(image: str) -> ServerKind | None:
    """The one kind whose own image's repository name (`vllm-openai` of vllm/vllm-openai, `sglang` of
    lmsysorg/sglang) this image's repository ends in under another namespace: a rebuild or a mirror of it.

    >>> kind_named_like("lmcache/vllm-openai:latest-nightly").name, kind_named_like("myorg/app:1")
    ('vllm', None)
    """
    name = repository(image).rsplit("/", 1)[-1].lower()
    found = [k for k in KINDS.values() if any(name == i.rstrip("/").rsplit("/", 1)[-1] for i in k.images)]
    return found[0] if len(found) == 1 else None


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
        if program_of(program, other.programs) or image_matches(image, other.images):
            served = other.remedy or f"hgxkit serves {', '.join(k.title for k in KINDS.values())}"
            raise InputError(f"{other.title} ({other.name}) is not supported yet: {served}")
    for kind in KINDS.values():
        if image_matches(image, kind.images):
            return kind
    raise InputError(
        f"cannot tell which server {image or 'this command'} runs: set server.kind to one of {', '.join(KINDS)}"
    )
