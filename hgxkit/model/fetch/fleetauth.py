"""The fleet channel's rules: how a request is signed with the run's secret, and where a server may listen."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time

FLEET_TIMEOUT_S = 10.0  # every socket operation of the fleet server (and of its clients): idle ones are dropped


FLEET_MAX_CONNECTIONS = 32  # connections served at once (one thread each; at least workers + 2 per child)


FLEET_AUTH_WINDOW_S = 300  # how far a signed request's clock may be off; its nonce is not accepted twice within


_BIND_ANY = ("", "0.0.0.0", "::", "[::]")


def fleet_mac(secret: str, method: str, target: str, rng: str, stamp: str, nonce: str, body: bytes = b"") -> str:
    """HMAC-SHA256 of one fleet request with the run's secret: method, target, Range, time, nonce and body.

    >>> fleet_mac("s", "GET", "/state", "", "1", "n")[:16]
    '03947af2736850e9'
    """
    msg = "\n".join((method, target, rng, stamp, nonce)).encode() + b"\n" + body
    return hmac.new(secret.encode(), msg, hashlib.sha256).hexdigest()


def fleet_auth(secret: str, method: str, target: str, rng: str = "", body: bytes = b"") -> dict[str, str]:
    """The headers that authenticate one request to a fleet server (the secret itself is never sent)."""
    stamp, nonce = str(int(time.time())), secrets.token_hex(12)
    mac = fleet_mac(secret, method, target, rng, stamp, nonce, body)
    return {"X-Hgxkit-Time": stamp, "X-Hgxkit-Nonce": nonce, "Authorization": f"hgxkit-hmac {mac}"}


def bind_problem(bind: str, bind_any: bool) -> str | None:
    """Why a fleet server may not listen on `bind`: every address of the host needs the knob.

    >>> bind_problem("10.0.0.5", False) is None, bind_problem("0.0.0.0", False)[:40]
    (True, 'would listen on every address (0.0.0.0):')
    """
    if bind in _BIND_ANY and not bind_any:
        return (
            f"would listen on every address ({bind or 'none set'}): set fabric_address or model_peer_address "
            "on the host, or model_fleet_bind_any: true"
        )
    return None
