"""`hgxkit sim …`: simulated HGX-H200 nodes (containers with systemd, sshd, dockerd, simulated GPUs).

Examples:
    hgxkit sim up --nodes 2            # build the image once (root, mmdebstrap), start node1 and node2
    hgxkit sim status --json           # {"schema_version": 1, "nodes": [{"name": "node1", "port": 2222, ...}]}
    hgxkit sim ssh node1 -- nvidia-smi -L
    hgxkit sim down                    # remove every container, volume and network it made
    hgxkit sim image build             # the SGLang stand-in lmsysorg/sglang:dev-dspark, into the nodes' mirror
    hgxkit sim client install          # SGLang's real benchmark client, shared read-only by the nodes
    hgxkit sim host setup              # this machine's packages, dockerd and lxcfs (what `make demo` runs first)
    hgxkit sim demo                    # `make demo`: one node -> the post's setup served, benchmarked, compared
"""

from __future__ import annotations

import argparse
import functools
import importlib.metadata
import importlib.util
import json
import os
import re
import shlex
import shutil
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any

from hgxkit.cli.args import json_option, package_schema
from hgxkit.errors import HgxkitError, InputError

STATUS_SCHEMA_VERSION = 1


def _cluster(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--cluster",
        default=os.environ.get("HGXKIT_SIM_CLUSTER", "default"),
        help="name of this set of nodes (default: $HGXKIT_SIM_CLUSTER or 'default')",
    )


def _up(args: argparse.Namespace) -> int:
    from hgxkit.sim import nodes

    started = nodes.up(
        args.nodes,
        gpus=args.gpus,
        memory_gib=args.memory_gib,
        model_disk=args.model_disk,
        cluster=args.cluster,
    )
    for n in started:
        print(f"{n.name}\tssh -i {n.key} -p {n.port} {n.user}@{n.host}\t({n.gpus} simulated H200 GPUs)")
    return 0


def _down(args: argparse.Namespace) -> int:
    from hgxkit.sim import nodes

    r = nodes.down(args.cluster)
    print(f"removed {r.containers} containers, {r.volumes} volumes, {r.networks} networks")
    return 0


def _status(args: argparse.Namespace) -> int:
    from hgxkit.sim import nodes

    found = nodes.status(args.cluster)
    if args.json:
        document = {
            "schema_version": STATUS_SCHEMA_VERSION,
            "cluster": args.cluster,
            "nodes": [n.as_dict() for n in found],
        }
        print(json.dumps(document, indent=2))
    elif not found:
        print(f"no simulated nodes in cluster {args.cluster!r}: start some with `hgxkit sim up`")
    else:
        for n in found:
            print(f"{n.name}\t{n.state}\t{n.host}:{n.port}\t{n.gpus} GPUs\t{n.container}")
    return 0


def _split_ssh_rest(args: argparse.Namespace) -> list[str]:
    """Take `--cluster X` given after NODE out of the remainder; return the command after `--`."""
    rest = list(args.command)
    while rest and rest[0].startswith("--cluster"):
        if "=" in rest[0]:
            args.cluster = rest.pop(0).split("=", 1)[1]
        elif len(rest) > 1:
            rest.pop(0)
            args.cluster = rest.pop(0)
        else:
            raise InputError("--cluster needs a value: hgxkit sim ssh NODE --cluster NAME -- CMD")
    return rest[1:] if rest[:1] == ["--"] else rest


def _ssh(args: argparse.Namespace) -> int:
    from hgxkit.sim import nodes

    command = _split_ssh_rest(args)
    match = [n for n in nodes.status(args.cluster) if n.name == args.node]
    if not match:
        raise InputError(f"no simulated node {args.node!r} in cluster {args.cluster!r}: see `hgxkit sim status`")
    if shutil.which("ssh") is None:
        raise HgxkitError(f"ssh not found: install openssh-client, or use `docker exec -it {match[0].container} bash`")
    argv = nodes.ssh_argv(match[0], command)
    os.execvp(argv[0], argv)
    return 0  # pragma: no cover


def _host_setup(args: argparse.Namespace) -> int:
    from hgxkit.sim import host

    return host.setup(args.purpose, dry_run=args.dry_run)


def _demo(args: argparse.Namespace) -> int:
    from hgxkit.sim import demo

    return demo.run(
        demo.DemoOptions(cluster=args.cluster, memory_gib=args.memory_gib, results=args.results, verbose=args.verbose)
    )


Handler = Callable[[argparse.Namespace], int]


SIM_EXTRA = ("docker", "cryptography")  # the Docker SDK, and the nodes' SSH key


def sim_extra_missing() -> list[str]:
    """The modules of the `sim` extra this Python cannot import (none in `make venv`'s .venv)."""
    return [name for name in SIM_EXTRA if importlib.util.find_spec(name) is None]


