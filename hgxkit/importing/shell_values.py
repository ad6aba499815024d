"""The values of shell words, arithmetic and tests for one known environment, computed without running a shell.

A benchmark suite's launch script decides its server's flags from the variables its runner sets: `"$TP"`,
`${EP_SIZE:-1}`, `${X:+--flag $X}`, `"${ARGS[@]}"`, `$(( CONC * 3 / 2 > 8 ? CONC * 3 / 2 : 8 ))`, and
`[[ $ISL -eq 1024 && $OSL -eq 1024 ]]`. `fields` expands one word as bash does (quotes removed, an unquoted
expansion split at blanks, an empty one gone, an array's elements one word each), `arithmetic` evaluates
`$(( … ))` in whole numbers, `test_value` decides `[[ … ]]`, `[ … ]` and `test`. A value the environment does
not give (a name the runner sets that is not modelled, `$!`, a command substitution, a file test) raises
`Unknown`, naming what it needed: the caller refuses, or finds the answer does not matter. Nothing is run.

Example:
    >>> env = {"TP": "8", "ISL": "8192", "ARGS": ("--tp", "8"), "EMPTY": ""}
    >>> fields('--n="$TP"', env), fields("$EMPTY", env), fields('"${ARGS[@]}"', env), fields("${EP_SIZE:-1}", env)
    (['--n=8'], [], ['--tp', '8'], ['1'])
    >>> arithmetic("ISL > 4096 ? ISL / 2 : 1", env), test_value(["[[", "$ISL", "-eq", "1024", "]]"], env)
    (4096, False)
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

Value = str | tuple[str, ...]  # a variable's value: text, or an array's elements
Environment = Mapping[str, Value]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BLANKS = re.compile(r"[ \t\n]+")
_SPECIAL = frozenset("!?$#@*-0123456789")
_GLOB = frozenset("*?[")


class Unknown(Exception):
    """The value needs what the environment does not give: `what` names it (`$SLURM_JOB_ID`, `$(…)`)."""

    def __init__(self, what: str, why: str = "") -> None:
        super().__init__(what)
        self.what = what
        self.why = why or f"{what} is not known before the script runs"


@dataclass(frozen=True)
class Segment:
    """One piece of a word: literal text, or an expansion (`param`, `array`, `arith`, `command`, `special`,
    `unsupported`), and whether it stood inside quotes."""

    kind: str
    text: str  # the literal text, the name, the expression, or the expansion as written
    quoted: bool
    op: str = ""  # of a `param`: "", ":-", "-", ":+", "+"
    word: str = ""  # the word after the operator, as written


def segments(raw: str) -> list[Segment]:
    """`raw` (a word as written) taken apart into literal pieces and expansions."""
    out: list[Segment] = []
    index = 0
    while index < len(raw):
        char = raw[index]
        if char == "'":
            end = raw.find("'", index + 1)
            end = len(raw) if end < 0 else end
            out.append(Segment("lit", raw[index + 1 : end], True))
            index = end + 1
        elif char == '"':
            index = _double_quoted(raw, index + 1, out)
        elif char == "\\":
            if raw[index + 1 : index + 2] != "\n":
                out.append(Segment("lit", raw[index + 1 : index + 2], True))
            index += 2
        elif char in "$`":
            segment, index = _expansion(raw, index, quoted=False)
            out.append(segment)
        else:
            out.append(Segment("lit", char, False))
            index += 1
    return out


def _double_quoted(raw: str, index: int, out: list[Segment]) -> int:
    """The segments of a double-quoted part starting after its `"`; the index after its closing quote."""
    out.append(Segment("lit", "", True))  # `""` is a word even when empty
    while index < len(raw) and raw[index] != '"':
        char = raw[index]
        if char == "\\" and raw[index + 1 : index + 2] in ('"', "\\", "$", "`", "\n"):
            if raw[index + 1] != "\n":
                out.append(Segment("lit", raw[index + 1], True))
            index += 2
        elif char in "$`":
            segment, index = _expansion(raw, index, quoted=True)
            out.append(segment)
        else:
            out.append(Segment("lit", char, True))
            index += 1
    return index + 1


def _expansion(raw: str, index: int, *, quoted: bool) -> tuple[Segment, int]:
    """The expansion starting at `raw[index]` (a `$` or a backtick), and the index after it."""
    if raw[index] == "`":
        end = raw.find("`", index + 1)
        end = len(raw) - 1 if end < 0 else end
        return Segment("command", raw[index : end + 1], quoted), end + 1
    rest = raw[index + 1 :]
    if rest.startswith("(("):
        end = closing(raw, index + 1, "(", ")")
        return Segment("arith", raw[index + 3 : end - 1], quoted), end + 1
    if rest.startswith("("):
        end = closing(raw, index + 1, "(", ")")
        return Segment("command", raw[index : end + 1], quoted), end + 1
    if rest.startswith("{"):
        end = closing(raw, index + 1, "{", "}")
        return _braced(raw[index + 2 : end], raw[index : end + 1], quoted), end + 1
    if rest[:1] in ("'", '"'):
        return Segment("unsupported", raw[index : index + 2], quoted), index + 2
    name = _NAME.match(rest)
    if name:
        return Segment("param", name.group(), quoted), index + 1 + name.end()
    if rest[:1] and rest[0] in _SPECIAL:
        return Segment("special", "$" + rest[0], quoted), index + 2
    return Segment("lit", "$", quoted), index + 1


def _braced(body: str, written: str, quoted: bool) -> Segment:
    name = _NAME.match(body)
    if name is None:
        special = (len(body) == 1 and body in _SPECIAL) or body.isdigit()
        return Segment("special" if special else "unsupported", written, quoted)
    rest = body[name.end() :]
    if rest == "":
        return Segment("param", name.group(), quoted)
    if rest in ("[@]", "[*]"):
        return Segment("array", name.group(), quoted, op=rest)
    for op in (":-", ":+", "-", "+"):
        if rest.startswith(op):
            return Segment("param", name.group(), quoted, op=op, word=rest[len(op) :])
    return Segment("unsupported", written, quoted)


def closing(text: str, index: int, opening: str, close: str) -> int:
    """The index of the `close` that matches the `opening` at `text[index]` (quotes and nested expansions
    skipped); the last index when it is never closed."""
    depth = 0
    while index < len(text):
        char = text[index]
        if char == "\\":
            index += 2
            continue
        if char == "'" and opening != "'":
            end = text.find("'", index + 1)
            index = len(text) if end < 0 else end + 1
            continue
        if char == '"':
            index = skip_double(text, index + 1)
            continue
        if char == opening:
            depth += 1
        elif char == close:
            depth -= 1
            if depth == 0:
                return index
        index += 1
    return len(text) - 1


def skip_double(text: str, index: int) -> int:
    """The index after the `"` that closes a double-quoted part starting at `index`."""
    while index < len(text) and text[index] != '"':
        if text[index] == "\\":
            index += 2
        elif text[index] == "$" and text[index + 1 : index + 2] in ("(", "{"):
            index = closing(text, index + 1, text[index + 1], ")" if text[index + 1] == "(" else "}") + 1
        else:
            index += 1
    return index + 1


def fields(raw: str, env: Environment) -> list[str]:
    """The words `raw` becomes in `env`, as bash expands it; `Unknown` when it needs a value `env` lacks."""
    parts = segments(raw)
    if len(parts) == 2 and parts[0] == Segment("lit", "", True) and parts[1].kind == "array" and parts[1].op == "[@]":
        return list(_array(parts[1].text, env))  # `"${A[@]}"`: one word per element, none for an empty array
    out: list[str] = []
    current: list[str] = []
    started = False
    for segment in parts:
        if segment.kind == "lit":
            current.append(segment.text)
            started = True
            continue
        if segment.kind == "array" and segment.quoted and segment.op == "[@]":
            for number, element in enumerate(_array(segment.text, env)):
                if number:
                    out.append("".join(current))
                    current = []
                current.append(element)
                started = True
            continue
        value = " ".join(_array(segment.text, env)) if segment.kind == "array" else expansion_value(segment, env)
        if segment.quoted:
            current.append(value)
            started = True
            continue
        for number, piece in enumerate(_BLANKS.split(value)):
            if number and started:
                out.append("".join(current))
                current, started = [], False
            if piece:
                current.append(piece)
                started = True
    if started:
        out.append("".join(current))
    return out


def text_value(raw: str, env: Environment) -> str:
    """The text `raw` becomes where bash does not split words (an assignment's value, `[[ … ]]`)."""
    return "".join(
        s.text if s.kind == "lit" else " ".join(_array(s.text, env)) if s.kind == "array" else expansion_value(s, env)
        for s in segments(raw)
    )


def expansion_value(segment: Segment, env: Environment) -> str:
    """The text of one expansion in `env` (before word splitting)."""
    if segment.kind == "param":
        value = env.get(segment.text)
        if isinstance(value, tuple):  # an array named as a scalar is its first element
            value = value[0] if value else ""
        if segment.op == "":
            if value is None:
                raise Unknown(f"${segment.text}")
            return value
        is_set = value is not None and (value != "" or segment.op in ("-", "+"))
        if segment.op in (":-", "-"):
            return value if is_set and value is not None else text_value(segment.word, env)
        return text_value(segment.word, env) if is_set else ""
    if segment.kind == "arith":
        return str(arithmetic(segment.text, env))
    if segment.kind == "command":
        raise Unknown(segment.text, f"{segment.text} is a command substitution: its value is known only by running it")
    if segment.kind == "special":
        raise Unknown(segment.text, f"{segment.text} is set by the shell as the script runs")
    raise Unknown(segment.text, f"{segment.text} is a form of expansion hgxkit does not evaluate")


def _array(name: str, env: Environment) -> tuple[str, ...]:
    value = env.get(name)
    if value is None:
        raise Unknown(f"${{{name}[@]}}")
    return value if isinstance(value, tuple) else (value,)


def names_in(raw: str) -> list[str]:
    """The variables `raw` expands (its `$NAME`s, `${NAME…}`s and arrays), in order; arithmetic's bare names too."""
    found: list[str] = []
    for segment in segments(raw):
        if segment.kind in ("param", "array"):
            found.append(segment.text)
            found += names_in(segment.word) if segment.word else []
        elif segment.kind == "arith":
            found += [m.group() for m in _NAME.finditer(segment.text)]
    return list(dict.fromkeys(found))


# --- arithmetic: $(( … )), the operands of -eq and the like ---

_ARITH_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z0-9_]*)|(<=|>=|==|!=|&&|\|\||[-+*/%<>!?:()]))")
_BINARY = {
    "||": 1,
    "&&": 2,
    "==": 3,
    "!=": 3,
    "<": 4,
    ">": 4,
    "<=": 4,
    ">=": 4,
    "+": 5,
    "-": 5,
    "*": 6,
    "/": 6,
    "%": 6,
}


