"""`hgxkit results report`: one self-contained HTML page per run or comparison, the index, and a real render in
headless Chromium (Debian's `chromium`) that must show no console or script error and no network load.

The render test fails under CI=true when chromium is missing (.ci/run installs it) and skips elsewhere. Set
HGXKIT_REPORT_SCREENSHOT=path.png to keep the screenshot it takes.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from PIL import Image
from test_results import ROOT, SECRET, make_run

from hgxkit.cli import main
from hgxkit.results.archive import load_run, scan_runs, write_report_html
from hgxkit.results.html_report import CSP, index_html, run_html

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
# Injected before anything else on the page: every script error, failed resource load, console.error and CSP
# violation ends up in an attribute of <html>, which --dump-dom prints.
ERROR_HOOK = """<script>(function(){var errs=[];function put(){document.documentElement.setAttribute(
'data-js-errors',JSON.stringify(errs));}window.addEventListener('error',function(e){errs.push(String(e.message||
(e.target&&e.target.outerHTML)||'error'));put();},true);var ce=console.error;console.error=function(){errs.push(
Array.prototype.join.call(arguments,' '));put();ce.apply(console,arguments);};document.addEventListener(
'securitypolicyviolation',function(e){errs.push('CSP: '+e.violatedDirective+' '+e.blockedURI);put();});
window.addEventListener('load',function(){document.documentElement.setAttribute('data-loaded','1');put();});
put();})();</script>"""


def chromium_binary() -> str:
    """Debian's chromium; a failure under CI=true when it is missing, else a skip."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but chromium is not installed (.ci/run installs Debian's chromium package)")
        pytest.skip("needs Debian's chromium (apt-get install -y chromium)")
    return path


@pytest.fixture()
def chromium() -> str:
    return chromium_binary()


def test_missing_chromium_fails_under_ci_and_skips_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true but chromium is not installed"):
        chromium_binary()
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception):
        chromium_binary()


def _chromium(binary: str, *args: str) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory() as profile:
        command = [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)


