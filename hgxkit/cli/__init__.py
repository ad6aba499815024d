"""The `hgxkit` command line: one sub-command group per subsystem, each registered from its own module.

Examples:
    hgxkit recipe import post.txt --name my-setup -o recipes/my-setup.yaml
    hgxkit recipe render recipes/deepseek-v4-flash-dspark-marlin.yaml --gpus 8
    hgxkit sim up --nodes 2
    hgxkit results compare RUN_A RUN_B --md
    hgxkit bundle create --recipe recipes/deepseek-v4-flash-dspark-marlin.yaml -o /media/usb/dspark
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from hgxkit import __version__
from hgxkit.errors import HgxkitError

# Each command group's module, in the order `hgxkit --help` lists them.
GROUPS = ("recipe", "sim", "results", "doctor", "verify", "bundle")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """Build the top-level parser; each subsystem adds its own sub-commands via `register`. With `only` (a group
    the command line names) that group alone is registered: a command imports its own subsystem, not every
    other one's (numpy, jsonschema and the Docker SDK among them), which `hgxkit sim ssh` in a loop pays for."""
    # Imported here so `hgxkit --version` stays fast and a broken subsystem names itself on use. The sim group
    # registers with the standard library alone (a controller installs hgxkit without the `sim` extra); its
    # handlers import the simulation when a sim command runs (tests/unit/project/test_controller_install.py).
    parser = argparse.ArgumentParser(
        prog="hgxkit",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"hgxkit {__version__}")
    groups = parser.add_subparsers(dest="group", metavar="COMMAND")
    groups.required = True
    for name in GROUPS if only not in GROUPS else (only,):
        _register(name, groups)
    return parser


def _register(name: str, groups: argparse._SubParsersAction) -> None:
    from hgxkit.sim import cli as sim_cli  # the one place outside the simulator that imports it

    if name == "sim":
        sim_cli.register(groups)
    elif name == "bundle":
        from hgxkit.cli import bundle as bundle_cli

        bundle_cli.register(groups, simulated_sources=sim_cli.bundle_sources)
    else:
        importlib.import_module(f"hgxkit.cli.{name}").register(groups)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return the process exit status (0 ok, 1 failure, 2 bad input)."""
    words = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(words[0] if words and not words[0].startswith("-") else None)
    args = parser.parse_args(words)
    try:
        return int(args.handler(args) or 0)
    except HgxkitError as err:
        from hgxkit.secrets import redact  # an error may quote a post's own words, a secret among them

        print(f"hgxkit: error: {redact(err.message)}", file=sys.stderr)
        return err.exit_code
    except BrokenPipeError:
        # `hgxkit … | head` closed the pipe: not an error; keep Python from complaining at exit.
        sys.stdout = None  # type: ignore[assignment]
        return 0
    except KeyboardInterrupt:
        print("hgxkit: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
