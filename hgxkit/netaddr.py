"""Addresses: the one place that decides whether an address is reachable from this host only.

Example:
    >>> is_loopback("127.0.0.2"), is_loopback("[::1]"), is_loopback("LOCALHOST"), is_loopback("0.0.0.0")
    (True, True, True, False)
"""

from __future__ import annotations

import ipaddress


def is_loopback(address: str | None) -> bool:
    """True for an address only this host can reach (127.0.0.0/8, ::1, localhost), in any spelling."""
    text = (address or "").strip().strip("[]").lower()
    if text == "localhost":
        return True
    try:
        return ipaddress.ip_address(text).is_loopback
    except ValueError:
        return False