def render_errors(binary: str, page: Path) -> list[str]:
    """Errors a real browser reports for the page: script errors, failed loads, console errors, CSP violations."""
    hooked = page.with_name("hooked-" + page.name)
    text = page.read_text()
    # The report's CSP runs no script; the hook alone is let in, by its hash, so nothing else the page holds
    # can run (an inline script planted in the page is still refused and reported as a violation).
    body = ERROR_HOOK.removeprefix("<script>").removesuffix("</script>")
    digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
    assert CSP in text
    text = text.replace(CSP, f"{CSP}; script-src 'sha256-{digest}'", 1)
    hooked.write_text(text.replace("<head>", "<head>" + ERROR_HOOK, 1))
    done = _chromium(binary, "--virtual-time-budget=5000", "--dump-dom", hooked.as_uri())
    assert done.returncode == 0, done.stderr[-2000:]
    root = re.search(r"<html[^>]*>", done.stdout)
    assert root and 'data-loaded="1"' in root.group(0), "the page never finished loading"
    attribute = re.search(r"data-js-errors=\"([^\"]*)\"", root.group(0))
    assert attribute is not None
    errors = json.loads(attribute.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    errors += [line for line in done.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    return errors


def _runs(tmp_path: Path) -> tuple[Path, Path]:
    a = make_run(
        tmp_path,
        "node1",
        "20261130T120000Z",
        "deepseek-v4-flash-dspark-marlin",
        details=True,
        telemetry=True,
        repeats=2,
    )
    b = make_run(tmp_path, "node2", "20261130T130000Z", "deepseek-v4-flash-dspark-flashinfer", details=True, scale=1.3)
    return a, b


def _report_with_reference(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`hgxkit results report marlin -o run.html`, run where recipes/ is (the run's recipe holds the reference)."""
    monkeypatch.chdir(ROOT)
    out = tmp_path / "run.html"
    assert main(["results", "--root", str(tmp_path), "report", "marlin", "-o", str(out)]) == 0
    return out


def test_run_page_is_self_contained_and_complete(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _runs(tmp_path)
    page = _report_with_reference(tmp_path, monkeypatch).read_text()
    assert '<meta http-equiv="Content-Security-Policy" content="default-src \'none\';' in page
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page) and "<link" not in page and "@import" not in page
    assert 'class="sim">SIMULATED' in page
    # TTFT, accept length, throughput, and the cell's two telemetry charts (one concurrency: no sweep plot)
    assert page.count("<svg") == 5 and page.count("<polyline") >= 2
    assert "TTFT mean [95% CI] ms" in page and "P99 under 5 s?" in page
    assert "Against the recipe's reference" in page and "330.12" in page  # the post's marlin 5K x 5 number
    assert "SIMULATED telemetry" in page and "SwPowerCap ×6" in page
    assert "MLPerf system description" in page and "accelerator_on-chip_memories" in page
    assert "e2e_p99_ms (ms)" in page  # every client metric


def test_comparison_page_and_sweep_plot(tmp_path: Path) -> None:
    make_run(tmp_path, "node3", "20261130T140000Z", "sweep")  # c5 and c10: a concurrency sweep
    a, b = _runs(tmp_path)
    runs = [load_run(str(a), tmp_path), load_run(str(b), tmp_path)]
    page = run_html(runs)
    assert "<b>A</b> = node1/20261130T120000Z_deepseek-v4-flash-dspark-marlin" in page
    assert "What differs between the hosts and setups" in page and "A -23%" in page
    sweep = run_html([load_run("sweep", tmp_path)])
    assert "Latency vs throughput" in sweep and sweep.count("<svg") == 4


def test_cli_report_index_and_write_into_the_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, _ = _runs(tmp_path)
    (tmp_path / "node9" / "20261130T150000Z_broken").mkdir(parents=True)
    written = write_report_html(a)
    assert written == a / "report.html" and SECRET not in written.read_text()
    out = tmp_path / "site" / "index.html"
    assert main(["results", "--root", str(tmp_path), "report", "--index", "-o", str(out)]) == 0
    index = out.read_text()
    assert '<a href="../node1/20261130T120000Z_deepseek-v4-flash-dspark-marlin/report.html">' in index
    assert "node2/20261130T130000Z_deepseek-v4-flash-dspark-flashinfer (no report.html)" in index
    assert "Skipped (damaged)" in index and "20261130T150000Z_broken: not a complete run" in index
    assert (
        main(["results", "--root", str(tmp_path), "report", "marlin", "flashinfer", "-o", str(tmp_path / "ab.html")])
        == 0
    )
    assert "2 runs:" in (tmp_path / "ab.html").read_text()
    assert main(["results", "--root", str(tmp_path), "report"]) == 2
    assert "report needs RUN" in capsys.readouterr().err


def test_report_renders_in_headless_chromium_without_errors(
    tmp_path: Path, chromium: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = _runs(tmp_path)
    run_page = _report_with_reference(tmp_path, monkeypatch)
    both = tmp_path / "both.html"
    both.write_text(run_html([load_run(str(a), tmp_path), load_run(str(b), tmp_path)]))
    runs, skipped = scan_runs(tmp_path)
    index = tmp_path / "index.html"
    index.write_text(index_html(runs, skipped, out_dir=tmp_path))
    # The harness must be able to fail: a page with a script error and a network load is caught.
    control = tmp_path / "control.html"
    control.write_text(
        run_page.read_text().replace(
            "</main>", '<img src="https://example.invalid/x.png"><script>undefinedFunction()</script></main>'
        )
    )
    caught = render_errors(chromium, control)
    assert any("script-src-elem inline" in e for e in caught) and any("example.invalid" in e for e in caught), caught
    assert not any("undefinedFunction" in e for e in caught), caught  # refused by the CSP, never run
    for page in (run_page, both, index):
        assert render_errors(chromium, page) == [], page.name
    shot = tmp_path / "report.png"
    done = _chromium(
        chromium, "--hide-scrollbars", "--window-size=1280,2400", f"--screenshot={shot}", run_page.as_uri()
    )
    assert done.returncode == 0 and shot.exists(), done.stderr[-2000:]
    image = Image.open(shot).convert("RGB")
    assert image.size == (1280, 2400)
    colours = image.resize((160, 300)).getcolors(maxcolors=100000) or []
    assert len(colours) > 50  # tables, plots and the SIMULATED banner, not a blank page
    banner = image.crop((0, 0, 1280, 200)).getcolors(maxcolors=100000) or []
    assert any(rgb == (0xFF, 0xF3, 0xCD) and count > 1000 for count, rgb in banner)  # the yellow SIMULATED banner
    if os.environ.get("HGXKIT_REPORT_SCREENSHOT"):
        shutil.copy(shot, os.environ["HGXKIT_REPORT_SCREENSHOT"])
