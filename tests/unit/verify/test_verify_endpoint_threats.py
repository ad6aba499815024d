"""`hgxkit verify --endpoint` against a hostile or careless endpoint, attacked through every place it surfaces.

Three classes, each through the library call, the command line (its progress and error lines, the client's
relayed output), the archived run (every file, every string in its JSON) and `hgxkit results show`:

- a credential in clear: an API key (or the URL's user:password) over plain http to another host is refused
  before a byte is sent, unless the operator names the risk; a key this shell holds for something else is never
  sent; an https endpoint is never downgraded by the client;
- a stranger's text: escape sequences, controls and invisible characters in what the endpoint answers (its
  version, its model name, what the client prints of its replies) never reach the terminal or the archive;
- the URL's userinfo (user, password, a token as the user) is never printed or archived.

The endpoint is the SGLang stand-in on 127.0.0.1; the client is a small stand-in that does what SGLang's does
with the server's text (prints its arguments and the server's answers, writes them into its output file), and
SGLang's real client where the client store is installed.
"""

from __future__ import annotations

import http.server
import json
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from hgxkit.cli import main
from hgxkit.errors import InputError
from hgxkit.recipe.judge import judge
from hgxkit.recipe.read import load_recipe
from hgxkit.verify import endpoint as endpoint_module
from hgxkit.verify.endpoint import (
    client_command,
    client_environment,
    endpoint_cells,
    http_fetch,
    parse_endpoint,
    refuse_key_in_clear,
    verify_endpoint,
)

ROOT = Path(__file__).resolve().parents[3]
RECIPE = ROOT / "recipes" / "deepseek-v4-flash-dspark-marlin.yaml"
RECORDED = ROOT / "tests" / "fixtures" / "sglang_bench" / "dspark_isl5000_c5_details.jsonl"
KEY = "k-operator-key-7d2f91c4"
PASSWORD = "pw-s3cr3t-81b7"
USER_TOKEN = "usertoken-5e0c2a99"
# Every class of terminal attack in one string: OSC (title; OSC 52 writes the clipboard), CSI (clear, cursor up),
# a bare CR, 8-bit CSI, DCS, a bidi override, a zero-width space, a lone surrogate, and a line break that would
# start a forged line of hgxkit's own.
HOSTILE = (
    "0.5.23\x1b]0;owned\x07\x1b]52;c;cHduZWQ=\x1b\\\x1b[2J\x1b[1A\r\x9b31m\x1bPq#0\x1b\\\u202eevil\u200b\ud800"
    "\nFAKE gate passed"
)
UNSAFE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")

# What SGLang's client does with a server's text, in a few lines: prints its arguments (--base-url with the URL's
# userinfo) and the server's answers, redraws a progress line, writes /server_info into its output file.
FAKE_CLIENT = """
import json, os, sys, urllib.request
from pathlib import Path
from urllib.parse import urlsplit
argv = sys.argv[1:]
parts = urlsplit(argv[argv.index("--base-url") + 1])
info = json.loads(urllib.request.urlopen(f"{parts.scheme}://{parts.hostname}:{parts.port}/server_info").read())
print("benchmark_args=", argv)
sys.stdout.buffer.write(f"server version: {info['version']}\\n".encode("utf-8", "surrogatepass"))
sys.stdout.flush()
served = f"serving {info['served_model_name']} key {os.environ.get('OPENAI_API_KEY')}\\n"
sys.stderr.buffer.write(served.encode("utf-8", "surrogatepass"))
sys.stderr.flush()
print("progress 1/4\\rprogress 4/4", file=sys.stderr)
Path(os.environ["FAKE_SEEN"]).write_text(json.dumps({k: os.environ.get(k) for k in ("OPENAI_API_KEY", "API_KEY")}))
record = json.loads(Path(os.environ["FAKE_RECORDED"]).read_text().splitlines()[0])
record.update(server_info=info)
Path(argv[argv.index("--output-file") + 1]).write_text(json.dumps(record) + "\\n")
"""


@pytest.fixture()
def key_file(tmp_path: Path) -> str:
    path = tmp_path / "serve.key"
    path.write_text(KEY + "\n")
    return str(path)


Verify = Callable[..., tuple[int, str, str]]


@pytest.fixture()
def verify(tmp_path: Path, tokenizer: str, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture) -> Verify:
    """`hgxkit verify --endpoint URL …` with the stand-in client: (exit status, stdout, stderr)."""
    script = tmp_path / "fake_client.py"
    script.write_text(FAKE_CLIENT)
    monkeypatch.setenv("FAKE_SEEN", str(tmp_path / "seen.json"))
    monkeypatch.setenv("FAKE_RECORDED", str(RECORDED))

    runs = iter(range(100))

    def run(url: str, *extra: str) -> tuple[int, str, str]:
        capfd.readouterr()
        results = str(tmp_path / "results" / str(next(runs)))  # two runs in one second: two archives
        argv = ["verify", "--endpoint", url, "--recipe", str(RECIPE), "--tokenizer", tokenizer]
        argv += ["--results-dir", results, "--client", f"{sys.executable} {script}", *extra]
        status = main(argv)
        out, err = capfd.readouterr()
        return status, out, err

    return run


