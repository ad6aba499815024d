"""Keep credentials out of everything hgxkit prints or writes: one pattern list, one scrubber.

`find_secrets` finds every credential in a text, each as the span of its value and the environment variable
that should carry it instead; `redact` masks those spans (logs, archived files, error messages), and the
recipe importer turns them into `{{env:NAME}}` references. Both use `patterns()` (hgxkit's own forms and
the token formats of detect-secrets' detectors), so what the importer removes and what the scrubber masks
cannot drift apart.

Example:
    >>> redact("docker run -e HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz0123 img")
    'docker run -e HF_TOKEN=*** img'
    >>> redact("GET /v1/models Authorization: Bearer abc.def https://u:pw@host/x")
    'GET /v1/models Authorization: Bearer *** https://u:***@host/x'
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

MASK = "***"

# Environment variable names whose values are credentials (matched on the upper-cased name).
SECRET_NAME_RE = re.compile(
    r"^(HF_TOKEN|HUGGING_FACE_HUB_TOKEN|HUGGINGFACE_TOKEN|API_KEY|APIKEY|TOKEN|SECRET|SECRETS|PASSWORD|PASSWD|"
    r"PASS|AUTH|AUTHORIZATION|COOKIE|"
    r".*_API_KEY|.*APIKEY|.*_TOKEN|.*_SECRET|.*_SECRETS|.*_SECRET_KEY|.*_ACCESS_KEY|.*_PRIVATE_KEY|.*_KEY|"
    r".*_PASSWORD|.*_PASSWD|.*PASSWORD|.*_PASS|.*_PWD|.*_PASSPHRASE|.*_PASSCODE|.*CREDENTIALS?|.*_CREDS?|"
    r".*_AUTH|.*_AUTHORIZATION|.*_COOKIE)$"
)
# `*_KEY` is a credential (NGC_API_KEY, AWS_SECRET_ACCESS_KEY, SSH_PRIVATE_KEY, MY_KEY) except in the
# configuration namespaces of the serving stack, where `_KEY` names a setting, not a secret (a cache or
# routing key). Taking a setting for a secret is not harmless: the importer would drop its value from the
# recipe. `_API_KEY`, `_SECRET_KEY`, `_ACCESS_KEY` and `_PRIVATE_KEY` are credentials in every namespace.
_SETTING_PREFIXES = ("SGLANG_", "VLLM_", "NCCL_", "CUDA_", "TORCH_", "PYTORCH_", "TRITON_", "NVSHMEM_")
_ALWAYS_SECRET_KEY_RE = re.compile(r".*_(API|SECRET|ACCESS|PRIVATE)_KEY$")
# `PWD` alone is the shell's working directory, never a password (`DB_PWD`, `MYSQL_PWD` are).
# Names that match a secret family but hold a switch (`HF_HUB_DISABLE_IMPLICIT_TOKEN=1`).
_NOT_SECRET_NAMES = frozenset({"HF_HUB_DISABLE_IMPLICIT_TOKEN", "HF_HUB_DISABLE_TOKEN"})
# `*_AUTH` names a credential (`HTTP_AUTH=user:pw`, `REGISTRY_AUTH`) unless a verb before it makes it a switch.
_AUTH_SWITCH_RE = re.compile(r".*(?:^|_)(?:ENABLE|DISABLE|NO|SKIP|USE|REQUIRE|ALLOW|WITH|WITHOUT|BYPASS)_AUTH$")
# Server flags whose value is a credential: --api-key, --admin-api-key, --hf-token, --token, --password; spelt
# with underscores too (`--api_key`), which both engines' parsers take.
_SECRET_FLAG_RE = re.compile(r"--[A-Za-z0-9_-]*(?:api[-_]key|token|secret|password|passwd)")
# Values that point at a secret instead of holding one: `$X`, `${X}`, `{{env:X}}`, an already masked value.
_REFERENCE_RE = re.compile(r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|\{\{env:[A-Za-z_][A-Za-z0-9_]*\}\}|\*\*\*")
# `auto` is hgxkit's own word for a key it generates on the node (`api_key: auto`), never a key itself
_NOT_A_VALUE = frozenset({"", "None", "none", "null", "NULL", "nil", "true", "false", "auto"})
# Known values shorter than this are not masked: masking "1" would rewrite every number in a log.
MIN_KNOWN_LENGTH = 4


def is_secret_name(name: str) -> bool:
    """True when an environment variable of this name holds a credential.

    Example:
        >>> [is_secret_name(n) for n in ("HF_TOKEN", "NGC_API_KEY", "MY_KEY", "SGLANG_CACHE_KEY", "HF_HOME")]
        [True, True, True, False, False]
    """
    upper = name.upper().replace("-", "_")  # a header name (`X-Api-Key`) is judged like a variable's
    if upper in _NOT_SECRET_NAMES or not SECRET_NAME_RE.match(upper) or _AUTH_SWITCH_RE.match(upper):
        return False
    if upper.endswith("_KEY") and upper.startswith(_SETTING_PREFIXES):
        return bool(_ALWAYS_SECRET_KEY_RE.match(upper))
    return True


def is_secret_flag(flag: str) -> bool:
    """True for server flags that take a credential (`--api-key`, `--admin-api-key`, `--hf-token`, `--api_key`).

    Example:
        >>> [is_secret_flag(f) for f in ("--api-key", "--api_key", "--hf_token", "--max_num_batched_tokens")]
        [True, True, True, False]
    """
    return bool(_SECRET_FLAG_RE.fullmatch(flag))


def flag_env_name(flag: str, engine: str = "SGLANG") -> str:
    """The environment variable a secret flag's value comes from: `--api-key` -> `SGLANG_API_KEY`, or the
    engine's own name (`VLLM_API_KEY`, the variable vLLM reads its key from).

    Example:
        >>> flag_env_name("--hf-token"), flag_env_name("--admin-api-key"), flag_env_name("--api-key", "VLLM")
        ('HF_TOKEN', 'SGLANG_ADMIN_API_KEY', 'VLLM_API_KEY')
    """
    env_name = flag.lstrip("-").upper().replace("-", "_")
    return env_name if env_name.startswith((f"{engine}_", "HF_")) else f"{engine}_{env_name}"


@dataclass(frozen=True)
class SecretSpan:
    """One credential in a text: where its value is, which pattern found it, which variable should hold it."""

    start: int
    end: int
    kind: str
    env_name: str


@dataclass(frozen=True)
class SecretPattern:
    """A credential form: its stable name, a regex (`source`, `flags`) whose group `value` is the secret, and its
    variable.

    `env_name` gets the match and returns the environment variable that should carry the value, or None
    when the match is not a credential after all (a setting named like a secret, a `$REFERENCE`). The regex is
    compiled on the first scan, not at import (~3 ms for them all): a deploy whose recipe's scan is remembered
    (hgxkit.verdicts) scans nothing.
    """

    kind: str
    source: str
    env_name: Callable[[re.Match[str]], str | None]
    flags: int = 0

    @functools.cached_property
    def regex(self) -> re.Pattern[str]:
        return re.compile(self.source, self.flags)


def _fixed(name: str) -> Callable[[re.Match[str]], str | None]:
    return lambda _match: name


def _by_name(match: re.Match[str]) -> str | None:
    name = match.group("name")
    return name.upper() if is_secret_name(name) else None


def _by_flag(match: re.Match[str]) -> str | None:
    return flag_env_name(match.group("flag"))


# A value may be written bare, in double quotes or in single quotes; group `value` is inside the quotes. A
# bare value ends before a backslash-escaped quote: in JSON text (`"--env \"HF_TOKEN=$HF_TOKEN\""`) the
# backslash belongs to the escape, and masking it would break the document.
_QUOTED = (
    r"""(?:"(?P<dq>[^"\n]*)"|'(?P<sq>[^'\n]*)'|"""
    r"""(?P<bare>\{\{env:[A-Za-z_][A-Za-z0-9_]*\}\}|\$\{[A-Za-z_][A-Za-z0-9_]*\}|(?:[^\s"',;}\])\\]|\\(?!["']))+))"""
)
_NOT_WORD_BEFORE = r"(?<![A-Za-z0-9_])"

