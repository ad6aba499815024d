"""The one secret scrubber: every credential form it masks, the ordinary values it must leave alone, its speed."""

from __future__ import annotations

import time

import pytest

from hgxkit.results.archive import scrub
from hgxkit.secrets import (
    MASK,
    find_secrets,
    flag_env_name,
    is_secret_flag,
    is_secret_name,
    patterns,
    redact,
)

HF = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345"
NVAPI = "nvapi-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
PEM_BEGIN, PEM_END = "-----BEGIN RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----"
NPM = "npm_" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"

# (id, text, the text after redact). One case per pattern and per written form of it.
MASKED = [
    ("env-hf-token", f"docker run -e HF_TOKEN={HF} img", "docker run -e HF_TOKEN=*** img"),
    ("env-hub-token", "HUGGING_FACE_HUB_TOKEN=hub-token-value-1", "HUGGING_FACE_HUB_TOKEN=***"),
    ("env-ngc-key", f"-e NGC_API_KEY={NVAPI}", "-e NGC_API_KEY=***"),
    ("env-openai-double-quoted", 'OPENAI_API_KEY="not-an-sk-but-secret"', 'OPENAI_API_KEY="***"'),
    ("env-aws-secret-yaml", "AWS_SECRET_ACCESS_KEY: wJalrXUtnFEMI/K7MDENG/bPxRfiCYEX", "AWS_SECRET_ACCESS_KEY: ***"),
    ("json-password", '{"DB_PASSWORD": "hunter22", "port": 5432}', '{"DB_PASSWORD": "***", "port": 5432}'),
    ("env-passwd", "MY_PASSWD=x1y2z3", "MY_PASSWD=***"),
    ("env-secret-single-quoted", "APP_SECRET='s3cr3t value'", "APP_SECRET='***'"),
    ("env-plain-key", "MY_KEY=abcdef", "MY_KEY=***"),
    ("env-sglang-api-key", "SGLANG_API_KEY=abcdef", "SGLANG_API_KEY=***"),
    ("env-private-key", "SSH_PRIVATE_KEY=abcdef", "SSH_PRIVATE_KEY=***"),
    (
        "sglang-server-args-log",
        "ServerArgs(model_path='/model', api_key='k-123456', admin_api_key='adm-98765', tp_size=4)",
        "ServerArgs(model_path='/model', api_key='***', admin_api_key='***', tp_size=4)",
    ),
    (
        "json-argv",
        '{"argv": ["sglang", "serve", "--api-key", "K1234567"]}',
        '{"argv": ["sglang", "serve", "--api-key", "***"]}',
    ),
    ("python-argv", "['serve', '--admin-api-key', 'K1234567']", "['serve', '--admin-api-key', '***']"),
    ("python-argv-underscores", "['serve', '--api_key', 'K1234567']", "['serve', '--api_key', '***']"),
    ("json-api-key", '{"api_key": "K1234567", "admin_api_key": null}', '{"api_key": "***", "admin_api_key": null}'),
    ("authorization-bearer", "Authorization: Bearer abc.def-123", "Authorization: Bearer ***"),
    ("authorization-basic", "curl -H 'Authorization: Basic dXNlcjpwYXNz' x", "curl -H 'Authorization: Basic ***' x"),
    ("bare-bearer", "sent Bearer tok_123456 to", "sent Bearer *** to"),
    ("flag-space", "--api-key K123456 --tp 4", "--api-key *** --tp 4"),
    ("flag-equals", "--api-key=K123456 --tp 4", "--api-key=*** --tp 4"),
    ("flag-hf-token", "--hf-token abcdef123", "--hf-token ***"),
    ("flag-token", "--token abcdef123", "--token ***"),
    ("flag-quoted", "--admin-api-key 'adm key'", "--admin-api-key '***'"),
    (
        "flag-underscores",
        "--api_key K123456 --hf_token=abcdef123 --max_num_batched_tokens 8",
        "--api_key *** --hf_token=*** --max_num_batched_tokens 8",
    ),
    ("flag-after-underscore", "x_--api-key K123456", "x_--api-key ***"),
    ("hf-anywhere", f"label x={HF}.", "label x=***."),
    ("openai-key", "key sk-AbCdEfGhIjKlMnOpQrStUvWx here", "key *** here"),
    ("openai-project-key", "sk-proj-AbCdEfGhIjKlMnOpQrStUvWx_12-34", "***"),
    ("nvidia-key", f"({NVAPI})", "(***)"),
    ("github-pat-classic", "ghp_FAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKE0000", "***"),
    ("github-oauth", "gho_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "***"),
    ("github-server", "ghs_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "***"),
    ("github-fine-grained", "github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "***"),
    ("aws-access-key-id", "AWS_ACCESS_KEY_ID AKIAIOSFODNN7EXAMPLE x", "AWS_ACCESS_KEY_ID *** x"),
    ("jwt", f"token {JWT}", f"token {MASK}"),
    ("url-password", "https://user:pa55word@mirror.example.com/simple", "https://user:***@mirror.example.com/simple"),
    ("url-password-no-user", "redis://:pa55word@cache:6379/0", "redis://:***@cache:6379/0"),
    ("slack-token", "xoxb-1234567890-abcdefghij", "***"),
    # Forms a review found unmasked: a password holding `/`, curl's -u, PEM keys, npm tokens, names.
    ("url-password-with-slash", "https://user:pa/ss@mirror.example.com/x", "https://user:***@mirror.example.com/x"),
    ("curl-u", "curl -u admin:s3cr3tP4ss https://x", "curl -u admin:*** https://x"),
    ("curl-user-equals", "curl --user=admin:'s3cr3t' x", "curl --user=admin:'***' x"),
    (
        "pem-private-key",
        f"{PEM_BEGIN}\nMIIEpAIBAAKCAQEA0Z3VS5JJcds3xfn\n{PEM_END}\nnext",
        f"{PEM_BEGIN}***{PEM_END}\nnext",
    ),
    ("pem-cut-off", f"key: {PEM_BEGIN}\nMIIEpAIBAAKCAQEA0Z3VS5JJcds3xfn", f"key: {PEM_BEGIN}***"),
    ("npm-token", f"token {NPM}", "token ***"),
    ("env-pass", "PASS=hunter2xyz MYSQL_PASS=x12", "PASS=*** MYSQL_PASS=***"),
    ("env-pwd", "DB_PWD=abcdef123", "DB_PWD=***"),
    ("env-credentials", "CREDENTIALS=foo123bar AWS_CREDENTIALS: 'x y'", "CREDENTIALS=*** AWS_CREDENTIALS: '***'"),
    ("curl-combined-u", "curl -fsu admin:s3cr3tP4ss https://x", "curl -fsu admin:*** https://x"),
    ("curl-glued-u", "curl -uadmin:s3cr3tP4ss https://x", "curl -uadmin:*** https://x"),
    ("curl-token-as-user", "curl -u tok3nValue: https://x", "curl -u ***: https://x"),
    ("header-api-key", "curl -H 'X-Api-Key: abc123def' https://x", "curl -H 'X-Api-Key: ***' https://x"),
    ("header-auth-token", "X-Auth-Token: abc123def", "X-Auth-Token: ***"),
    ("env-auth", "REGISTRY_AUTH=dXNlcjpwYXNz", "REGISTRY_AUTH=***"),
    # detect-secrets' own detectors (hgxkit.secrets._DETECT_SECRETS): one case per plugin regex.
    ("ds-aws-secret", 'aws key is "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"', 'aws key is "***"'),
    (
        "ds-azure-storage",
        "DefaultEndpointsProtocol=https;AccountKey=" + "A" * 86 + "==",
        "DefaultEndpointsProtocol=https;***",
    ),
    ("ds-discord", "bot MTk4NjIyNDgzNDcxOTI1MjQ4.Cl2FMQ.ZnCjm1XVW7vRze4b7Cq4se7kKWs", "bot ***"),
    ("ds-gitlab-pat", "token glpat-abcdefghij0123456789", "token ***"),
    ("ds-gitlab-runner", "GR1348941abcdefghij0123456789x", "***"),
    ("ds-gitlab-ci-build", "glcbt-ab_abcdefghij0123456789x", "***"),
    ("ds-gitlab-incoming-mail", "glimt-" + "a" * 25, "***"),
    ("ds-gitlab-trigger", "glptt-" + "a" * 40, "***"),
    ("ds-gitlab-agent", "glagent-" + "a" * 50, "***"),
    ("ds-gitlab-oauth", "gloas-" + "a" * 64, "***"),
    ("ds-mailchimp", "abcdef0123456789abcdef0123456789-us12", "***"),
    (
        "npmrc",
        "//registry.npmjs.org/:_authToken=01234567-89ab-cdef-0123-456789abcdef",
        "//registry.npmjs.org/:_authToken=***",
    ),
    ("openai-legacy", "sk-abc" + "A" * 20 + "T3BlbkFJ" + "B" * 20, "***"),
    ("ds-pypi", "pypi-AgEIcHlwaS5vcmc" + "A" * 70, "***"),
    ("ds-pypi-test", "pypi-AgENdGVzdC5weXBpLm9yZw" + "A" * 70, "***"),
    ("ds-sendgrid", "SG." + "a" * 22 + "." + "b" * 43, "***"),
    ("ds-slack-webhook", "https://hooks.slack.com/services/T0000/B0000/XXXXXXXX", "***"),
    ("ds-square", "sq0csp-" + "a" * 43, "***"),
    ("ds-stripe", "sk_live_" + "a" * 24, "***"),
    ("ds-telegram", "123456789:" + "A" * 35, "***"),
    ("ds-twilio-account", "AC" + "a" * 32, "***"),
    ("ds-twilio-key", "SK" + "a" * 32, "***"),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in MASKED], ids=[c[0] for c in MASKED])
def test_every_credential_form_is_masked(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_every_pattern_has_a_case() -> None:
    # Each regex (detect-secrets' plugins have several each) finds something in some case; where two find the
    # same span, `find_secrets` reports the earlier, so counting reported kinds would hide a pattern.
    texts = [text for _, text, _ in MASKED]
    assert [p.regex.pattern for p in patterns() if not any(p.regex.search(t) for t in texts)] == []
    assert {pattern.kind for pattern in patterns()} >= {"ds-gitlabtoken", "ds-pypitoken", "private-key"}


# Ordinary values that look a little like secrets and must survive the scrubber untouched.
KEPT = [
    ("server-flags", "--model-path /model --tp 4 --kv-cache-dtype fp8_e4m3 --served-model-name deepseek-v4-flash"),
    ("image-digest", "lmsysorg/sglang@sha256:" + "0123456789abcdef" * 4),
    ("commit-hash", "revision: 4f1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c"),
    ("uuid", "run 550e8400-e29b-41d4-a716-446655440000"),
    ("spec-label", "--label hgxkit.spec=3f2a9c1d7e6b5a40 --label hgxkit.group=1"),
    ("token-counts", '--max-total-tokens 4096 max_tokens: 100 {"input_tokens": 5000, "output_tokens": 12}'),
    ("tokenizer-flags", "--tokenizer-path /t --skip-tokenizer-init --speculative-num-draft-tokens 8"),
    ("settings", "SGLANG_RAGGED_VERIFY_MODE=static HF_HOME=/root/.cache HF_HUB_DISABLE_IMPLICIT_TOKEN=1"),
    ("setting-named-key", "SGLANG_CACHE_KEY=prefix VLLM_ROUTING_KEY=abc"),
    ("sk-inside-a-word", "--served-model-name deepseek-abcdefghijklmnopqrstuvwxyz task-abcdefghijklmnopqrstuvwxyz"),
    ("references", "-e HF_TOKEN=$HF_TOKEN --api-key {{env:SGLANG_API_KEY}} HF_TOKEN=${HF_TOKEN} api_key=None"),
    ("urls-without-password", "http://localhost:30000/health -p 127.0.0.1:5000:30000 user@host:/path"),
    ("already-masked", "HF_TOKEN=*** --api-key ***"),
    ("working-directory", "PWD=/home/user/models OLDPWD=/root BYPASS_CACHE=1"),
    ("docker-user", "docker run -u 1000:1000 --user=app:app img"),
    ("port-then-path", "http://host:8000/v1/models@latest curl -u $USER x"),
    ("public-key", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl root@node"),
    ("auth-switches", "ENABLE_AUTH=1 DISABLE_AUTH=1 SKIP_AUTH=1 NO_AUTH=1 SGLANG_ENABLE_AUTH=1"),
    ("ordinary-headers", "Content-Type: application/json Content-Length: 55 X-Request-Id: r-1 Sec-WebSocket-Key: x"),
    ("curl-other-options", "curl -XPUT -o out-u:x -d '{\"a\":1}' http://h:80/x"),
]


@pytest.mark.parametrize("text", [c[1] for c in KEPT], ids=[c[0] for c in KEPT])
def test_ordinary_values_are_not_masked(text: str) -> None:
    assert redact(text) == text


def test_known_values_are_masked_wherever_they_appear_but_not_when_tiny() -> None:
    assert redact("key k-7d2f91 in k-7d2f91/x", ["k-7d2f91"]) == "key *** in ***/x"
    assert redact("port 1 and 10", ["1"]) == "port 1 and 10"  # masking "1" would rewrite every number


def test_scrubbing_twice_changes_nothing() -> None:
    text = " ".join(c[1] for c in MASKED)
    once = redact(text)
    assert redact(once) == once
    assert HF not in once and NVAPI not in once and JWT not in once


def test_the_archive_scrubs_with_the_same_scrubber() -> None:
    text = '{"api_key": "K1234567", "tp": 4} --hf-token abcdef123 secret-known'
    assert scrub(text, ["secret-known"]) == redact(text, ["secret-known"])
    assert scrub(text, ["secret-known"]) == '{"api_key": "***", "tp": 4} --hf-token *** ***'


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("HF_TOKEN", True),
        ("hf_token", True),
        ("NGC_API_KEY", True),
        ("OPENAI_API_KEY", True),
        ("AWS_SECRET_ACCESS_KEY", True),
        ("MY_KEY", True),
        ("DB_PASSWORD", True),
        ("FTP_PASSWD", True),
        ("APP_SECRET", True),
        ("SGLANG_API_KEY", True),
        ("SGLANG_CACHE_KEY", False),
        ("VLLM_ROUTING_KEY", False),
        ("HF_HOME", False),
        ("HF_HUB_DISABLE_IMPLICIT_TOKEN", False),
        ("MAX_TOKENS", False),
        ("KEY", False),
    ],
)
def test_secret_names(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


def test_secret_flags_and_the_variables_that_carry_them() -> None:
    assert [is_secret_flag(f) for f in ("--api-key", "--hf-token", "--token", "--max-total-tokens")] == [
        True,
        True,
        True,
        False,
    ]
    # both engines' parsers take the underscore spelling (`--api_key`)
    assert [is_secret_flag(f) for f in ("--api_key", "--hf_token", "--admin_api_key", "--max_num_batched_tokens")] == [
        True,
        True,
        True,
        False,
    ]
    assert [flag_env_name(f) for f in ("--api-key", "--hf-token", "--token")] == [
        "SGLANG_API_KEY",
        "HF_TOKEN",
        "SGLANG_TOKEN",
    ]


def test_a_recognisable_credential_names_its_own_variable() -> None:
    spans = find_secrets(f"-l token={HF} -e X={NVAPI} https://u:pw@h")
    assert [(s.kind, s.env_name) for s in spans] == [
        ("hugging-face-token", "HF_TOKEN"),
        ("nvidia-key", "NGC_API_KEY"),
        ("url-password", "URL_PASSWORD"),
    ]


@pytest.mark.parametrize(
    "unit",
    [
        "a.",
        "a-",
        "sk-",
        "--a",
        "a://b:",
        "eyJa.",
        "token=",
        "Bearer ",
        "x_token",
        "//",
        "curl -u a:",
        "glpat-",
        "aws key ",
        "curl -fsu a:",
        "X-Api-Key:",
        "a-a-token",
        "-u",
    ],
)
def test_scrubbing_is_linear_on_adversarial_text(unit: str) -> None:
    # An unbounded URL scheme makes "a.a.a.…" quadratic: 200 KB of it would take minutes.
    text = unit * (200_000 // len(unit))
    start = time.process_time()  # CPU, not wall: a loaded machine must not fail a linear scrub
    redact(text)
    assert time.process_time() - start < 2.0


def test_json_documents_stay_valid_json_with_escaped_quotes_around_secrets() -> None:
    """A dumped fingerprint holds commands like `--env "HF_TOKEN=…"` as escaped quotes: masking the text of the
    dump cut through the escape (a real archive came out unreadable); masking value by value cannot."""
    import json

    from hgxkit.secrets import redact_json_text

    token = "hf_" + "A" * 34
    doc = {
        "serving": {
            "rendered": [f'docker run --env "HF_TOKEN={token}" -e HF_TOKEN=\\"{token}\\" img'],
            "env": {"HF_TOKEN": "plain-value-1234", "NCCL_DEBUG": "INFO"},
        }
    }
    text = json.dumps(doc, indent=2)
    assert json.loads(text) == doc
    for scrubbed in (redact_json_text(text), redact_json_text(json.dumps(doc) + "\n" + json.dumps(doc) + "\n")):
        assert token not in scrubbed and "plain-value-1234" not in scrubbed
        parsed = [json.loads(line) for line in scrubbed.splitlines()] if "\n{" in scrubbed else [json.loads(scrubbed)]
        assert all(p["serving"]["env"] == {"HF_TOKEN": "***", "NCCL_DEBUG": "INFO"} for p in parsed)
    assert redact_json_text("not json: HF_TOKEN=abcdef123") == "not json: HF_TOKEN=***"


# -- each of these was a surviving mutant of hgxkit/secrets.py (`make mutation MODULES=secrets`) ---------------


def test_the_detect_secrets_patterns_keep_each_plugins_regex_flags_name_and_variable() -> None:
    """Built fresh (`patterns()` is cached once per process): every plugin regex, its flags (AWS's secret-key
    regex is case-insensitive), its `ds-` name and the SECRET variable; a token group is wrapped in `whole`."""
    import importlib
    import re

    from hgxkit import secrets

    fresh = secrets.patterns.__wrapped__()
    assert fresh[: len(secrets.SECRET_PATTERNS)] == secrets.SECRET_PATTERNS
    built = fresh[len(secrets.SECRET_PATTERNS) :]
    assert [p.kind for p in built] == [
        "ds-awskey",
        "ds-awskey",
        "ds-azurestoragekey",
        "ds-discordbottoken",
        *["ds-gitlabtoken"] * 7,
        "ds-mailchimp",
        "ds-pypitoken",
        "ds-pypitoken",
        "ds-sendgrid",
        "ds-slack",
        "ds-slack",
        "ds-squareoauth",
        "ds-stripe",
        "ds-telegrambottoken",
        "ds-twiliokey",
        "ds-twiliokey",
    ]
    plugins = [getattr(importlib.import_module(f"detect_secrets.plugins.{m}"), n) for m, n in secrets._DETECT_SECRETS]
    originals = [regex for plugin in plugins for regex in plugin().denylist]
    assert [(p.regex.pattern, p.regex.flags) for p in built] == [
        (f"(?P<whole>{r.pattern})" if r.groups else r.pattern, r.flags) for r in originals
    ]
    assert {p.env_name(None) for p in built} == {"SECRET"}  # type: ignore[arg-type]
    aws_secret = next(p for p in built if "whole" in p.regex.groupindex and p.kind == "ds-awskey")
    assert aws_secret.regex.flags & re.IGNORECASE
    key = "A" * 40
    match = aws_secret.regex.search(f"AWS_KEY = '{key}'")
    assert match and secrets._value_span(match) == (11, 51)


def test_a_fixed_variable_name_is_returned_for_any_match() -> None:
    from hgxkit.secrets import _fixed

    assert _fixed("HF_TOKEN")(None) == "HF_TOKEN"  # type: ignore[arg-type]


def test_a_plugin_token_group_counts_only_inside_the_match_and_from_eight_characters() -> None:
    import re

    from hgxkit.secrets import _value_span

    def span(regex: str, text: str) -> tuple[int, int] | None:
        match = re.compile(regex).search(text)
        assert match
        return _value_span(match)

    assert span(r"(?P<whole>(abcdefgh)-x+)", "abcdefgh-xx") == (0, 11)  # the group starts the match: the whole
    assert span(r"(?P<whole>k=(abcdefgh))", "k=abcdefgh") == (2, 10)  # 8 characters after a prefix: the token
    assert span(r"(?P<whole>k=(abcdefg))", "k=abcdefg") == (0, 9)  # 7: too short to be one


def test_secret_names_name_their_variable_upper_cased() -> None:
    assert [(s.kind, s.env_name) for s in find_secrets("db_password=hunter22")] == [("secret-name", "DB_PASSWORD")]


def test_a_flag_env_name_keeps_every_letter_after_the_dashes() -> None:
    assert flag_env_name("--X-api-key") == "SGLANG_X_API_KEY"


def test_known_values_at_the_start_three_times_and_side_by_side() -> None:
    assert [(s.start, s.end, s.kind, s.env_name) for s in find_secrets("k-7d2f91 x", ["k-7d2f91"])] == [
        (0, 8, "known", "SECRET")
    ]
    assert redact("kv-1 a kv-1 b kv-1", ["kv-1"]) == "*** a *** b ***"
    assert redact("aaaabbbb", ["aaaa", "bbbb"]) == "******"  # adjacent spans are both masked


def test_at_the_same_start_the_longer_secret_wins() -> None:
    assert redact(f"HF_TOKEN={HF}", [HF[:7]]) == "HF_TOKEN=***"


def test_a_match_that_is_not_a_secret_does_not_end_the_scan() -> None:
    assert redact("SGLANG_CACHE_KEY=abc1 MY_PASSWORD=pw12") == "SGLANG_CACHE_KEY=abc1 MY_PASSWORD=***"
    assert redact("--api-key none then --api-key k2secret") == "--api-key none then --api-key ***"


def test_spans_are_replaced_by_what_the_caller_makes_of_each() -> None:
    from hgxkit.secrets import replace_secrets

    text = "serve --api-key k1 -e HF_TOKEN=x2"
    out = replace_secrets(text, find_secrets(text), lambda s: "{{env:" + s.env_name + "}}")
    assert out == "serve --api-key {{env:SGLANG_API_KEY}} -e HF_TOKEN={{env:HF_TOKEN}}"


def test_json_is_redacted_value_by_value_with_the_known_values_everywhere() -> None:
    from hgxkit.secrets import redact_json, redact_json_text

    assert redact_json({"a": ["x kv-12"], "b": {"c": "kv-12"}}, ["kv-12"]) == {"a": ["x ***"], "b": {"c": "***"}}
    # JSON Lines: each line re-dumped, blank lines and the final newline (or its absence) kept
    assert redact_json_text('{"a":1}\n\n{"b":"kv-12"}\n', ["kv-12"]) == '{"a": 1}\n\n{"b": "***"}\n'
    assert redact_json_text('{"a":1}', ["kv-12"]) == '{"a": 1}'
    # one JSON document over several lines: re-dumped with indent 2
    assert redact_json_text('{\n "a": ["kv-12"]\n}', ["kv-12"]) == '{\n  "a": [\n    "***"\n  ]\n}\n'
    # not JSON: redacted as text
    assert redact_json_text("not json kv-12\n", ["kv-12"]) == "not json ***\n"


def test_has_secret_is_whether_redact_would_mask_something() -> None:
    from hgxkit.secrets import has_secret

    assert (has_secret(f"x {HF}"), has_secret("x --tp 8")) == (True, False)


# -- classes, not examples: every spelling a credential takes in curl's options, in a header, in a name ------
PW = "pw-5e0c2a99x"
CURL_OPTIONS = ["-u {}", "-u{}", "-fsu {}", "-fsSLu{}", "-su {}", "--user={}", "--user {}", "-U {}", "--proxy-user={}"]
QUOTES = ["{}", "'{}'", '"{}"']


def surfaces(text: str) -> list[str]:
    """Where a credential in `text` can surface: a log or error line, an archived text file, a JSON document
    (a fingerprint's rendered command), a JSON key's value."""
    from hgxkit.secrets import redact_json

    return [redact(text), scrub(text, []), str(redact_json({"cmd": text})), str(redact_json({"c": [text]}))]


@pytest.mark.parametrize("option", CURL_OPTIONS)
@pytest.mark.parametrize("quote", QUOTES)
def test_curls_credential_options_in_every_spelling(option: str, quote: str) -> None:
    for credential, secret in ((f"admin:{PW}", PW), (f"{PW}:", PW)):
        text = f"curl -sS {option.format(quote.format(credential))} https://api.example/v1"
        for shown in surfaces(text):
            assert secret not in shown and "https://api.example/v1" in shown, shown
    quoted_option = f'curl "{option.format("admin:" + PW)}" https://x'
    assert PW not in redact(quoted_option)


CREDENTIAL_HEADERS = ["X-Api-Key", "x-api-key", "X-API-KEY", "Api-Key", "apikey", "X-Goog-Api-Key", "Authorization"]
CREDENTIAL_HEADERS += ["proxy-authorization", "X-Auth-Token", "PRIVATE-TOKEN", "X-Vault-Token", "X-Amz-Security-Token"]
CREDENTIAL_HEADERS += ["Ocp-Apim-Subscription-Key", "X-Auth", "X-Access-Key", "Cookie", "X-Session-Token"]
HEADER_FORMS = ["curl -H '{name}: {value}' https://x", 'curl -H "{name}:{value}" https://x', "> {name}: {value}\n"]
HEADER_FORMS += ['{{"headers": {{"{name}": "{value}"}}}}', "--header={name}:{value}"]


@pytest.mark.parametrize("name", CREDENTIAL_HEADERS)
@pytest.mark.parametrize("form", HEADER_FORMS)
def test_a_header_that_carries_a_credential_by_its_name_in_any_case(name: str, form: str) -> None:
    from hgxkit.secrets import redact_json

    for value in (PW, f"Bearer {PW}", f"Basic {PW}"):
        for shown in surfaces(form.format(name=name, value=value)):
            assert PW not in shown, shown
    assert redact_json({"headers": {name: PW}}) == {"headers": {name: MASK}}  # a parsed request's headers


SECRET_SUFFIXES = ["_AUTH", "_AUTH_TOKEN", "_AUTHORIZATION", "_CREDENTIALS", "_CREDENTIAL", "_CREDS", "_CRED"]
SECRET_SUFFIXES += ["_PASSWD", "_PASSWORD", "_PASS", "_PWD", "_PASSPHRASE", "_PASSCODE", "_APIKEY", "_API_KEY"]
SECRET_SUFFIXES += ["_SECRET", "_SECRETS", "_SECRET_KEY", "_TOKEN", "_ACCESS_KEY", "_PRIVATE_KEY", "_COOKIE"]
NAME_FORMS = ["{name}={value}", "-e {name}={value}", "export {name}='{value}'", "{name}: {value}"]
NAME_FORMS += ['{{"{name}": "{value}"}}', "--env {name}={value}", "{lower}={value}"]


@pytest.mark.parametrize("suffix", SECRET_SUFFIXES)
@pytest.mark.parametrize("form", NAME_FORMS)
def test_every_secret_name_suffix_in_every_written_form(suffix: str, form: str) -> None:
    from hgxkit.secrets import redact_json

    name = "REGISTRY" + suffix
    assert is_secret_name(name) and is_secret_name(name.lower())
    text = form.format(name=name, lower=name.lower(), value=PW)
    for shown in surfaces(text):
        assert PW not in shown, shown
    assert [s.env_name for s in find_secrets(text)] == [name]  # the importer's {{env:NAME}}
    assert redact_json({name: PW}) == {name: MASK}


@pytest.mark.parametrize("name", ["ENABLE_AUTH", "DISABLE_AUTH", "SGLANG_SKIP_AUTH", "USE_AUTH", "REQUIRE_AUTH"])
def test_a_switch_named_after_auth_is_a_setting(name: str) -> None:
    assert not is_secret_name(name)
    assert redact(f"{name}=1 {name}=on") == f"{name}=1 {name}=on"
    credential = name.replace("ENABLE", "BASIC").replace("DISABLE", "HTTP").replace("SKIP", "PROXY")
    credential = credential.replace("USE_", "DB_").replace("REQUIRE", "REGISTRY")
    assert is_secret_name(credential) and redact(f"{credential}={PW}") == f"{credential}=***"  # not a switch


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://admin:pw-1@10.0.0.5:30000", "http://***@10.0.0.5:30000"),
        ("https://TOKEN123@serve.example/", "https://***@serve.example/"),
        ("http://:pw-1@h:1", "http://***@h:1"),
        ("http://admin:pa/ss?x#y@h:1", "http://***@h:1"),  # a password may hold what ends an authority
        ("admin:pw-1@h:1", "***@h:1"),  # no scheme: still userinfo
        ("http://a:b@[::1:5000", "http://***@[::1:5000"),  # not parseable: masked all the same
        ("http://u:p@ss@h:1", "http://***@h:1"),  # an `@` in the password: userinfo runs to the last one
        ("http://u:pw-1@h:1/?next=https://x", "http://***@h:1/?next=https://x"),  # the scheme is the first `://`
        ("@h:1", "***@h:1"),  # empty userinfo is userinfo too
        ("a@b://h:1", "a@b://h:1"),  # before the scheme's `://` nothing is userinfo
        ("http://10.0.0.5:30000", "http://10.0.0.5:30000"),
        ("http://h:1/", "http://h:1/"),
    ],
)
def test_a_urls_userinfo_is_masked_for_display_whole(url: str, shown: str) -> None:
    from hgxkit.secrets import redact_url

    assert redact_url(url) == shown
