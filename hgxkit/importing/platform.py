"""Which accelerator a post is for, read before anything else: hgxkit serves NVIDIA GPUs only.

A post for Intel Gaudi, an Intel GPU, Google TPU, Hygon DCU, AMD ROCm, Huawei Ascend, AWS Neuron, NVIDIA Jetson,
CPU only or Apple silicon cannot be reproduced on an HGX node whatever image `--image` names: its settings
(`HABANA_VISIBLE_DEVICES`, `--device hpu`, `/dev/kfd`…) would be carried into an NVIDIA recipe. Each platform is
known by its devices, environment variables, images and resource names, as written in a command (never by a word
of prose). A post that also shows an NVIDIA setup (`--gpus`, `nvidia.com/gpu`, `CUDA_VISIBLE_DEVICES`, an NGC
image) is judged command by command instead (`foreign_in`), so its NVIDIA alternative can still be taken.

Example:
    >>> foreign_in("docker run --runtime=habana -e HABANA_VISIBLE_DEVICES=all img").title
    'Intel Gaudi (HPU)'
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from hgxkit.errors import InputError


class ForeignSetup(InputError):
    """A setup for another accelerator: a refusal that a post's NVIDIA alternative outranks."""


@dataclass(frozen=True)
class Foreign:
    """A sign of another accelerator: the platform's name and the text that shows it."""

    title: str
    shown: str


_JETSON = "NVIDIA Jetson (an arm64 module, not a data-centre GPU)"
_SIGNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "Intel Gaudi (HPU)",
        re.compile(
            r"\b(?:HABANA_[A-Z_]+|PT_HPU_[A-Z_]+)\b|--device[= ]+hpu\b|--runtime[= ]+habana\b"
            r"|\bvault\.habana\.ai/\S*|\bhabana\.ai/gaudi\b|\bgaudi-docker\b|\bvllm-hpu\S*|\bDockerfile\.hpu\b"
        ),
    ),
    ("SGLang-JAX, SGLang for Google TPUs", re.compile(r"\bsgl[_-]jax\b")),
    (
        "Google TPU",
        re.compile(
            r"--device[= ]+tpu\b|\bTPU_[A-Z_]+\b|\blibtpu\b|\bvllm/vllm-tpu\S*|(?<![\w/-])vllm-tpu(?![\w-])"
            r"|\bgoogle\.com/tpu\b|\bDockerfile\.tpu\b|\bcloud\.google\.com/gke-tpu\S*|\bVLLM_TARGET_DEVICE=tpu\b"
            r"|\btorch_xla\[tpu\]|\bgpu: *v\d(?:e|p|litepod)-\d+\b"
        ),
    ),
    (
        "Intel GPU (XPU)",
        re.compile(
            r"--device[= ]+xpu\b|\b(?:ZE_AFFINITY_MASK|ZE_FLAT_DEVICE_HIERARCHY|ONEAPI_DEVICE_SELECTOR)\b"
            r"|\bintel/vllm\S*|\bgpu\.intel\.com/i915\b|\bvllm-xpu\S*|\bDockerfile\.xpu\b"
        ),
    ),
    (
        "Hygon DCU",
        # its kernel driver's second device, its SMI, its image registry, its quantization methods
        re.compile(r"/dev/mkfd\b|\bhy-smi\b|\bimage\.sourcefind\.cn\S*|(?<![\w-])slimquant_\w+"),
    ),
    (
        "AMD ROCm",
        re.compile(
            # /dev/dri is any DRM device (Intel's GPUs' too): the line's /dev/kfd, where it has one, is named
            r"/dev/kfd\b|/dev/dri\b(?!.*/dev/kfd)|\b(?:HIP_VISIBLE_DEVICES|ROCR_VISIBLE_DEVICES|HSA_[A-Z_]+|VLLM_ROCM_[A-Z_]+)\b"
            r"|(?<![\w.-])rocm/\S+|(?<!\S)\S+[:/-]rocm\S*|\bamd\.com/gpu\b"
            # AMD's AITER kernels, which only ROCm builds have: a backend chosen by value, or switched on
            r"|(?<![\w-])--(?:[a-z]+-)*backend[= ]+aiter\b|\b(?:SGLANG_USE_AITER|VLLM_ROCM_USE_AITER\w*)\b"
        ),
    ),
    (
        "Huawei Ascend (NPU)",
        re.compile(
            r"\bASCEND_[A-Z_]+\b|/dev/davinci\w*|\bhuawei\.com/(?:Ascend\w*|npu)\b|\bquay\.io/ascend/\S*|\bvllm-ascend\S*"
            # vllm-ascend's own --additional-config keys, which a command may be the only one to show
            r"|\bascend_\w+_config\b|\btorchair_graph_config\b|--device[= ]+npu\b"
        ),
    ),
    (
        "AWS Neuron",
        re.compile(
            r"--device[= ]+neuron\b|\b(?:NEURON_RT_[A-Z_]+|VLLM_NEURON_[A-Z_]+)\b|/dev/neuron\d*"
            r"|\baws\.amazon\.com/neuron\w*"
        ),
    ),
    (
        _JETSON,
        # a build for it (its name, L4T: Linux for Tegra), its community images, its host's device nodes
        # (an image tagged by its L4T release, as jetson-containers builds them: `vllm:r38.2.aarch64-cu130-24.04`)
        re.compile(
            r"(?<!\S)\S*(?:jetson|[-:/_]l4t[-_.r]|(?<![a-z])tegra|[-:]r3[2-9]\.\d+(?:\.\d+)?[-.](?:aarch64|cu\d))\S*"
            r"|\bdustynv/\S+|/dev/nvhost-\S+",
            re.IGNORECASE,
        ),
    ),
    (
        "CPU only",
        # vLLM's CPU build (its target, its images, its variables) and uv's CPU-only PyTorch
        re.compile(
            r"--device[= ]+cpu\b|\bvllm-cpu\S*|\bVLLM_CPU_[A-Z_]+\b|(?<!\S)\S+:cpu\b"
            r"|\bVLLM_TARGET_DEVICE=[\"']?cpu\b|--torch-backend[= ]+cpu\b"
        ),
    ),
    ("Apple silicon (MPS)", re.compile(r"--device[= ]+mps\b|\bPYTORCH_ENABLE_MPS_FALLBACK\b")),
)
# A sign that is a part of a word (`\S+:cpu`) starts at the word's start (`(?<!\S)`): from any other start the search
# would scan the rest of the word again, quadratic in a long one.
# What shows that a post (also) serves on NVIDIA GPUs.
_DATA_CENTRE = re.compile(r"\b(?:H100|H200|H20|H800|B200|GB200|A100|A800|L40S?)\b")
_NVIDIA = re.compile(
    r"--gpus\b|--runtime[= ]+nvidia\b|\bnvidia\.com/gpu\b|\b(?:CUDA|NVIDIA)_VISIBLE_DEVICES\b|\bnvcr\.io/|"
    + _DATA_CENTRE.pattern
)