# Every credential form hgxkit knows; tests/unit/core/test_secrets.py has one case per entry and per form.
# Where two forms find the same value (`token=hf_…`, `--api-key sk-…`), the earlier entry names the variable:
# a value that is recognisably a credential (hf_, nvapi-, sk-) names its own, whatever it was assigned to.
SECRET_PATTERNS: tuple[SecretPattern, ...] = (
    # `https://user:password@host`: only the password is masked, so the URL stays readable. The scheme is at
    # most 32 characters and cannot start inside another: an unbounded one made "a.a.a.…" quadratic. A
    # password may hold `/` (`pa/ss`); a port followed by a path (`host:8000/x@y`) is not a password.
    SecretPattern(
        "url-password",
        r"(?i)(?<![a-z0-9+.-])[a-z][a-z0-9+.-]{0,31}://[^\s/:@'\"]*:(?P<value>(?![0-9]+/)[^\s@'\"]{1,256})@",
        _fixed("URL_PASSWORD"),
    ),
    # curl's credential options, in every spelling curl takes: `-u user:pw`, glued `-uuser:pw`, last in a
    # cluster of short options `-fsSu user:pw` / `-fsuuser:pw`, `--user=user:pw`, `-U`/`--proxy-user` alike
    # (curl's only: `docker run -u 1000:1000` is a uid:gid). The password is masked; with none (`-u TOKEN:`,
    # an API token passed as the user) the user is.
    SecretPattern(
        "user-password-option",
        (
            r"""\bcurl\s[^\n|;&]{0,512}?(?<![A-Za-z0-9-])["']?"""
            r"""(?:-[A-Za-z0-9]{0,16}?[uU](?:=|\s+)?|--(?:proxy-)?user(?:=|\s+))["']?"""
            r"""(?:(?P<bare>[^\s:"'$]{1,256}):(?=\s|$|["'](?:\s|$))|[^\s:"'$]{0,256}:["']?(?P<value>[^\s"']+))"""
        ),
        _fixed("URL_PASSWORD"),
    ),
    # A PEM private key: the whole body between its armour lines (detect-secrets' PrivateKeyDetector finds the
    # BEGIN line; masking only that line would leave the key itself in the text).
    SecretPattern(
        "private-key",
        (
            r"-----BEGIN (?P<label>[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?)-----(?P<value>[\s\S]*?)"
            r"(?:-----END (?P=label)-----|\Z)"
        ),
        _fixed("PRIVATE_KEY"),
    ),
    # npm's granular access tokens (detect-secrets' NpmDetector below reads them only in .npmrc form).
    SecretPattern("npmrc-token", r":_authToken=(?P<value>[^\s\"']+)", _fixed("NPM_TOKEN")),
    SecretPattern("npm-token", _NOT_WORD_BEFORE + r"(?P<value>npm_[A-Za-z0-9]{36})", _fixed("NPM_TOKEN")),
    # Values that are credentials whatever they are called.
    SecretPattern("hugging-face-token", _NOT_WORD_BEFORE + r"(?P<value>hf_[A-Za-z0-9]{20,})", _fixed("HF_TOKEN")),
    SecretPattern(
        "openai-key",
        r"(?<![A-Za-z0-9_-])(?P<value>sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,})",
        _fixed("OPENAI_API_KEY"),
    ),
    SecretPattern("nvidia-key", r"(?<![A-Za-z0-9_-])(?P<value>nvapi-[A-Za-z0-9_-]{20,})", _fixed("NGC_API_KEY")),
    SecretPattern(
        "github-token",
        _NOT_WORD_BEFORE + r"(?P<value>(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}))",
        _fixed("GITHUB_TOKEN"),
    ),
    SecretPattern(
        "aws-access-key-id",
        _NOT_WORD_BEFORE + r"(?P<value>(?:AKIA|ASIA)[0-9A-Z]{16})(?![A-Za-z0-9])",
        _fixed("AWS_ACCESS_KEY_ID"),
    ),
    SecretPattern(
        "jwt",
        r"(?<![A-Za-z0-9_-])(?P<value>eyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*)",
        _fixed("JWT_TOKEN"),
    ),
    SecretPattern("slack-token", _NOT_WORD_BEFORE + r"(?P<value>xox[abposr]-[A-Za-z0-9-]{10,})", _fixed("SLACK_TOKEN")),
    # `Authorization: Bearer K`, `Authorization: Basic K`, `authorization=K`.
    SecretPattern(
        "authorization-header",
        r"(?i)\bauthorization[\"']?\s*[:=]\s*[\"']?(?:(?:bearer|basic|token)\s+)?(?P<value>[^\s\"',;]+)",
        _fixed("BEARER_TOKEN"),
    ),
    SecretPattern("bearer-token", r"\bBearer\s+(?P<value>[A-Za-z0-9._~+/=-]+)", _fixed("BEARER_TOKEN")),
    # Any header (or key) that carries a credential by its name, in any case: `X-Api-Key: K`, `X-Auth-Token: K`,
    # `Proxy-Authorization: Basic K`, `Private-Token: K`, `Ocp-Apim-Subscription-Key: K`, `"x-goog-api-key": "K"`.
    # A name ends in a credential word; a `--flag` never starts one (flag-value above reads flags).
    SecretPattern(
        "credential-header",
        (
            r"(?i)(?<![A-Za-z0-9_-])(?P<q>[\"']?)(?P<name>(?:[a-z0-9]{1,32}-){0,8}"
            r"(?:(?:api|access|secret|private|subscription)-?key|auth|authorization|[a-z]{0,16}token|secret|"
            r"password|passwd|passphrase|credentials?|cookie))(?P=q)[ \t]*[:=][ \t]*"
            # a number is prose's (`per token: 5.2`), not a credential
            r"(?:(?:bearer|basic|token|digest)[ \t]+)?(?![0-9][0-9.]*(?:[\s;,]|$))" + _QUOTED
        ),
        _fixed("API_KEY"),
    ),
    # `["--api-key", "K"]` (a JSON argv) and `['--api-key', 'K']` (a Python list in a log line).
    SecretPattern(
        "flag-in-list",
        (
            r"(?P<q>[\"'])(?P<flag>--[A-Za-z0-9_-]*(?:api[-_]key|token|secret|password|passwd))(?P=q)\s*,\s*"
            r"(?P<q2>[\"'])(?P<value>[^\"'\n]*)(?P=q2)"
        ),
        _by_flag,
    ),
    # `--api-key K`, `--api-key=K`, `--hf-token "K"`, `--api_key K`; a following `--flag` is not a value.
    SecretPattern(
        "flag-value",
        (
            r"(?<![A-Za-z0-9-])(?P<flag>--[A-Za-z0-9_-]*(?:api[-_]key|token|secret|password|passwd))(?:=|\s+)(?!--)"
            + _QUOTED
        ),
        _by_flag,
    ),
    # `NAME=value`, `NAME="value"`, `NAME: value`, `"NAME": "value"`, `api_key='K'` for secret names.
    SecretPattern(
        "secret-name",
        (
            _NOT_WORD_BEFORE
            + r"(?P<q>[\"']?)(?P<name>[A-Za-z0-9_]*(?i:token|key|secrets?|password|passwd|pass|pwd|passphrase|"
            + r"passcode|credentials?|creds?|auth|authorization|cookie))"
            + r"(?P=q)\s*[:=]\s*(?:(?i:bearer|basic|digest)[ \t]+)?"
            + _QUOTED
        ),
        _by_name,
    ),
)