@pytest.fixture()
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing may be asked of an endpoint: a refusal comes before any request."""
    monkeypatch.setattr(endpoint_module, "http_fetch", lambda url, key=None: pytest.fail(f"asked {url}"))


def archived(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """Every archived file's text, and every string inside the archived JSON documents."""
    for path in sorted((tmp_path / "results").rglob("*")):
        if not path.is_file():
            continue
        text = path.read_text()
        yield path, text
        documents = [text] if path.suffix == ".json" else text.splitlines() if path.suffix == ".jsonl" else []
        for document in documents:
            yield path, json.dumps(json.loads(document), ensure_ascii=False)


def assert_clean(*texts: str) -> None:
    for text in texts:
        assert not UNSAFE.search(text.replace("\n", "")), repr(UNSAFE.search(text.replace("\n", "")))
        assert not any(line.startswith("FAKE") for line in text.splitlines()), text


def assert_never_shown(tmp_path: Path, secrets: tuple[str, ...], *texts: str) -> None:
    for secret in secrets:
        assert all(secret not in text for text in texts), secret
        assert [path for path, text in archived(tmp_path) if secret in text] == [], secret


# -- a credential in clear ---------------------------------------------------------------------------------

ELSEWHERE = ["http://10.0.0.5:30000", "http://serve.example:8000", "http://0.0.0.0:5000", "http://[fd00::5]:5000"]
ELSEWHERE += ["http://127.0.0.1.nip.io:5000", "http://LOCALHOST.example:80"]


@pytest.mark.parametrize("url", ELSEWHERE)
@pytest.mark.parametrize("credential", ["key-file", "url-password", "url-token-as-user"])
def test_a_credential_over_plain_http_to_another_host_is_refused_before_anything_is_sent(
    url: str, credential: str, verify: Verify, key_file: str, tmp_path: Path, no_network: None
) -> None:
    extra = ["--api-key-file", key_file] if credential == "key-file" else []
    userinfo = {"url-password": f"admin:{PASSWORD}@", "url-token-as-user": f"{USER_TOKEN}@"}.get(credential, "")
    status, out, err = verify(url.replace("://", "://" + userinfo), *extra)
    assert status == 2
    (line,) = err.splitlines()  # one line, no traceback
    assert re.match(r"hgxkit: error: --endpoint http://(\*\*\*@)?\S+: .* would cross the network in clear", line)
    assert line.endswith("use an https:// endpoint, or pass --allow-key-over-http to send it anyway")
    assert not (tmp_path / "seen.json").exists() and not (tmp_path / "results").exists()
    assert_never_shown(tmp_path, (KEY, PASSWORD, USER_TOKEN), out, err)


@pytest.mark.parametrize("url", ELSEWHERE[:2])
def test_the_library_refuses_the_same_way(url: str, tokenizer: str, tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"would cross the network in clear .* --allow-key-over-http"):
        verify_endpoint(
            judge(load_recipe(str(RECIPE))),
            parse_endpoint(url),
            mode="smoke",
            results_dir=tmp_path,
            client=["c"],
            workdir=tmp_path / "w",
            run_client=lambda argv: pytest.fail("ran"),
            fetch=lambda u: pytest.fail(f"asked {u}"),
            tokenizer=tokenizer,
            api_key=KEY,
        )


@pytest.mark.parametrize(
    "url",
    [
        "https://10.0.0.5:8443",
        "http://127.0.0.1:5000",
        "http://127.8.9.10:1",
        "http://localhost:5000",
        "http://[::1]:5000",
        "HTTPS://serve.example",
    ],
)
def test_https_or_this_machine_takes_the_key(url: str) -> None:
    refuse_key_in_clear(parse_endpoint(url), KEY)
    refuse_key_in_clear(parse_endpoint(url.replace("://", f"://admin:{PASSWORD}@")), None)
    elsewhere = re.sub(r"^(?i:https?)://(\[[^]]*\]|[^:/]*)", "http://10.0.0.5", url)  # the same, in clear elsewhere
    with pytest.raises(InputError, match="would cross the network in clear"):
        refuse_key_in_clear(parse_endpoint(elsewhere), KEY)


