"""Imported means deployable: every corpus post that imports, started on simulated nodes.

    python bench/deploy_sweep.py [--cluster sweep] [--only PATTERN …] [--keep]

Takes every post of tests/fixtures/posts and tests/fixtures/posts/formats whose index says it imports, as the
corpus tests import it (`--pick`, `--model-repo` and `--image` from the index), and for each one
(hgxkit.sim.sweep.deploy): the serving role's containers for every rank and group, with the simulated stand-in
image in place of the post's and nothing else changed, started one after another on the cluster's two nodes
(brought up once with deploys/bringup.py), each waited for until its health endpoint answers. Prints one line per
post (`ok` or `FAIL` with the cause), then the count. Removes the cluster at the end unless `--keep`. About 5-10
minutes on 2 cores; `make sweep` runs it.
"""

from __future__ import annotations

import argparse
import fnmatch
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "unit" / "importing"))  # the corpus as its tests read it

from hgxkit.sim import nodes as simnodes  # noqa: E402
from hgxkit.sim.sweep import Case, SweepNodes, deploy  # noqa: E402


def corpus_cases() -> list[Case]:
    """Every post the corpus indexes expect to import, in index order: posts, then formats. A post whose entry
    names a `gap` (the corpus holds it as a strict xfail: it does not import yet) is left out."""
    import test_post_corpus as corpus
    import test_post_formats as formats

    cases = [
        Case(entry["file"], (corpus.POSTS / entry["file"]).read_text(), corpus.PICKS.get(number))
        for number, entry in sorted(corpus.ENTRIES.items())
        if entry["expect"] == "import" and not entry.get("gap")
    ]
    for name, entry in sorted(formats.ENTRIES.items()):
        options = entry.get("options", {})  # the import options the formats tests import it with
        if set(options) - {"pick", "model_repo", "image"}:
            raise ValueError(
                f"{name}: import options {sorted(options)}: the sweep's Case takes pick, model_repo and image"
            )
        if entry["expect"] == "import":
            text = (formats.FORMATS / name).read_text()
            cases.append(Case(name, text, options.get("pick"), options.get("model_repo"), options.get("image")))
    return cases


def run(cases: list[Case], cluster: str, keep: bool, out: Callable[[str], None] = print) -> int:
    """Sweep `cases` on `cluster`; print a line per post and the count; return the number of failures."""
    began = time.monotonic()
    nodes = SweepNodes.up(cluster, count=2)
    try:
        nodes.bring_up()
        nodes.pull_standins()
        setup = time.monotonic() - began
        out(f"deploy sweep: {len(cases)} imported posts on cluster {cluster} (2 nodes), set-up {setup:.0f} s")
        results = []
        for case in cases:
            result = deploy(nodes, case)
            results.append(result)
            out(result.line())
        failed = [r for r in results if not r.ok]
        out(
            f"deploy sweep: {len(results) - len(failed)} of {len(results)} posts started and answered health; "
            f"{len(failed)} failed; {time.monotonic() - began:.0f} s"
        )
        return len(failed)
    finally:
        if not keep:
            simnodes.down(cluster)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cluster", default="sweep", help="the simulated cluster's name (default: sweep)")
    parser.add_argument("--only", nargs="*", default=[], help="file-name patterns of the posts to sweep")
    parser.add_argument("--keep", action="store_true", help="leave the cluster running")
    args = parser.parse_args(argv)
    cases = [c for c in corpus_cases() if not args.only or any(fnmatch.fnmatch(c.name, p) for p in args.only)]
    return 1 if run(cases, args.cluster, args.keep) else 0


if __name__ == "__main__":
    sys.exit(main())
