"""A random dataset's request lengths, and the settings that draw the same ones in another client's convention.

Benchmark clients draw each request's input and output length uniformly from an integer interval, but name
the interval differently: SGLang's client and the old `benchmark_serving.py` (and the suites that forked it)
draw from `[int(L*r), L]` ("share": r is the shortest share of L, 1 = fixed lengths); `vllm bench serve`
draws from `[floor(L*(1-r)), ceil(L*(1+r))]` ("spread": r spreads around L, 0 = fixed lengths). A posted
cell's intervals are read by its own client's rule, and the measuring client is given the lengths and ratio
that draw from the same intervals: exactly where integers allow one ratio to, else to within a token at each
end (one ratio for both sides where it can: older clients take no per-side ratios).
A cell without an output length leaves it to the client; only its input side is translated.

Example:
    >>> SPREAD.settings(SHARE.intervals(8192, 1024, 0.8)).describe()
    '--random-input-len 7372 --random-output-len 921 --random-range-ratio 0.111 (input 6553-8191, output 818-1024)'
    >>> SHARE.settings(SPREAD.intervals(1024, 128, 0.5)).describe()
    '--random-input-len 1536 --random-output-len 192 --random-range-ratio 0.3337 (input 512-1536, output 64-192)'
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from fractions import Fraction

Interval = tuple[int, int]


@dataclass(frozen=True)
class Draw:
    """What a client is given (its --random-input-len/-output-len/-range-ratio) and the intervals it draws;
    no output length: the client's own default."""

    input_len: int
    output_len: int | None
    ratio: str
    input: Interval
    output: Interval | None

    def describe(self) -> str:
        out = f" --random-output-len {self.output_len}" if self.output_len is not None else ""
        spans = f"input {self.input[0]}-{self.input[1]}"
        spans += f", output {self.output[0]}-{self.output[1]}" if self.output else ""
        return f"--random-input-len {self.input_len}{out} --random-range-ratio {self.ratio} ({spans})"


@dataclass(frozen=True)
class Rule:
    """One client convention: `share` ([int(L*r), L]) or `spread` ([floor(L*(1-r)), ceil(L*(1+r))])."""

    name: str

    @property
    def fixed(self) -> float:
        """The ratio that means fixed lengths."""
        return 1.0 if self.name == "share" else 0.0

    def interval(self, length: int, ratio: float) -> Interval:
        if self.name == "share":
            return max(int(length * ratio), 1), length
        return max(math.floor(length * (1 - ratio)), 1), math.ceil(length * (1 + ratio))

    def intervals(self, input_len: int, output_len: int | None, ratio: float) -> tuple[Interval, Interval | None]:
        output = self.interval(output_len, ratio) if output_len is not None else None
        return self.interval(input_len, ratio), output

    def draw(self, input_len: int, output_len: int | None, ratio: float) -> Draw:
        """The client given these settings as they are (a post measured with a client of this convention)."""
        return Draw(input_len, output_len, str(float(ratio)), *self.intervals(input_len, output_len, ratio))

    def settings(self, wanted: tuple[Interval, Interval | None]) -> Draw:
        """The lengths and ratio that draw from `wanted` (input, output intervals), or the nearest."""
        in_len, in_range = self._side(wanted[0])
        out_len, out_range = self._side(wanted[1]) if wanted[1] else (None, in_range)
        lengths = (in_len,) if out_len is None else (in_len, out_len)
        common = _overlap(in_range, out_range)
        if common is not None:
            ratios = (_pick(common),) * 2
        elif self.name == "share" or _near(self, lengths, _pick(in_range), wanted):
            # One ratio for both where it is off by a token at most: older clients take no per-side ratios.
            ratios = (_pick(in_range),) * 2
        else:
            ratios = (_pick(in_range), _pick(out_range))
        if ratios[0] == ratios[1]:
            ratio = _text(ratios[0], lengths, self)
            texts = (ratio, ratio)
        else:
            texts = (_text(ratios[0], lengths[:1], self), _text(ratios[1], lengths[1:], self))
            ratio = json.dumps({"input": float(texts[0]), "output": float(texts[1])}, separators=(", ", ": "))
        output = self.interval(out_len, float(texts[1])) if out_len is not None else None
        return Draw(in_len, out_len, ratio, self.interval(in_len, float(texts[0])), output)

    def _side(self, wanted: Interval) -> tuple[int, _Range]:
        return _share_side(wanted) if self.name == "share" else _spread_side(wanted)


SHARE = Rule("share")
SPREAD = Rule("spread")

# The ratios that draw one side's interval exactly (an open or half-open range; both ends equal: that one).
_Range = tuple[Fraction, Fraction]


def _share_side(wanted: Interval) -> tuple[int, _Range]:
    """L = the top; int(L*r) = low for r in [low/L, (low+1)/L); fixed lengths are r = 1."""
    low, high = wanted
    if low >= high:
        return high, (Fraction(1), Fraction(1))
    return high, (Fraction(low, high), Fraction(low + 1, high))


def _spread_side(wanted: Interval) -> tuple[int, _Range]:
    """The centre c and ratios r with floor(c - c*r) = low and ceil(c + c*r) = high, trying the centres next
    to the middle; where none fits (low + high odd), the low end exact and the top a token short."""
    low, high = wanted
    if low >= high:
        return high, (Fraction(0), Fraction(0))
    middle = (low + high) // 2
    for centre in (middle, middle + 1):
        # d = c*r: floor(c - d) = low <=> d in (c-low-1, c-low]; ceil(c + d) = high <=> d in (high-1-c, high-c]
        start, end = max(centre - low - 1, high - 1 - centre), min(centre - low, high - centre)
        if start < end:
            return centre, (Fraction(start, centre), Fraction(end, centre))
    # c - d = low + 1/2 and c + d = 2c - low - 1/2 = high - 1/2
    spread = Fraction(2 * (middle - low) - 1, 2 * middle)
    return middle, (spread, spread)


def _near(rule: Rule, lengths: tuple[int, ...], ratio: Fraction, wanted: tuple[Interval, Interval | None]) -> bool:
    """True when one ratio draws every interval to within a token at each end."""
    drawn = [rule.interval(length, float(ratio)) for length in lengths]
    pairs = zip(drawn, wanted[: len(drawn)], strict=True)
    return all(abs(d - w) <= 1 for got, want in pairs if want for d, w in zip(got, want, strict=True))


def _overlap(a: _Range, b: _Range) -> _Range | None:
    low, high = max(a[0], b[0]), min(a[1], b[1])
    if low < high or (low == high and a[0] == a[1] and b[0] == b[1]):
        return low, high
    return None


def _pick(ratios: _Range) -> Fraction:
    """The middle of the range, away from both edges (floats round near an edge)."""
    return (ratios[0] + ratios[1]) / 2


def _text(ratio: Fraction, lengths: tuple[int, ...], rule: Rule) -> str:
    """The shortest decimal of `ratio` that the client, reading it as a float, turns into the same intervals."""
    targets = [rule.interval(length, float(ratio)) for length in lengths]
    for digits in range(1, 18):
        text = f"{float(ratio):.{digits}g}"
        if [rule.interval(length, float(text)) for length in lengths] == targets:
            return text if "." in text or "e" in text else f"{text}.0"
    return repr(float(ratio))