def sim_extra_requirements() -> list[str]:
    """The `sim` extra's requirements as this install declares them (empty when run from a bare checkout)."""
    try:
        declared = importlib.metadata.requires("hgxkit") or []
    except importlib.metadata.PackageNotFoundError:
        declared = []
    return [r.split(";")[0].strip() for r in declared if re.search(r"""extra\s*==\s*["']sim["']""", r)]


def _needs_sim_extra(handler: Handler) -> Handler:
    """`handler`, refused in one line (exit 2) when the simulation's extra is not installed: a controller for
    real nodes installs hgxkit without it."""

    @functools.wraps(handler)
    def checked(args: argparse.Namespace) -> int:
        missing = sim_extra_missing()
        if missing:
            wanted = " ".join(shlex.quote(r) for r in sim_extra_requirements()) or "'.[sim]' in the hgxkit checkout"
            raise InputError(
                f"`hgxkit sim` needs {' and '.join(missing)} (the 'sim' extra, not installed): pip install {wanted}"
            )
        return handler(args)

    return checked


def _wrap_handlers(parser: argparse.ArgumentParser) -> None:
    """Put `_needs_sim_extra` around every handler of `parser` and of its sub-commands, however deep."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                _wrap_handlers(child)
    handler = parser._defaults.get("handler")
    if handler is not None:
        parser.set_defaults(handler=_needs_sim_extra(handler))


def bundle_sources(knobs: Mapping[str, Any]) -> AbstractContextManager[Any]:
    """A simulated inventory's bundle sources: this machine's copies of what the nodes are served."""
    from hgxkit.sim.bundlesources import sim_sources

    return sim_sources(knobs)


def register(groups: argparse._SubParsersAction) -> None:
    """Add the `sim` command group."""
    parser = groups.add_parser(
        "sim",
        help="simulated HGX-H200 nodes",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="sim_command", metavar="SUBCOMMAND")
    sub.required = True

    p = sub.add_parser("up", help="start N simulated nodes (builds the node image when needed)")
    p.add_argument("--nodes", type=int, default=1, help="number of nodes (default 1)")
    p.add_argument("--gpus", type=int, default=8, help="simulated H200 GPUs per node (default 8)")
    p.add_argument("--memory-gib", type=int, default=2048, help="RAM each node reports in /proc/meminfo")
    p.add_argument("--model-disk", default="4t", help="size of the /data/models file system (default 4t)")
    _cluster(p)
    p.set_defaults(handler=_up)

    p = sub.add_parser("down", help="remove the nodes and every container, volume and network they used")
    _cluster(p)
    p.set_defaults(handler=_down)

    p = sub.add_parser("status", help="list the nodes and how to reach them")
    json_option(p, lambda: package_schema("hgxkit.sim", "status"), "the nodes (what inventories/sim.py reads)")
    _cluster(p)
    p.set_defaults(handler=_status)

    p = sub.add_parser("ssh", help="log into a node (or run `-- CMD` on it)")
    p.add_argument("node", help="node name, e.g. node1")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD [ARGS...] (run CMD, not a login shell)")
    _cluster(p)
    p.set_defaults(handler=_ssh)

    from hgxkit.sim.standin import cli as serving_cli

    serving_cli.register(sub)  # `image …` (SGLang stand-in, registry mirror) and `client …` (benchmark client)

    p = sub.add_parser(
        "demo",
        help="`make demo`: one node -> the post's setup served, benchmarked, compared with the post, timed",
        description="Builds the images, starts one simulated node, runs `pyinfra -y inventories/sim.py "
        "deploys/dspark.py` (from this checkout), then prints the run next to the post's numbers, the archive, "
        "the report and how long each phase took. The node keeps running: `hgxkit sim down --cluster NAME`.",
    )
    p.add_argument("--memory-gib", type=int, default=3072, help="RAM the node reports (default 3072)")
    p.add_argument("--results", default="results", help="the archive directory (default: ./results)")
    p.add_argument("-v", "--verbose", action="store_true", help="also print pyinfra's output as it comes")
    p.add_argument(
        "--cluster",
        default=os.environ.get("HGXKIT_SIM_CLUSTER", "demo"),
        help="the demo node's cluster (default: $HGXKIT_SIM_CLUSTER or 'demo')",
    )
    p.set_defaults(handler=_demo)
    _wrap_handlers(parser)

    # After the wrapping: host setup needs only the standard library (it runs before the virtualenv exists).
    host_parser = sub.add_parser("host", help="this machine: the packages, dockerd and lxcfs the nodes need")
    host_sub = host_parser.add_subparsers(dest="host_command", metavar="SUBCOMMAND")
    host_sub.required = True
    from hgxkit.sim import host

    p = host_sub.add_parser(
        "setup",
        help="install and start what the simulated nodes need (root, Debian/Ubuntu); a no-op when all is there",
        description=host.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    host.add_arguments(p)
    p.set_defaults(handler=_host_setup)