# Forms found by detect-secrets' own detectors (a maintained list that follows providers' token formats): each
# plugin's regexes, masked where the token is. Left out on purpose: its BasicAuth, GitHub, JWT and AWS key-id
# detectors (the patterns above find the same values and keep a URL readable), OpenAI and Npm (their
# unbounded `[…]*`/`.+` are quadratic on adversarial text; "openai-key" and "npm-token"/"npmrc-token" above
# find a superset), PrivateKey (its BEGIN line;
# "private-key" above masks the body), the keyword and high-entropy detectors (heuristics over source files:
# they flag every image digest, commit id and file hash hgxkit must keep readable; secret names above do
# the keyword's job), Artifactory (`AP` + 9 characters matches ordinary words) and public IPs (no secret).
# detect-secrets imports `requests` (for its verifiers), 0.2 s that every CLI start would pay: its plugins are
# loaded the first time a text is scanned.
_DETECT_SECRETS = (
    ("aws", "AWSKeyDetector"),
    ("azure_storage_key", "AzureStorageKeyDetector"),
    ("discord", "DiscordBotTokenDetector"),
    ("gitlab_token", "GitLabTokenDetector"),
    ("mailchimp", "MailchimpDetector"),
    ("pypi_token", "PypiTokenDetector"),
    ("sendgrid", "SendGridDetector"),
    ("slack", "SlackDetector"),
    ("square_oauth", "SquareOAuthDetector"),
    ("stripe", "StripeDetector"),
    ("telegram_token", "TelegramBotTokenDetector"),
    ("twilio", "TwilioKeyDetector"),
)
# A plugin regex's group 1 is the token when it does not start the match and is long enough to be one (AWS's
# secret key inside `aws_secret = '…'`); otherwise (a prefix such as GitLab's `glpat`) the whole match is.
_MIN_GROUP_TOKEN = 8


