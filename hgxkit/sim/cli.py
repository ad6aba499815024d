"""`hgxkit sim …` sub-commands (placeholder until the simulated node lands)."""

from __future__ import annotations

import argparse


def register(groups: argparse._SubParsersAction) -> None:
    """Add the `sim` command group."""
    parser = groups.add_parser("sim", help="simulated HGX-H200 nodes (not yet available)")
    parser.set_defaults(handler=lambda _args: parser.error("no sim sub-commands yet"))
