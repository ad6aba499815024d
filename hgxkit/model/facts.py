"""The model role's check: is the recipe's model a verified copy on the node? (a stamp, one `stat`, a few ms)

Three tiers, each falling through to the next on any doubt: the node's shell checks the verdict stamp the host
program left (`core.write_stamp`: local_dir's realpath, the spec's key, one `stat` over every file, directory,
the manifest and the record, hashed; for a branch or tag one HEAD to the Hub for the commit it names); a pinned
commit's stdlib fast path (`quickcheck`); the full `fetch.py status`. The two Python tiers write a fresh stamp
whenever they answer complete, so a node converged by an older hgxkit is fast from its second run on.

Example (in a deploy; the token goes on stdin, never on the command line):
    status = host.get_fact(ModelSyncStatus, python="/opt/hgxkit/hf-venv/bin/python",
                           script="/usr/local/lib/hgxkit/model/hgxkit_fetch.py", spec=spec.to_json(),
                           token=True, _stdin=SecretLines([token]))
    status["state"]   # complete | incomplete | running | error | absent
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote

from pyinfra.api import FactBase, StringCommand

from hgxkit.hostcmd import argv, script
from hgxkit.hostlock import dry_run
from hgxkit.model import core, quickcheck

_FAILED = '{"state": "incomplete", "reason": "the status check failed"}'
# The program loaded as a module, not run as a script: Python keeps the compiled bytecode of an imported module
# (__pycache__ beside it) but compiles a script's 1,500 lines on every run, a third of this check's CPU time.
_AS_MODULE = (
    "import importlib.util as u, sys; s = u.spec_from_file_location('hgxkit_fetch', sys.argv[1]); "
    "m = u.module_from_spec(s); sys.modules['hgxkit_fetch'] = m; s.loader.exec_module(m); "
    "sys.exit(m.main(sys.argv[2:]))"
)
_ABSENT = '{"state": "absent"}'
# Sent inline, so a host never runs an older copy than the role's (nothing to upload, nothing to get stale).
_QUICK = Path(quickcheck.__file__).read_text()


def stamp_check(spec: core.Spec, *, token: bool = False) -> StringCommand | None:
    """The shell fast path for `spec` (prints the `status` JSON line and exits 0, or prints nothing and exits
    non-zero); None where only Python can answer (a full re-hash, a bundle's branch). With `token`, the caller's
    shell holds the controller's token in `$hgxkit_token` (read from stdin, never exported): the Hub is asked
    with it in an Authorization header that curl reads from a pipe (`-H @-`), written by the shell's builtin
    printf, so the token is in no process's argv or environment."""
    pinned = core.is_commit(spec.revision)
    if spec.full_rehash or (not pinned and spec.source == "bundle"):
        return None
    if pinned:
        revision_check = script('[ "$commit" = {revision} ] || exit 1; ', revision=spec.revision)
    elif spec.source == "peer":  # `status` asks no Hub for a peer's copy either
        revision_check = script("")
    else:
        path = f"/{quote(spec.repo_id, safe='/')}/resolve/{quote(spec.revision, safe='')}/"
        where = (
            script("{where}", where=spec.endpoint.rstrip("/"))
            if spec.endpoint
            else script('"${{HF_ENDPOINT:-https://huggingface.co}}"')  # as spec.where reads it on the host
        )
        # The commit the branch or tag names now, from the header the Hub sends with every file (X-Repo-Commit),
        # on a HEAD of the stamp's small file, as huggingface_hub reads it; curl honours the proxy variables.
        head = script(
            "curl -q -s -I -o /dev/null --connect-timeout 5 --max-time 10 -A hgxkit-fetch/1 "
            "-w '%{{http_code}} %header{{x-repo-commit}}' {where}{path}\"$probe\"",
            where=where,
            path=path,
        )
        if token:
            head = script("printf 'Authorization: Bearer %s\\n' \"$hgxkit_token\" | {head} -H @-", head=head)
        revision_check = script('case $({head}) in [23][0-9][0-9]" $commit") ;; *) exit 1;; esac; ', head=head)
    name = core.model_name(spec.local_dir)
    before = json.dumps({"name": name, "unit": core.unit_name(spec.local_dir), "state": "complete"})[:-1]
    # In a subshell that prints the answer or nothing (any failed step exits it non-zero). The stamp
    # (core.write_stamp) is: "<schema> <key> <commit> <number of files>", the sha256 of the `stat` output,
    # local_dir's realpath, the URL-quoted file to ask the Hub about, then one path a line; dash reads the four
    # header lines byte by byte, so xargs goes on reading the paths from the same descriptor.
    # No `systemctl is-active` (9 ms): a sync removes the stamp before its unit starts (the role) and as its
    # first act (fetch.py run), and everything a sync changes (the manifest first of all) is in the `stat`, so a
    # stamp that still matches describes the verified copy. The state directory is root's: a forged stamp needs
    # root (see core.write_stamp).
    return script(
        "( exec 2>/dev/null; cd -P -- {local_dir} && exec 3< {stamp} || exit 1; "
        "IFS= read -r head <&3 && IFS= read -r sum <&3 && IFS= read -r root <&3 && IFS= read -r probe <&3 || exit 1; "
        '[ "$root" = "$PWD" ] || exit 1; '
        "case $head in {prefix}*) ;; *) exit 1;; esac; commit=${{head#{prefix}}}; files=${{commit#* }}; "
        "commit=${{commit%% *}}; case $commit in *[!0-9a-f]*) exit 1;; esac; [ ${{#commit}} -eq 40 ] || exit 1; "
        "case $files in *[!0-9]*|'') exit 1;; esac; "
        '[ "$(LC_ALL=C xargs -r -d "\\n" stat --printf {format} -- <&3 | sha256sum)" = "$sum  -" ] || exit 1; '
        "{revision_check}"
        'printf "%s%s%s%s%s%.12s%s\\n" {before} "$commit" {verified} "$files" {files_at} "$commit" {after} )',
        local_dir=spec.local_dir,
        stamp=spec.state_file(".stamp"),
        prefix=f"{core.STAMP_SCHEMA} {core.stamp_key(spec)} ",
        format=core.STAT_FORMAT,
        revision_check=revision_check,
        before=before + ', "commit": "',
        verified='", "reason": "verified ',
        files_at=" files at ",
        after=' (unchanged since verify, the stamp on the node)", "elapsed_s": 0.0}',
    )


class ModelSyncStatus(FactBase[dict]):
    """`fetch.py status`: one JSON object with `state` complete | incomplete | running | error | absent (the
    role's program is not installed yet) and a `reason`."""

    def command(self, python: str, script_path: str, spec: str, token: bool = False) -> StringCommand:
        status = argv(
            python, "-c", _AS_MODULE, script_path, "status", "--spec", spec, *(["--token-stdin"] if token else [])
        )
        try:
            parsed: core.Spec | None = core.Spec(**json.loads(spec))
        except (ValueError, TypeError):
            parsed = None
        if parsed is not None and core.is_commit(parsed.revision):
            # A pinned commit needs no Hub: the stdlib-only fast path answers for a verified, unchanged copy
            # (not while a sync unit runs); anything else falls through to the full check.
            status = script(
                "{{ ! systemctl is-active --quiet {unit} 2>/dev/null && {quick} 2>/dev/null; }} || {{ {status}; }}",
                unit=core.unit_name(parsed.local_dir),
                quick=argv(python, "-I", "-S", "-c", _QUICK, spec, script_path),
                status=status,
            )
        fast = stamp_check(parsed, token=token) if parsed is not None else None
        if token:  # stdin holds the token (one line): read once into an unexported variable, piped on to each tier
            status = script("printf '%s\\n' \"$hgxkit_token\" | {status}", status=status)
        if fast is not None:
            status = script("{fast} || {{ {status}; }}", fast=fast, status=status)
        if token:
            # unset first: a variable of that name in the environment would stay exported after `read`.
            status = script(
                'unset hgxkit_token; IFS= read -r hgxkit_token || [ -n "$hgxkit_token" ]; {status}', status=status
            )
        # `--dry`: the Python checks leave the stamp as it is (core.STAMP_READONLY_ENV); the shell check never
        # writes. An older program on the node ignores the variable (it is replaced before any real run).
        if dry_run():
            status = script("export HGXKIT_MODEL_STAMP_READONLY=1; {status}", status=status)
        return script(
            "if [ -x {python} ] && [ -f {program} ]; then {{ {status}; }} 2>/dev/null || echo {failed}; "
            "else echo {absent}; fi",
            python=python,
            program=script_path,
            status=status,
            failed=_FAILED,
            absent=_ABSENT,
        )

    def process(self, output: list[str]) -> dict:
        for line in reversed(output):
            if line.strip().startswith("{"):
                try:
                    return dict(json.loads(line))
                except ValueError:
                    break
        return {"state": "incomplete", "reason": "unreadable status: " + " ".join(output)[:120]}