def arithmetic(expression: str, env: Environment) -> int:
    """The whole number `expression` is in `env` (`$NAME`s and bare names read as numbers; + - * / % < > <= >=
    == != && || ! and `? :`, as C and bash compute them); `Unknown` for anything else."""
    text = "".join(
        s.text if s.kind == "lit" else expansion_value(s, env) for s in segments(expression.replace('"', ""))
    )
    tokens: list[str] = []
    position = 0
    while position < len(text.rstrip()):
        match = _ARITH_TOKEN.match(text, position)
        if match is None:
            raise Unknown(f"$(({expression}))", f"$(({expression})) uses arithmetic hgxkit does not evaluate")
        tokens.append(match.group(match.lastindex or 0))
        position = match.end()
    parser = _Arithmetic(tokens, env, expression)
    try:
        value = parser.ternary()
    except RecursionError:  # parentheses nested past Python's stack: no script needs that
        raise Unknown(f"$(({expression[:40]}))", "an arithmetic expression nested too deep") from None
    if parser.index != len(tokens):
        raise Unknown(f"$(({expression}))", f"$(({expression})) is not an expression hgxkit reads")
    return value


class _Arithmetic:
    """Precedence climbing over the tokens of one expression."""

    def __init__(self, tokens: list[str], env: Environment, expression: str) -> None:
        self.tokens, self.env, self.expression, self.index = tokens, env, expression, 0

    def _peek(self) -> str:
        return self.tokens[self.index] if self.index < len(self.tokens) else ""

    def _fail(self) -> Unknown:
        return Unknown(f"$(({self.expression}))", f"$(({self.expression})) is not an expression hgxkit reads")

    def ternary(self) -> int:
        condition = self.binary(1)
        if self._peek() != "?":
            return condition
        self.index += 1
        yes = self.ternary()
        if self._peek() != ":":
            raise self._fail()
        self.index += 1
        no = self.ternary()
        return yes if condition else no

    def binary(self, level: int) -> int:
        left = self.unary()
        while _BINARY.get(self._peek(), 0) >= level:
            op = self.tokens[self.index]
            self.index += 1
            right = self.binary(_BINARY[op] + 1)
            left = _apply(op, left, right, self._fail)
        return left

    def unary(self) -> int:
        token = self._peek()
        self.index += 1
        if token in ("-", "+", "!"):
            value = self.unary()
            return -value if token == "-" else value if token == "+" else int(not value)
        if token == "(":
            value = self.ternary()
            if self._peek() != ")":
                raise self._fail()
            self.index += 1
            return value
        if token.isdigit():
            return _number(token, self.expression)
        if _NAME.fullmatch(token):
            value = self.env.get(token)
            if value is None or isinstance(value, tuple) or not re.fullmatch(r"\s*-?\d+\s*", value or "0"):
                raise Unknown(f"${token}", f"${token} is not a number known before the script runs")
            return _number(value or "0", f"${token}")
        raise self._fail()


