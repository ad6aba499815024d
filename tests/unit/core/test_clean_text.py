"""The one sanitiser of a server's text (hgxkit/textinput.py `clean_text`): by class, every way text can act on
a terminal or hide itself, in 7-bit and 8-bit forms, terminated or cut off, and the text that must survive."""

from __future__ import annotations

import json
import time

import pytest

from hgxkit.textinput import clean_json, clean_json_text, clean_text

# Each family of ESC sequence, as a terminal reads it: (7-bit, 8-bit introducer).
SEQUENCES = {
    "csi-colour": ("\x1b[1;31m", "\x9b1;31m"),
    "csi-clear": ("\x1b[2J", "\x9b2J"),
    "csi-cursor-up": ("\x1b[3A", "\x9b3A"),
    "csi-private": ("\x1b[?1049h", "\x9b?1049h"),
    "osc-title-bel": ("\x1b]0;owned\x07", "\x9d0;owned\x07"),
    "osc-clipboard-st": ("\x1b]52;c;cHduZWQ=\x1b\\", "\x9d52;c;cHduZWQ=\x9c"),
    "osc-hyperlink": ("\x1b]8;;http://evil\x1b\\", "\x9d8;;http://evil\x9c"),
    "dcs": ("\x1bPq#0;2;0;0;0\x1b\\", "\x90q#0;2;0;0;0\x9c"),
    "sos": ("\x1bXhidden\x1b\\", "\x98hidden\x9c"),
    "pm": ("\x1b^hidden\x1b\\", "\x9ehidden\x9c"),
    "apc": ("\x1b_hidden\x1b\\", "\x9fhidden\x9c"),
    "charset": ("\x1b(0", "\x1b(0"),
    "save-cursor": ("\x1b7", "\x1b7"),
    "reset": ("\x1bc", "\x1bc"),
}


@pytest.mark.parametrize("sequence", [s for pair in SEQUENCES.values() for s in pair], ids=lambda s: repr(s)[:24])
def test_every_escape_sequence_goes_whole(sequence: str) -> None:
    assert clean_text(f"a{sequence}b") == "ab"
    assert clean_text(f"a{sequence}{sequence}b", lines=True) == "ab"


@pytest.mark.parametrize("family", ["osc-title-bel", "dcs", "apc", "csi-colour"])
def test_a_sequence_cut_off_is_dropped_to_the_end_as_a_terminal_would_swallow_it(family: str) -> None:
    sequence = SEQUENCES[family][0]
    assert clean_text("version " + sequence[:-1]) in ("version ", "version")


def test_every_c0_and_c1_control_and_del_goes() -> None:
    introducers = {0x1B, 0x90, 0x98, 0x9B, 0x9D, 0x9E, 0x9F}  # they take what follows into their sequence
    for code in [*range(0x20), 0x7F, *range(0x80, 0xA0)]:
        kept = clean_text(f"a{chr(code)}b")
        expected = ("a",) if code in introducers else ("ab", "a b")  # white space: a space in one-line text
        assert kept in expected, (hex(code), kept)
        assert clean_text(f"a{chr(code)}", lines=True) in ("a", "a\n", "a\t"), hex(code)


INVISIBLE = ["\u200b", "\u200c", "\u200d", "\u200e", "\u200f", "\u202a", "\u202b", "\u202c", "\u202d", "\u202e"]
INVISIBLE += ["\u2066", "\u2067", "\u2068", "\u2069", "\u2028", "\u2029", "\u2060", "\ufeff", "\u00ad", "\u061c"]
INVISIBLE += ["\ud800", "\udfff", "\U000e0041", "\U000e007f", "\ufff9"]


@pytest.mark.parametrize("char", INVISIBLE, ids=lambda c: f"U+{ord(c):04X}")
def test_invisible_and_reordering_characters_and_lone_surrogates_go(char: str) -> None:
    cleaned = clean_text(f"safe{char}evil")
    assert cleaned in ("safeevil", "safe evil")
    cleaned.encode("utf-8")  # a lone surrogate would stop the print with a traceback


def test_line_breaks_are_spaces_in_one_line_text_and_stay_in_lines() -> None:
    assert clean_text("0.5\nhgxkit: error: forged\r\tx") == "0.5 hgxkit: error: forged  x"
    assert clean_text("one\n\ttwo\r\n", lines=True) == "one\n\ttwo\n"


def test_ordinary_text_survives_untouched() -> None:
    text = "0.5.23-cu129 DeepSeek-V4 模型 Ünïcödé ✓ 🚀 [bold] 100% $HOME `x` \\x1b ~!@#%^&*()_+{}|:<>?"
    assert clean_text(text) == text
    assert clean_text(text, lines=True) == text
    assert clean_text(f"\x1b[1m{text}\x1b[0m") == text  # the same text, wrapped in a sequence


def test_json_from_a_server_is_cleaned_value_by_value_and_still_parses() -> None:
    doc = {"version\x1b[2J": "0.5\x1b]0;t\x07\nx", "n": [1, 2.5, None, True, {"m": "\u202eevil"}]}
    assert clean_json(doc) == {"version": "0.5 x", "n": [1, 2.5, None, True, {"m": "evil"}]}
    lines = json.dumps(doc) + "\n\n" + json.dumps({"rate": float("inf")}) + "\n"
    cleaned = clean_json_text(lines)
    assert [json.loads(line) for line in cleaned.splitlines() if line] == [clean_json(doc), {"rate": float("inf")}]
    assert "\\u001b" not in cleaned and "\\u202e" not in cleaned
    assert json.loads(clean_json_text(json.dumps(doc, indent=2))) == clean_json(doc)  # one document
    assert clean_json_text("not json \x1b[31mred\x1b[0m\n") == "not json red\n"


@pytest.mark.parametrize("unit", ["\x1b]", "\x1b[", "\x9b0;", "\x1bP", "\x1b", "\u202e"])
def test_cleaning_is_linear_on_adversarial_text(unit: str) -> None:
    text = unit * (400_000 // len(unit))
    start = time.process_time()
    cleaned = clean_text(text)
    assert time.process_time() - start < 2.0
    assert "\x1b" not in cleaned and "\u202e" not in cleaned and "\x9b" not in cleaned
