"""HTTP requests hgxkit sends to a server from the node itself (curl over SSH): health, info, one chat.

The output is the response body, then the HTTP status on the last line (`parse_response`). With an API key,
the `Authorization` header is read from the root-only key file by the shell and handed to curl as config on
stdin, so the key is never on a command line (other users can read those in /proc).

Example:
    >>> print(http_request("http://127.0.0.1:5000/health"))
    curl -sS -m 120 -w '\\n%{http_code}' http://127.0.0.1:5000/health 2>&1 || true
    >>> parse_response(['{"ok": true}', "200"])
    (200, '{"ok": true}')
"""

from __future__ import annotations

import json

from pyinfra.api import StringCommand

from hgxkit.hostcmd import argv, script


def http_request(
    url: str, *, body: dict | None = None, key_file: str | None = None, timeout_s: int = 120
) -> StringCommand:
    """GET `url` (or POST `body` as JSON); prints the body, then the status code on its own line."""
    words = ["curl", "-sS", "-m", str(timeout_s), "-w", "\\n%{http_code}"]
    if body is not None:
        words += ["-H", "Content-Type: application/json", "-d", json.dumps(body)]
    words.append(url)
    if not key_file:
        return script("{curl} 2>&1 || true", curl=argv(*words))
    return script(
        'printf \'header = "Authorization: Bearer %s"\\n\' "$(cat {file})" | {curl} -K - 2>&1 || true',
        file=key_file,
        curl=argv(*words),
    )


def parse_response(lines: list[str]) -> tuple[int | None, str]:
    """(HTTP status, body) from `http_request`'s output; status None when curl got no response."""
    status = lines[-1].strip() if lines else ""
    return (int(status) if status.isdigit() and status != "000" else None), "\n".join(lines[:-1])


def json_body(lines: list[str]) -> dict:
    """The JSON object body of a response ({} when it is not one)."""
    try:
        data = json.loads(parse_response(lines)[1] or "{}")
    except json.JSONDecodeError:
        return {}
    return data if isinstance(data, dict) else {}