def _detect_secrets_pattern(plugin: type, regex: re.Pattern[str]) -> SecretPattern:
    # Wrap a regex with groups so `_value_span` can tell a plugin's token group (then group 2) from the whole match.
    source = f"(?P<whole>{regex.pattern})" if regex.groups else regex.pattern
    return SecretPattern(
        "ds-" + plugin.__name__.removesuffix("Detector").lower(), source, _fixed("SECRET"), regex.flags
    )


@functools.cache
def patterns() -> tuple[SecretPattern, ...]:
    """Every credential form: `SECRET_PATTERNS`, then each regex of the detect-secrets plugins above."""
    import importlib

    plugins = [
        getattr(importlib.import_module(f"detect_secrets.plugins.{module}"), name) for module, name in _DETECT_SECRETS
    ]
    return SECRET_PATTERNS + tuple(_detect_secrets_pattern(p, regex) for p in plugins for regex in p().denylist)


def _value_span(match: re.Match[str]) -> tuple[int, int] | None:
    if "whole" in match.re.groupindex:  # a detect-secrets regex: its group 1 (here 2) when that is the token
        inner = match.span(2)
        if inner[0] > match.start() and inner[1] - inner[0] >= _MIN_GROUP_TOKEN:
            return inner
        return match.span()
    if not match.re.groupindex:
        return match.span()
    for group in ("value", "dq", "sq", "bare"):
        if group in match.re.groupindex and match.group(group) is not None:
            return match.span(group)
    return None  # pragma: no cover - every pattern has a value group