def _number(text: str, where: str) -> int:
    """A decimal number as bash's 64-bit arithmetic holds it; longer than any such number: `Unknown`."""
    digits = text.strip().lstrip("-")
    if len(digits) > 20:
        raise Unknown(where[:40], f"{digits[:20]}… is longer than bash's 64-bit numbers")
    return _wrap(int(text))


def _wrap(value: int) -> int:
    """`value` in two's complement over 64 bits, as bash's arithmetic overflows."""
    return (value + 2**63) % 2**64 - 2**63


def _apply(op: str, left: int, right: int, fail: Callable[[], Unknown]) -> int:
    return _wrap(_operate(op, left, right, fail))


def _operate(op: str, left: int, right: int, fail: Callable[[], Unknown]) -> int:
    if op in ("/", "%"):
        if right == 0:
            raise fail()
        quotient = abs(left) // abs(right) * (1 if (left < 0) == (right < 0) else -1)  # C: toward zero
        return quotient if op == "/" else left - right * quotient
    results = {
        "+": lambda: left + right,
        "-": lambda: left - right,
        "*": lambda: left * right,
        "<": lambda: int(left < right),
        ">": lambda: int(left > right),
        "<=": lambda: int(left <= right),
        ">=": lambda: int(left >= right),
        "==": lambda: int(left == right),
        "!=": lambda: int(right != left),
        "&&": lambda: int(bool(left and right)),
        "||": lambda: int(bool(left or right)),
    }
    return results[op]()


