"""Prometheus text exposition (a server's `/metrics`) and hgxkit's series of timed scrapes.

A series file holds several scrapes, each preceded by `# hgxkit-scrape <unix time>` (a Prometheus comment, so
each part stays valid exposition text); the collector on the host writes it with

    while sleep 1; do echo "# hgxkit-scrape $(date +%s.%N)"; curl -s http://127.0.0.1:PORT/metrics; done

Example:
    >>> parse_exposition('vllm:num_requests_running{engine="0"} 3.0')[0].value
    3.0
    >>> [s.time for s in parse_scrape_series(format_scrape_series([(2.0, "a 1"), (1.0, "a 0")]))]
    [1.0, 2.0]
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

SCRAPE_MARK = "# hgxkit-scrape "


@dataclass(frozen=True)
class PromSample:
    """One line of Prometheus text exposition: metric name, labels, value."""

    name: str
    labels: tuple[tuple[str, str], ...]
    value: float


@dataclass(frozen=True)
class Scrape:
    """One `/metrics` answer and when it was taken (unix seconds)."""

    time: float
    samples: tuple[PromSample, ...]


_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+\S+)?\s*$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_exposition(text: str) -> list[PromSample]:
    """Samples of a Prometheus text-format page. Comments, HELP/TYPE and malformed lines are skipped.

    Hand-written on purpose: the format is line-based and small, and the project may not add the
    prometheus_client dependency for its parser alone.
    """
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = _LINE.match(line.strip())
        if not match:
            continue
        try:
            value = float(match.group(4))
        except ValueError:
            continue
        labels = tuple(sorted(_LABEL.findall(match.group(3) or "")))
        out.append(PromSample(match.group(1), labels, value))
    return out


def parse_scrape_series(text: str, *, source: str = "<metrics>") -> list[Scrape]:
    """The scrapes of a series file (`# hgxkit-scrape <time>` before each), oldest first.

    Raises ValueError naming the file when it holds no marker line (then it is one scrape without a time).
    """
    scrapes: list[Scrape] = []
    time: float | None = None
    body: list[str] = []

    def flush() -> None:
        if time is not None:
            scrapes.append(Scrape(time, tuple(parse_exposition("\n".join(body)))))

    for line in text.splitlines():
        if line.startswith(SCRAPE_MARK):
            flush()
            try:
                time = float(line[len(SCRAPE_MARK) :].split()[0])
            except (ValueError, IndexError):
                raise ValueError(f"{source}: bad scrape marker {line!r}; expected '{SCRAPE_MARK}<unix time>'") from None
            body = []
        else:
            body.append(line)
    flush()
    if not scrapes and text.strip():
        raise ValueError(f"{source}: no '{SCRAPE_MARK}<unix time>' line; write one before each scrape")
    return sorted(scrapes, key=lambda s: s.time)


def format_scrape_series(scrapes: list[tuple[float, str]]) -> str:
    """The series file for (unix time, /metrics text) pairs (what `parse_scrape_series` reads)."""
    return "".join(f"{SCRAPE_MARK}{t:.3f}\n{text.rstrip()}\n" for t, text in scrapes)


def counter_increase(scrapes: list[Scrape], name: str) -> float | None:
    """Increase of a counter over the scrapes, summed over its label sets; a drop is a restart (Prometheus
    `increase()` semantics: the value after the reset counts from zero)."""
    per_series: dict[tuple[tuple[str, str], ...], list[float]] = {}
    for scrape in scrapes:
        for s in scrape.samples:
            if s.name == name:
                per_series.setdefault(s.labels, []).append(s.value)
    if not per_series:
        return None
    total = 0.0
    for values in per_series.values():
        for before, after in itertools.pairwise(values):
            total += after - before if after >= before else after
    return total