def find_secrets(text: str, known: Iterable[str] = ()) -> list[SecretSpan]:
    """Every credential in `text`, left to right, without overlaps (the earlier, then the longer, wins).

    `known` are values known to be secret (the node's API key); each occurrence is reported as `known`.

    Example:
        >>> [(s.kind, s.env_name) for s in find_secrets("-e MY_PASSWORD=pw --api-key k1 --tp 4")]
        [('secret-name', 'MY_PASSWORD'), ('flag-value', 'SGLANG_API_KEY')]
    """
    spans: list[SecretSpan] = []
    for value in sorted({v for v in known if len(v) >= MIN_KNOWN_LENGTH}, key=len, reverse=True):
        start = text.find(value)
        while start >= 0:
            spans.append(SecretSpan(start, start + len(value), "known", "SECRET"))
            start = text.find(value, start + len(value))
    for pattern in patterns():
        for match in pattern.regex.finditer(text):
            span = _value_span(match)
            env_name = pattern.env_name(match)
            if span is None or env_name is None:
                continue
            value = text[span[0] : span[1]]
            if value in _NOT_A_VALUE or _REFERENCE_RE.fullmatch(value):
                continue
            spans.append(SecretSpan(span[0], span[1], pattern.kind, env_name))
    spans.sort(key=lambda s: (s.start, -(s.end - s.start)))
    kept: list[SecretSpan] = []
    for span in spans:
        if kept and span.start < kept[-1].end:
            continue
        kept.append(span)
    return kept