# --- tests: [[ … ]], [ … ], test ---

_INTEGER_TESTS = {
    "-eq": lambda a, b: a == b,
    "-ne": lambda a, b: a != b,
    "-gt": lambda a, b: a > b,
    "-ge": lambda a, b: a >= b,
    "-lt": lambda a, b: a < b,
    "-le": lambda a, b: a <= b,
}


def test_value(words: Sequence[str], env: Environment) -> bool:
    """Whether the test command `words` (as written: `[[ … ]]`, `[ … ]` or `test …`) succeeds in `env`;
    `Unknown` when that needs what `env` lacks, or the test is of a form hgxkit does not decide (a file test,
    `=~`, `-a`/`-o`)."""
    double = words[0] == "[["
    body = list(words[1:-1] if words[0] in ("[[", "[") else words[1:])
    try:
        if double:
            return _Double(body, env).expression()
        values = [f for word in body for f in fields(word, env)]  # `[` splits its words like any command
        return _single(values, " ".join(words))
    except RecursionError:  # `! ! ! …` or parentheses nested past Python's stack: no script needs that
        raise Unknown(" ".join(words)[:40], "a test nested too deep") from None


def _single(values: list[str], written: str) -> bool:
    if values[:1] == ["!"]:
        return not _single(values[1:], written)
    if len(values) == 1:
        return values[0] != ""
    if len(values) == 2 and values[0] in ("-n", "-z"):
        return (values[1] != "") == (values[0] == "-n")
    if len(values) == 3 and values[1] in ("=", "==", "!="):
        return (values[0] == values[2]) == (values[1] != "!=")
    if len(values) == 3 and values[1] in _INTEGER_TESTS:
        if not all(re.fullmatch(r"\s*-?\d+\s*", v) for v in (values[0], values[2])):
            raise Unknown(written, f"`{written}` compares values that are not whole numbers")
        return bool(_INTEGER_TESTS[values[1]](_number(values[0], written), _number(values[2], written)))
    raise Unknown(written, f"`{written}` is a test hgxkit does not decide")