def test_plain_http_elsewhere_takes_the_key_only_when_the_operator_names_the_risk() -> None:
    refuse_key_in_clear(parse_endpoint("http://10.0.0.5:30000"), None)  # no credential: nothing to refuse
    refuse_key_in_clear(parse_endpoint("http://10.0.0.5:30000"), KEY, allow=True)
    with pytest.raises(InputError, match="pass --allow-key-over-http to send it anyway"):
        refuse_key_in_clear(parse_endpoint("http://10.0.0.5:30000"), KEY, allow=False)


def test_the_key_goes_only_where_the_operator_named_it(
    verify: Verify, key_file: str, start_stub, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A key this shell holds for another service (OPENAI_API_KEY, API_KEY) never reaches an endpoint; the key
    of --api-key-file does, and is printed and archived nowhere."""
    url, _ = start_stub("--tp-size", "1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-operators-own-openai-key-0000")
    monkeypatch.setenv("API_KEY", "operators-other-key-1111")
    assert verify(url)[0] == 0
    assert json.loads((tmp_path / "seen.json").read_text()) == {"OPENAI_API_KEY": None, "API_KEY": None}
    status, out, err = verify(url, "--api-key-file", key_file)
    assert status == 0, err
    assert json.loads((tmp_path / "seen.json").read_text()) == {"OPENAI_API_KEY": KEY, "API_KEY": None}
    assert_never_shown(tmp_path, (KEY,), out, err)
    assert client_environment({"OPENAI_API_KEY": "x", "API_KEY": "y", "PATH": "/bin"}, None) == {"PATH": "/bin"}


def test_an_https_endpoint_is_never_downgraded_by_sglangs_client() -> None:
    """SGLang's client builds http://HOST:PORT from --host: the https URL must reach it whole."""
    endpoint = parse_endpoint("https://serve.example:8443")
    (cell,) = endpoint_cells(load_recipe(str(RECIPE)), endpoint, "smoke")
    argv = client_command(cell, endpoint, "/o", ["python3", "-m", "sglang.benchmark.serving"])
    assert argv[argv.index("--base-url") + 1] == "https://serve.example:8443"


@pytest.mark.parametrize("key_text", ["", "  \n", "two\nlines\n"])
def test_an_api_key_file_without_one_key_is_one_line(verify: Verify, tmp_path: Path, key_text: str) -> None:
    path = tmp_path / "bad.key"
    path.write_text(key_text)
    status, _, err = verify("https://serve.example", "--api-key-file", str(path))
    assert status == 2
    assert err.splitlines() == [
        f"hgxkit: error: --api-key-file {path}: put the server's API key in it, alone on one line"
    ]


class _Recorder(http.server.BaseHTTPRequestHandler):
    seen: ClassVar[list[tuple[str, str | None]]] = []
    target: ClassVar[str] = ""

    def do_GET(self) -> None:
        _Recorder.seen.append((self.path, self.headers.get("Authorization")))
        if self.path == "/health" and _Recorder.target:
            self.send_response(302)
            self.send_header("Location", _Recorder.target)
            self.end_headers()
            return
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_hgxkits_own_requests_carry_the_key_and_a_redirect_does_not(monkeypatch: pytest.MonkeyPatch) -> None:
    """The key goes to the endpoint asked, never to wherever it redirects (another port here)."""
    servers = [http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder) for _ in range(2)]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        first, second = (f"http://127.0.0.1:{s.server_address[1]}" for s in servers)
        monkeypatch.setattr(_Recorder, "seen", [])
        monkeypatch.setattr(_Recorder, "target", second + "/elsewhere")
        assert http_fetch(first + "/health", KEY)[0] == 200
        assert _Recorder.seen == [("/health", f"Bearer {KEY}"), ("/elsewhere", None)]
        monkeypatch.setattr(_Recorder, "seen", [])
        monkeypatch.setattr(_Recorder, "target", "")
        user_url = first.replace("://", f"://admin:{PASSWORD}@")
        assert http_fetch(user_url + "/server_info")[0] == 200  # the URL's userinfo as Basic, not in the URL
        assert _Recorder.seen == [("/server_info", "Basic YWRtaW46cHctczNjcjN0LTgxYjc=")]
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()


# -- a stranger's text ---------------------------------------------------------------------------------------


def test_a_hostile_endpoints_text_reaches_neither_terminal_nor_archive(
    verify: Verify, start_stub, tmp_path: Path, capfd: pytest.CaptureFixture
) -> None:
    url, app = start_stub("--tp-size", "1", "--served-model-name", "dsv4" + HOSTILE)
    app.version = HOSTILE
    status, out, err = verify(url)
    assert status == 0, err
    # a line the client printed is marked as its own: the server's line break forges no line of hgxkit's
    assert "  client| FAKE gate passed" in out.splitlines()
    assert "  client| progress 4/4" in err.splitlines() and "progress 1/4" not in err  # the bar's last state
    assert_clean(out, err)
    (run,) = (tmp_path / "results").rglob("endpoint-127.0.0.1/*")
    for path, text in archived(tmp_path):
        assert_clean(text), path
    summary = json.loads((run / "summary.json").read_text())
    assert summary["tool_version"] == "0.5.23 evil FAKE gate passed"  # the text, without its controls
    assert main(["results", "show", "--root", str(run.parent.parent), run.name]) == 0
    shown = capfd.readouterr()
    assert "0.5.23" in shown.out
    assert_clean(shown.out, shown.err)


