"""The pasted-command lexer: shell splitting with positions, forum-paste repairs and refusals."""

from __future__ import annotations

import shlex

import pytest

from hgxkit.errors import InputError
from hgxkit.recipe.shellwords import join_words, quote_word, shell_value, split_words


def texts(text: str) -> list[str]:
    return [word.text for word in split_words(text)]


def test_collapsed_continuations_on_one_line_separate_words() -> None:
    assert texts("docker run -d \\ --name a-X \\ --ipc=host \\ img") == [
        "docker",
        "run",
        "-d",
        "--name",
        "a-X",
        "--ipc=host",
        "img",
    ]


def test_backslash_newline_continuations_tabs_and_blank_lines() -> None:
    text = "docker run \\\n\t-d \\\r\n\n   --rm\timg \\\n  serve"
    assert texts(text) == ["docker", "run", "-d", "--rm", "img", "serve"]


def test_escaped_space_inside_a_word_is_kept() -> None:
    assert texts("ls /my\\ dir") == ["ls", "/my dir"]


def test_single_quotes_keep_inner_double_quotes() -> None:
    assert texts("--gpus '\"device=0,1\"'") == ["--gpus", '"device=0,1"']


def test_double_quote_escapes_follow_posix() -> None:
    assert texts(r'"a\"b" "c\d" "\$HOME"') == ['a"b', "c\\d", "$$HOME"]  # `$$`: a literal dollar sign


def test_positions_are_line_and_column_of_the_word_start() -> None:
    words = split_words("docker run \\\n   --gpuz all")
    assert (words[2].text, words[2].line, words[2].column) == ("--gpuz", 2, 4)


def test_smart_quotes_prompt_and_comments_are_repaired() -> None:
    assert texts("$ docker run \u201cimg\u201d  # runs it") == ["docker", "run", "img"]


def test_unbalanced_quote_names_where_it_opened() -> None:
    with pytest.raises(InputError, match=r"unbalanced single quote opened at line 1, column 12"):
        split_words("docker run 'img")


def test_shell_operators_come_back_marked_but_quoted_ones_are_text() -> None:
    words = split_words("a && b 'c || d' | e")
    assert [(w.text, w.is_operator) for w in words] == [
        ("a", False),
        ("&&", True),
        ("b", False),
        ("c || d", False),
        ("|", True),
        ("e", False),
    ]


@pytest.mark.parametrize(
    "words",
    [
        ["docker", "run", "--gpus", '"device=0,1"', "img"],
        ["a b", "it's", "$HOME/x", "", "tab\there", "line\nbreak", "{{name}}"],
    ],
)
def test_join_words_round_trips_through_the_lexer_and_shlex(words: list[str]) -> None:
    joined = join_words(words)
    assert texts(joined) == words
    assert shlex.split(joined) == words


# Posted words with dollar signs in every quoting context a shell knows; each must mean after a round trip
# through the lexer and `join_words` exactly what it meant as posted.
DOLLAR_FORMS = [
    "sh -c 'echo $PORT'",
    '-v "$HOME/.cache:/root/.cache"',
    "-v $HOME/.cache:/root/.cache",
    "-e X=${X} -e Y=\\$Y",
    '--health-cmd "curl -f http://localhost:\\$PORT/health || exit 1"',
    "'a'\"$X\"'$Y\"'",
    "\"$\" '$X' \"it's $X\" \"${X}\" '${X}' '${X:-fallback}'",
    "price$ '$' \"$\"",
    '--arg=$1 --n="$#"',
]


@pytest.mark.parametrize("command", DOLLAR_FORMS)
def test_dollar_signs_keep_their_meaning_through_the_lexer_and_quoting(command: str, posix_argv) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": "/home/poster", "PORT": "5000", "X": "ex", "Y": "why"}
    rendered = join_words(texts(command))
    assert posix_argv(rendered, env) == posix_argv(command, env)
    if "\\$" not in command:  # shlex does not apply POSIX's `\$` escape inside double quotes
        assert [shell_value(w) for w in texts(command)] == shlex.split(command)


def test_single_quoted_dollar_renders_single_quoted_and_expansions_double_quoted() -> None:
    assert join_words(texts("sh -c 'echo $PORT' \"$HOME/x\" \\$Y")) == "sh -c 'echo $PORT' \"$HOME/x\" '$Y'"
    assert quote_word("a$$b$X") == "'a$b'\"$X\""


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ('"$(date)"', r"command substitution \(\$\(…\)\) at line 1, column 2"),
        ('"`date`"', r"command substitution \(`\) at line 1, column 2"),
        ("echo $$", r"the shell's process ID \(\$\$\) at line 1, column 6"),
        # Literal on the host, but the word reaches a shell again (`sh -c`, a health check): refused too.
        ("sh -c 'echo `id`'", r"command substitution \(`\) at line 1, column 13 is not imported, quoted or not"),
        ("sh -c 'echo $(id)'", r"command substitution \(\$\(…\)\) at line 1, column 13"),
        ('"${X:-\\`id\\`}"', r"parameter expansion '\$\{X:-\\\\`id\\\\`\}' at line 1, column 2 has an operator"),
        ("a\\`id\\`", r"command substitution \(`\) at line 1, column 3"),
        ('"a\\$(id)"', r"command substitution \(\$\(…\)\) at line 1, column 4"),
        ("${X:=oops}", r"parameter expansion '\$\{X:=oops\}' at line 1, column 1 has an operator"),
        ("${X", r"parameter expansion '\$\{X' at line 1, column 1 is never closed"),
    ],
)
def test_expansions_a_recipe_cannot_hold_are_refused_with_their_position(command: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        split_words(command)


def test_bash_ansi_c_quoting_is_decoded_as_bash_decodes_it() -> None:
    assert [w.text for w in split_words("a $'{\"m\": 1}\\n\\x41\\101\\q'")] == ["a", '{"m": 1}\nAA\\q']


@pytest.mark.parametrize(
    ("text", "escape"), [("$'\\UFFFFFFFF'", "UFFFFFFFF"), ("$'\\ud800'", "ud800"), ("$'x\\0'", "0")]
)
def test_an_ansi_c_escape_no_command_line_can_hold_is_refused_in_one_line(text: str, escape: str) -> None:
    with pytest.raises(InputError, match=rf"line 1, column \d+: `\\{escape}` in \$'…' is not a character"):
        split_words(text)