class _Double:
    """`[[ … ]]`: && || ! and parentheses over unary and binary tests; no word splitting, patterns on the
    right of == and !=."""

    def __init__(self, words: list[str], env: Environment) -> None:
        self.words, self.env, self.index = words, env, 0
        self.written = "[[ " + " ".join(words) + " ]]"

    def _peek(self, ahead: int = 0) -> str:
        index = self.index + ahead
        return self.words[index] if index < len(self.words) else ""

    def _fail(self) -> Unknown:
        return Unknown(self.written, f"`{self.written}` is a test hgxkit does not decide")

    def expression(self) -> bool:
        value = self._and()
        while self._peek() == "||":
            self.index += 1
            right = self._and()
            value = value or right
        if self.index != len(self.words) and self._peek() != ")":
            raise self._fail()
        return value

    def _and(self) -> bool:
        value = self._not()
        while self._peek() == "&&":
            self.index += 1
            right = self._not()
            value = value and right
        return value

    def _not(self) -> bool:
        if self._peek() == "!":
            self.index += 1
            return not self._not()
        if self._peek() == "(":
            self.index += 1
            value = self.expression()
            if self._peek() != ")":
                raise self._fail()
            self.index += 1
            return value
        return self._primary()

    def _primary(self) -> bool:
        if self._peek() in ("-n", "-z") and self._peek(2) in ("", "&&", "||", ")"):
            op, word = self._peek(), self._peek(1)
            self.index += 2
            return (text_value(word, self.env) != "") == (op == "-n")
        if self._peek().startswith("-") and len(self._peek()) == 2 and self._peek(2) in ("", "&&", "||", ")"):
            raise Unknown(self.written, f"`{self.written}` tests a file or option on the machine that runs it")
        left, op, right = self._peek(), self._peek(1), self._peek(2)
        if op in ("=", "==", "!="):
            self.index += 3
            matched = fnmatch.fnmatchcase(text_value(left, self.env), _pattern(right, self.env))
            return matched == (op != "!=")
        if op in _INTEGER_TESTS:
            self.index += 3
            return bool(_INTEGER_TESTS[op](self._number(left), self._number(right)))
        if op in ("", "&&", "||", ")"):
            self.index += 1
            return text_value(left, self.env) != ""
        raise self._fail()

    def _number(self, word: str) -> int:
        text = text_value(word, self.env)
        return _number(text, text) if re.fullmatch(r"\s*-?\d+\s*", text) else arithmetic(text, self.env)


def _pattern(raw: str, env: Environment) -> str:
    """The right side of `[[ a == b ]]` as an fnmatch pattern: quoted characters match themselves."""
    out = []
    for segment in segments(raw):
        text = segment.text if segment.kind == "lit" else expansion_value(segment, env)
        if segment.quoted:
            text = "".join(f"[{c}]" if c in _GLOB else c for c in text)
        out.append(text)
    return "".join(out)