# A small word-level tokenizer, made with the client store's `tokenizers`.
MAKE_TOKENIZER = """
import sys
from tokenizers import Tokenizer, models, pre_tokenizers
tokenizer = Tokenizer(models.WordLevel({"[UNK]": 0, **{f"t{i}": i + 1 for i in range(4000)}}, unk_token="[UNK]"))
tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
tokenizer.save(sys.argv[1] + "/tokenizer.json")
"""


@pytest.mark.parametrize("hostile_name", [False, True], ids=["version", "version-and-model-name"])
def test_sglangs_real_client_against_a_hostile_endpoint(
    hostile_name: bool, tmp_path: Path, client_venv: Path, start_stub, monkeypatch, capfd: pytest.CaptureFixture
) -> None:
    folder = tmp_path / "tokenizer"
    folder.mkdir()
    subprocess.run([str(client_venv / "bin" / "python"), "-c", MAKE_TOKENIZER, str(folder)], check=True)
    url, app = start_stub("--tp-size", "1", *(["--served-model-name", "dsv4" + HOSTILE] if hostile_name else []))
    app.version = HOSTILE
    monkeypatch.setenv("HGXKIT_SGLANG_CLIENT_VENV", str(client_venv))
    argv = ["verify", "--endpoint", url, "--recipe", str(RECIPE), "--tokenizer", str(folder)]
    status = main([*argv, "--results-dir", str(tmp_path / "results")])
    out, err = capfd.readouterr()
    # the client loads the local tokenizer copy as its model, whatever name the endpoint serves under
    assert status == 0, err
    assert "client| " in out + err
    assert_clean(out, err)
    for path, text in archived(tmp_path):
        assert_clean(text), path
    if not hostile_name:
        (summary,) = (tmp_path / "results").rglob("summary.json")
        assert json.loads(summary.read_text())["tool_version"] == "0.5.23 evil FAKE gate passed"


# -- the URL's userinfo ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        f"http://admin:{PASSWORD}@10.0.0.5:99999",
        f"http://admin:{PASSWORD}@10.0.0.5:5000/v1",
        f"ftp://admin:{PASSWORD}@10.0.0.5",
        f"admin:{PASSWORD}@10.0.0.5:5000",
        f"http://{USER_TOKEN}@10.0.0.5:5000/v1?x=1",
        f"http://admin:{PASSWORD}@[::1:5000",
        f"http://admin:pa/{PASSWORD}@10.0.0.5:5000",
    ],
)
def test_a_bad_endpoint_url_is_named_without_its_userinfo(url: str, verify: Verify, tmp_path: Path) -> None:
    status, out, err = verify(url)
    assert status == 2
    (line,) = err.splitlines()
    assert line.startswith("hgxkit: error: --endpoint ") and "***" in line
    assert_never_shown(tmp_path, (PASSWORD, USER_TOKEN), out, err)


def test_an_endpoint_that_does_not_answer_is_named_without_its_userinfo(verify: Verify, tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port on this machine that nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    status, out, err = verify(f"http://admin:{PASSWORD}@127.0.0.1:{port}")
    assert status == 2
    assert err.splitlines() == [
        f"hgxkit: error: --endpoint http://***@127.0.0.1:{port}: /health answered nothing; start the server (or "
        "check the address) first"
    ]
    assert_never_shown(tmp_path, (PASSWORD,), out, err)


@pytest.mark.parametrize("userinfo", [f"admin:{PASSWORD}", USER_TOKEN, f"{USER_TOKEN}:{PASSWORD}"])
def test_a_run_with_userinfo_in_the_url_shows_it_nowhere(
    userinfo: str, verify: Verify, start_stub, tmp_path: Path
) -> None:
    url, _ = start_stub("--tp-size", "1")
    status, out, err = verify(url.replace("://", f"://{userinfo}@"))
    assert status == 0, err
    assert "--base-url" in out  # the client printed its arguments: relayed with the userinfo masked
    assert_never_shown(tmp_path, (PASSWORD, USER_TOKEN), out, err)
    (run,) = (tmp_path / "results").rglob("endpoint-127.0.0.1/*")
    assert json.loads((run / "fingerprint.json").read_text())["serving"]["endpoint"] == url.replace("://", "://***@")
