"""The downloader's failures: one line naming what is wrong and the remedy, and the Xet hand-off signal."""

from __future__ import annotations


class FetchError(Exception):
    """A failure the user must act on; the message is one line naming what is wrong and the remedy."""

    def __init__(self, message: str, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


class XetFile(Exception):
    """The Hub keeps this file in Xet storage (its /resolve/ answer carries X-Xet-Hash): hf_xet fetches it."""
