"""A posted random-length distribution given to another client: judged by the clients' own sampling code."""

from __future__ import annotations

import json
import subprocess
import textwrap

import pytest

from hgxkit.kinds.lengths import SHARE, SPREAD, Rule
from tests.unit.conftest import ClientPython

POSTED = [(8192, 1024, 0.8), (1024, 1024, 0.8), (1024, 8192, 0.5), (5000, 512, 1.0), (300, 7, 0.9), (2048, 2, 0.25)]
SPREAD_POSTED = [(1024, 128, 0.5), (1024, 1024, 0.0), (2000, 300, 0.1), (8192, 1024, 0.2), (77, 5, 0.9)]
CASES = [(SHARE, p) for p in POSTED] + [(SPREAD, p) for p in SPREAD_POSTED if p[2] < 1]


@pytest.mark.parametrize(("posted", "lengths"), CASES)
@pytest.mark.parametrize("ours", [SHARE, SPREAD])
def test_a_posted_distribution_is_drawn_alike_to_the_token(posted: Rule, lengths: tuple, ours: Rule) -> None:
    wanted = posted.intervals(*lengths)
    draw = ours.settings(wanted)
    assert (draw.input, draw.output) == ours.intervals(draw.input_len, draw.output_len, float(draw.ratio))
    for got, want in zip((draw.input, draw.output), wanted, strict=True):
        assert abs(got[0] - want[0]) <= 1 and abs(got[1] - want[1]) <= 1, (got, want)


def test_a_client_of_the_posts_convention_is_given_the_posts_own_settings() -> None:
    draw = SPREAD.draw(300, 7, 0.9)
    assert (draw.input_len, draw.output_len, draw.ratio) == (300, 7, "0.9")
    assert (draw.input, draw.output) == SPREAD.intervals(300, 7, 0.9)
    assert SHARE.draw(5000, None, 1.0).ratio == "1.0"


def test_a_cell_without_an_output_length_translates_its_input_alone() -> None:
    draw = SPREAD.settings(SHARE.intervals(8192, None, 0.8))
    assert (draw.output_len, draw.output, draw.input) == (None, None, (6553, 8191))
    assert "--random-output-len" not in draw.describe()


# The real clients' own sampling: vLLM 0.33's get_sampling_params and SGLang's compute_random_lens.
_SAMPLE = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    sys.path.insert(0, str(Path(sys.prefix) / "vllm-site"))
    import numpy as np
    from vllm.benchmarks.datasets.utils import get_sampling_params
    from sglang.benchmark.datasets.common import compute_random_lens

    class Tokenizer:
        vocab_size = 1000
        def num_special_tokens_to_add(self):
            return 0

    out = []
    for convention, in_len, out_len, ratio in json.loads(sys.argv[1]):
        if convention == "spread":
            ratio = json.loads(ratio) if ratio.startswith("{") else float(ratio)
            rng = np.random.default_rng(0)
            ins, outs, _ = get_sampling_params(rng, 200000, ratio, in_len, out_len, Tokenizer())
        else:
            np.random.seed(0)
            ins = compute_random_lens(in_len, float(ratio), 200000)
            outs = compute_random_lens(out_len, float(ratio), 200000)
        out.append([[int(min(ins)), int(max(ins))], [int(min(outs)), int(max(outs))]])
    print(json.dumps(out))
    """
)


def test_the_real_clients_draw_the_intervals_the_settings_promise(client_python: ClientPython) -> None:
    python = client_python("vllm")
    draws = [ours.settings(posted.intervals(*lengths)) for posted, lengths in CASES for ours in (SHARE, SPREAD)]
    rules = [ours.name for _ in CASES for ours in (SHARE, SPREAD)]
    asked = [[rule, d.input_len, d.output_len, d.ratio] for rule, d in zip(rules, draws, strict=True)]
    done = subprocess.run([python, "-c", _SAMPLE, json.dumps(asked)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    drawn = json.loads(done.stdout)
    assert drawn == [[list(d.input), list(d.output)] for d in draws]