def replace_secrets(text: str, spans: list[SecretSpan], replacement: Callable[[SecretSpan], str]) -> str:
    """`text` with each span (from `find_secrets`) replaced by `replacement(span)`."""
    out: list[str] = []
    last = 0
    for span in spans:
        out.append(text[last : span.start])
        out.append(replacement(span))
        last = span.end
    out.append(text[last:])
    return "".join(out)


def redact(text: str, known: Iterable[str] = ()) -> str:
    """Mask every credential in `text` (see `patterns()`) and every occurrence of a `known` value.

    This is hgxkit's one scrubber: log lines, archived results, host raw files and error messages use it.
    """
    return replace_secrets(text, find_secrets(text, known), lambda _span: MASK)


def redact_url(url: str) -> str:
    """`url` (a server's base URL) as hgxkit shows it (errors, progress, archives): its userinfo, user and
    password both (a token is often the user: `https://TOKEN@host`), masked. Everything up to the last `@` is
    taken for userinfo, parseable or not: a password may hold `/`, `?` or `#`, a base URL holds no other `@`.

    Example:
        >>> redact_url("http://admin:pw@10.0.0.5:30000/"), redact_url("tok@host:1"), redact_url("http://h:1/a")
        ('http://***@10.0.0.5:30000/', '***@host:1', 'http://h:1/a')
    """
    _, sep, rest = url.partition("://")
    start = len(url) - len(rest) if sep else 0
    at = url.rfind("@", start)
    return url if at < 0 else url[:start] + MASK + url[at:]


def redact_json(value: Any, known: Iterable[str] = ()) -> Any:
    """`value` (parsed JSON) with every string redacted and every string under a secret-named key masked, so
    the result is still valid JSON (text redaction of a dump can cut through an escaped quote).

    Example:
        >>> redact_json({"env": {"HF_TOKEN": "x1"}, "cmd": "run --api-key \\"k1\\""})
        {'env': {'HF_TOKEN': '***'}, 'cmd': 'run --api-key "***"'}
    """
    if isinstance(value, dict):
        return {
            key: MASK
            if isinstance(item, str)
            and is_secret_name(str(key))
            and item not in _NOT_A_VALUE
            and not _REFERENCE_RE.fullmatch(item)
            else redact_json(item, known)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [redact_json(item, known) for item in value]
    if isinstance(value, str):
        return redact(value, known)
    return value


def redact_json_text(text: str, known: Iterable[str] = ()) -> str:
    """JSON Lines (every non-empty line JSON, e.g. a client's output) or a JSON document (e.g. a fingerprint)
    with secrets masked value by value (`redact_json`), so it still parses; other text is redacted as text."""
    lines = text.splitlines()
    try:
        parsed = [json.loads(line) if line.strip() else None for line in lines]
    except ValueError:
        parsed = []
    if lines and parsed:
        pairs = zip(lines, parsed, strict=True)
        out = [json.dumps(redact_json(item, known)) if line.strip() else line for line, item in pairs]
        return "\n".join(out) + ("\n" if text.endswith("\n") else "")
    try:
        return json.dumps(redact_json(json.loads(text), known), indent=2) + "\n"
    except ValueError:
        return redact(text, known)


def has_secret(text: str) -> bool:
    """True when `text` holds a credential `redact` would mask."""
    return bool(find_secrets(text))
