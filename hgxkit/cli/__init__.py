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
import sys
from collections.abc import Sequence

from hgxkit import __version__
from hgxkit.errors import HgxkitError


def build_parser() -> argparse.ArgumentParser:
    """Build the top-level parser; each subsystem adds its own sub-commands via `register`."""
    # Imported here so `hgxkit --version` stays fast and a broken subsystem names itself on use. The sim group
    # registers with the standard library alone (a controller installs hgxkit without the `sim` extra); its
    # handlers import the simulation when a sim command runs (tests/unit/project/test_controller_install.py).
    from hgxkit.cli import bundle as bundle_cli
    from hgxkit.cli import doctor as doctor_cli
    from hgxkit.cli import recipe as recipe_cli
    from hgxkit.cli import results as results_cli
    from hgxkit.cli import verify as verify_cli
    from hgxkit.sim import cli as sim_cli  # the one place outside the simulator that imports it

    parser = argparse.ArgumentParser(
        prog="hgxkit",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"hgxkit {__version__}")
    groups = parser.add_subparsers(dest="group", metavar="COMMAND")
    groups.required = True
    recipe_cli.register(groups)
    sim_cli.register(groups)
    results_cli.register(groups)
    doctor_cli.register(groups)
    verify_cli.register(groups)
    bundle_cli.register(groups, simulated_sources=sim_cli.bundle_sources)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return the process exit status (0 ok, 1 failure, 2 bad input)."""
    parser = build_parser()
    args = parser.parse_args(argv)
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
