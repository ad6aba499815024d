"""One archived run as the results commands and reports see it (`archive` finds and loads runs).

Example:
    >>> from hgxkit.results.archive import load_run   # doctest: +SKIP
    >>> load_run("node1/20261130T120000Z_dspark", "results").ls_json()["recipe"]   # doctest: +SKIP
    'dspark'
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from hgxkit.results.fingerprint import Fingerprint
from hgxkit.results.summary import RunSummary


@dataclass(frozen=True)
class Run:
    """One archived run: where it is, and what it holds."""

    run_id: str
    path: Path
    summary: RunSummary
    fingerprint: Fingerprint
    members: dict[str, Fingerprint] = field(default_factory=dict)  # a multi-node run: ranks >= 1, by host

    def ls_json(self) -> dict[str, object]:
        """This run's entry in `results ls --json` (schema: schemas/ls.schema.json)."""
        html = self.path / "report.html"
        return {
            "id": self.run_id,
            "path": str(self.path),
            "host": self.summary.host,
            "recipe": self.summary.recipe,
            "time": self.summary.time,
            "simulated": self.summary.simulated,
            "cells": len(self.summary.cells),
            "tool": self.summary.tool,
            "tool_version": self.summary.tool_version,
            "gates": self.summary.gates,
            "summary_schema_version": self.summary.schema_version,
            "report_html": str(html) if html.exists() else None,
        }
