"""`recipe import` of hostile posts: time of a 1 MiB post next to a 33 KiB one, per class, and their ratio.

    python bench/import_hostile.py [--profile CLASS]

The classes are the ones that made import quadratic (33 KiB of piped commands took 20-26 s): one
long pipeline per line (`a | b | c …`), long chains of variables (`A1=$A0`, `A2=$A1`, …), many Markdown fences,
many `docker run` lines, and a mix of them. Each is built at 33 KiB, at the largest size import reads
(`MAX_RECIPE_BYTES`) and at 1 MiB (refused by its size before it is read), then handed to `import_post` as
`hgxkit recipe import` does; an import that ends in a refusal counts (a hostile post should be refused, fast).
A line per class and size: its time and outcome; the last lines are the figures, one per line, with the target
(`<= 2 s` for the 1 MiB post) and the ratio of the largest read post's time to the 33 KiB one's (linear: about
its size ratio, 7.8; quadratic: about 60). `--profile CLASS` prints cProfile's top entries for that class at
the largest read size.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hgxkit.errors import InputError  # noqa: E402
from hgxkit.importing.importer import ImportOptions, import_post  # noqa: E402
from hgxkit.recipe.read import MAX_RECIPE_BYTES  # noqa: E402

KIB = 1024
TARGET_S = 2.0


def _fill(unit: Callable[[int], str], size: int, head: str = "", tail: str = "") -> str:
    """`head`, then `unit(0)`, `unit(1)`, … while the text is under `size` bytes, then `tail`."""
    parts, used, index = [head], len(head) + len(tail), 0
    while used < size:
        part = unit(index)
        parts.append(part)
        used += len(part)
        index += 1
    parts.append(tail)
    return "".join(parts)[: max(size, len(head) + len(tail))]


SERVE = "```\nvllm serve org/Tiny-1B --port 8001 -tp 1\n```\n"


def piped(size: int) -> str:
    """Lines of long pipelines after a server command (each line `a | b | c …`, a few hundred stages)."""
    line = "cat /tmp/x" + "".join(f" | grep -v s{n}" for n in range(300)) + "\n"
    return _fill(lambda n: line, size, SERVE + "```\n", "```\n")


def variables(size: int) -> str:
    """One chain of variables, each defined from the one before (50 to a line: `V2=$V1x; V3=$V2x; …`), used by
    the server's command at the end."""
    head, tail = "```\nV0=org/Tiny-1B\n", "vllm serve $V0 --port 8001\n```\n"
    return _fill(lambda n: f"V{n + 1}=$V{n}x" + ("\n" if n % 50 == 49 else "; "), size, head, tail)


def fences(size: int) -> str:
    """Empty and one-line Markdown fences, one after another."""
    return _fill(lambda n: f"```\necho {n}\n```\ntext\n", size, SERVE)


def docker_runs_line(n: int) -> str:
    """The `n`th of a post's `docker run` lines, each a different server."""
    return f"docker run --gpus all -p {8000 + n % 1000}:8000 vllm/vllm-openai:v0.33.0 --model org/M{n}\n"


def docker_runs(size: int) -> str:
    """`docker run` lines, each a different server."""
    return _fill(docker_runs_line, size, "```\n", "```\n")


def mixed(size: int) -> str:
    """All of the above, a unit of each in turn."""
    units = (
        "a | b | c | d | e | f | g | h\n",
        "X=$Y; Y=$X; export Z=${X}${Y}\n",
        "```\n```\n",
        "docker run --rm -v /data:/data vllm/vllm-openai:v0.33.0 --model org/Tiny-1B\n",
    )
    return _fill(lambda n: units[n % len(units)], size, SERVE + "```\n", "```\n")


CLASSES: dict[str, Callable[[int], str]] = {
    "piped": piped,
    "variables": variables,
    "fences": fences,
    "docker-run": docker_runs,
    "mixed": mixed,
}
SIZES = (33 * KIB, MAX_RECIPE_BYTES, 1024 * KIB)


def timed_import(text: str) -> tuple[float, str]:
    """Seconds `import_post` took on `text`, and its outcome (`imported` or the refusal's first words)."""
    start = time.perf_counter()
    try:
        import_post([("post.md", text)], ImportOptions(image="vllm/vllm-openai:v0.33.0"))
        outcome = "imported"
    except InputError as err:
        outcome = "refused: " + err.message.splitlines()[0][:90]
    return time.perf_counter() - start, outcome


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", choices=sorted(CLASSES), help="print cProfile's top entries for this class")
    args = parser.parse_args()
    if args.profile:
        text = CLASSES[args.profile](MAX_RECIPE_BYTES)
        profile = cProfile.Profile()
        profile.runcall(timed_import, text)
        pstats.Stats(profile).sort_stats("cumulative").print_stats(25)
        return 0
    worst_mib, worst_ratio = 0.0, 0.0
    for name, build in CLASSES.items():
        times = []
        for size in SIZES:
            seconds, outcome = timed_import(build(size))
            times.append(seconds)
            print(f"{name:<10} {size // KIB:>5} KiB  {seconds:7.3f} s  {outcome}")
        ratio = times[1] / max(times[0], 1e-6)
        print(f"{name:<10} ratio {MAX_RECIPE_BYTES // KIB} KiB / 33 KiB: {ratio:.1f}")
        worst_mib, worst_ratio = max(worst_mib, times[2]), max(worst_ratio, ratio)
    most = "```\n" + "".join(docker_runs_line(n) for n in range(990)) + "```\n"  # under the 1000-command limit
    seconds, outcome = timed_import(most)
    print(f"docker-run 990 commands ({len(most) // KIB} KiB, the most a post may hold)  {seconds:7.3f} s  {outcome}")
    worst_mib = max(worst_mib, seconds)
    print(
        f"slowest hostile post (1 MiB, or the most commands a post may hold): {worst_mib:.3f} s "
        f"(target <= {TARGET_S:.0f} s)"
    )
    print(
        f"largest read post ({MAX_RECIPE_BYTES // KIB} KiB) slowest class: see lines above; worst time ratio "
        f"{MAX_RECIPE_BYTES // KIB} KiB / 33 KiB: {worst_ratio:.1f} (size ratio {MAX_RECIPE_BYTES / (33 * KIB):.1f})"
    )
    return 0 if worst_mib <= TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