def foreign_in(text: str) -> Foreign | None:
    """The first sign of another accelerator in `text` (a command's words), else None."""
    found = [(m.start(), title, m.group()) for title, sign in _SIGNS for m in [sign.search(text)] if m is not None]
    if not found:
        return None
    _, title, shown = min(found)
    return Foreign(title, shown.partition("(")[0].strip("\"'`;,"))  # an image glued to prose: `img:tag(mirror`


def shows_nvidia(lines: Sequence[str]) -> bool:
    """Whether `lines` (prose too: `# for H200`) show an NVIDIA setup."""
    return any(_NVIDIA.search(line) for line in lines)


def refuse_foreign(name: str, lines: Sequence[str], whole: Sequence[str]) -> None:
    """Refuse a post whose command `lines` show another accelerator and whose `whole` text shows no NVIDIA
    setup (`shows_nvidia`), naming the first line that shows it."""
    nvidia = shows_nvidia(whole)
    if nvidia and any(_DATA_CENTRE.search(line) for line in whole):
        return
    for number, line in enumerate(lines, 1):
        found = foreign_in(line)
        # a Jetson is NVIDIA's too (`--gpus all`, `--runtime nvidia`): only a data-centre GPU outweighs its signs
        if found is not None and (not nvidia or found.title == _JETSON):
            raise ForeignSetup(message(f"{name}:{number}", found))


def message(where: str, found: Foreign) -> str:
    """The one-line refusal for a setup on another accelerator."""
    return (
        f"{where}: {found.shown} is {found.title}: the post is for another accelerator, and hgxkit serves "
        "NVIDIA GPUs (HGX nodes); --image cannot change that: import a post for NVIDIA GPUs"
    )


# NVIDIA GPUs of another generation than the H200's (Hopper), as posts name them, with their generation.
_GENERATIONS = (
    ("Blackwell", r"G?B[123]00|GB10|RTX ?PRO ?6000|RTX ?50[5-9]0(?: ?Ti)?"),
    ("Ada", r"L40S?|L4|RTX ?40[5-9]0(?: ?Ti)?"),
    ("Ampere", r"A100|A800|A10G?|A30|A40|A6000|RTX ?30[5-9]0(?: ?Ti)?"),
    ("Volta or Turing", r"V100|T4"),
)
_GENERATION = re.compile(
    "|".join(f"(?P<g{i}>(?<![\\w-])(?:{names})(?![\\w-]))" for i, (_, names) in enumerate(_GENERATIONS))
)

# NVIDIA's desktop GB10 machine, named in its images too (`scitrera/dgx-spark-vllm`): arm64 builds for Blackwell
_SPARK = re.compile(r"(?i)\bdgx[ _-]?spark")


def generation_note(name: str, lines: Sequence[str]) -> str | None:
    """A note where the post names an NVIDIA GPU of another generation than the H200 (`3x B200`, `on an A100`):
    what it chose for that GPU may not run the same on an HGX-H200 node, and its numbers do not compare; None
    where it names none.

    >>> generation_note("p.md", ["served on 3x B200 NVIDIA GPU."])[:40]
    'p.md:1: the post names B200 (Blackwell),'
    >>> generation_note("p.md", ["on H200 and H100", "image ...-cu128-b200"]) is None
    True
    >>> generation_note("p.md", ["docker pull scitrera/dgx-spark-vllm:0.13.0"])[:49]
    'p.md:1: the post names dgx-spark (GB10, Blackwell'
    """
    for number, line in enumerate(lines, 1):
        match = _GENERATION.search(line) or _SPARK.search(line)
        if match is not None:
            group = match.lastgroup
            generation = _GENERATIONS[int(group[1:])][0] if group else "GB10, Blackwell, an arm64 machine"
            return (
                f"{name}:{number}: the post names {match.group()} ({generation}), not the H200 (Hopper) this recipe "
                "deploys on: what it chose for that GPU (image, kernels, memory settings) may not run the same "
                "here, and numbers it reports do not compare"
            )
    return None
