"""`hgxkit bundle create|verify`: carry a recipe's packages, image, model and wheels to a site with no route out.

Examples:
    hgxkit bundle create --recipe recipes/my-post.yaml --inventory inventories/h200.py -o /media/usb/my-post
    HGXKIT_SIM_CLUSTER=demo hgxkit bundle create --recipe recipes/my-post.yaml --inventory inventories/sim.py -o b
    hgxkit bundle verify /media/usb/my-post           # every artifact against bundle.json; a changed file is named
    hgxkit bundle verify /media/usb/my-post --fingerprint F716…456D   # and signed by the key you were told
    pyinfra -y inventories/h200.py deploys/dspark.py --data bundle=/media/usb/my-post
"""

from __future__ import annotations

import argparse
import json
import runpy
import sys
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from hgxkit.bundle import manifest
from hgxkit.cli.args import json_option, package_schema
from hgxkit.errors import InputError
from hgxkit.knobs import knob
from hgxkit.recipe.judge import allowances_from_knobs, judge
from hgxkit.recipe.read import load_recipe

if TYPE_CHECKING:
    from hgxkit.bundle.create import Sources

SourcesFor = Callable[[Mapping[str, Any]], AbstractContextManager["Sources"]]

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_KEY_HOME = Path.home() / ".local" / "share" / "hgxkit" / "bundle-gnupg"


def create_schema() -> dict[str, Any]:
    """The JSON schema of `hgxkit bundle create --json`."""
    return package_schema("hgxkit.bundle", "create")


def verify_schema() -> dict[str, Any]:
    """The JSON schema of `hgxkit bundle verify --json`."""
    return package_schema("hgxkit.bundle", "verify")


def register(groups: argparse._SubParsersAction, simulated_sources: SourcesFor | None = None) -> None:
    """Add `bundle …`; `simulated_sources` reads a simulated inventory's sources (the simulator's, when installed)."""
    parser = groups.add_parser(
        "bundle",
        help="carry everything a node needs to an air-gapped site",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    subs = parser.add_subparsers(dest="command", metavar="COMMAND")
    subs.required = True
    create = subs.add_parser(
        "create",
        help="make a bundle for a recipe at the versions bring-up pins",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    create.add_argument("--recipe", required=True, help="the recipe file the bundle serves")
    create.add_argument("--inventory", help="a pyinfra inventory whose knobs (versions, repositories) apply")
    create.add_argument("-o", "--output", required=True, help="the bundle directory to make (must not exist)")
    create.add_argument(
        "--distro",
        default=None,
        help="the nodes' distribution: ubuntu2204, ubuntu2404 or debian12 (default ubuntu2404; "
        "debian12 on simulated nodes)",
    )
    create.add_argument(
        "--key-home",
        default=str(DEFAULT_KEY_HOME),
        help=f"GnuPG home of the bundle signing key, made once (default {DEFAULT_KEY_HOME})",
    )
    json_option(create, create_schema, "the bundle's summary (schema: hgxkit/bundle/schemas/create.schema.json)")
    create.set_defaults(handler=_cmd_create, simulated_sources=simulated_sources)
    verify = subs.add_parser(
        "verify",
        help="check every artifact of a bundle against its bundle.json",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    verify.add_argument("dir", help="the bundle directory")
    verify.add_argument(
        "--fingerprint",
        help="the bundle key's fingerprint, as its maker gave it to you another way: "
        "bundle.json must carry a valid signature by that key",
    )
    json_option(verify, verify_schema, "the verdict (schema: hgxkit/bundle/schemas/verify.schema.json)")
    verify.set_defaults(handler=_cmd_verify)


def knob_defaults() -> dict[str, Any]:
    """The roles' knob defaults, from deploys/bundle.py of the checkout this package is in; never from the
    current directory, whose deploys/ may be anyone's."""
    program = REPO_ROOT / "deploys" / "bundle.py"
    if program.is_file() and (REPO_ROOT / "roles").is_dir():
        return dict(runpy.run_path(str(program))["KNOB_DEFAULTS"])
    raise InputError(
        f"{program}: not found; hgxkit bundle create reads the roles' knobs from the checkout hgxkit is installed "
        "from (deploys/bundle.py, roles/): install it with `pip install -e .` in the checkout"
    )


def inventory_knobs(inventory: str | None, defaults: dict[str, Any]) -> dict[str, Any]:
    """The knobs of the inventory's first host (inventory and group data over the roles' defaults)."""
    if inventory is None:
        return dict(defaults)
    if not Path(inventory).is_file():
        raise InputError(f"{inventory}: no such inventory file")
    from pyinfra.api import State
    from pyinfra.context import ctx_state
    from pyinfra_cli.inventory import make_inventory

    state = State()
    try:
        with ctx_state.use(state):
            inv = make_inventory(inventory, cwd=str(Path.cwd()))
    except BaseException as err:  # pyinfra's errors (and an inventory's SystemExit) name the file
        raise InputError(f"{inventory}: {err}") from None
    hosts = list(inv)
    if not hosts:
        raise InputError(f"{inventory}: no hosts")
    data = hosts[0].data
    return {
        **defaults,
        **{k: data.get(k) for k in set(defaults) | {"hgxkit_simulated", "hf_endpoint"} if data.get(k) is not None},
    }


def _cmd_create(args: argparse.Namespace) -> int:
    from hgxkit.bundle.create import bundle_bytes, create, real_sources

    knobs = inventory_knobs(args.inventory, knob_defaults())
    log = (lambda line: print(line, file=sys.stderr)) if args.json else print
    started = time.monotonic()
    recipe, out, key_home = Path(args.recipe), Path(args.output), Path(args.key_home)
    if not recipe.is_file():
        raise InputError(f"{recipe}: no such recipe file")
    # Judged as the inventory's node would judge it: a bundle carries only what that node would serve.
    inventory = SimpleNamespace(data=knobs)
    judged = judge(load_recipe(str(recipe)), allowances_from_knobs(lambda name: knob(inventory, name)))
    if knobs.get("hgxkit_simulated"):
        if args.simulated_sources is None:
            raise InputError(f"{args.inventory}: a simulated inventory needs the simulator (pip install 'hgxkit[sim]')")
        with args.simulated_sources(knobs) as sources:
            doc = create(judged, recipe, out, sources, key_home, log)
    else:
        doc = create(judged, recipe, out, real_sources(knobs, args.distro or "ubuntu2404"), key_home, log)
    if args.json:
        print(
            json.dumps(
                {
                    "schema_version": 1,
                    "dir": str(out),
                    "bundle_sha256": doc["bundle_sha256"],
                    "key_fingerprint": doc["key"]["fingerprint"],
                    "recipe": doc["recipe"],
                    "files": len(doc["artifacts"]),
                    "bytes": bundle_bytes(doc),
                    "seconds": round(time.monotonic() - started, 3),
                }
            )
        )
    return 0


def _cmd_verify(args: argparse.Namespace) -> int:
    root = Path(args.dir)
    started = time.monotonic()
    doc, problems = manifest.verify(root, fingerprint=args.fingerprint)
    took = time.monotonic() - started
    if args.json:
        print(
            json.dumps(
                {
                    "schema_version": 1,
                    "dir": str(root),
                    "ok": not problems,
                    "bundle_sha256": doc["bundle_sha256"] if doc else None,
                    "key_fingerprint": doc["key"]["fingerprint"] if doc else None,
                    "files": len(doc["artifacts"]) if doc else 0,
                    "bytes": sum(a["size"] for a in doc["artifacts"]) if doc else 0,
                    "fingerprint_checked": bool(args.fingerprint),  # checked before anything else is trusted
                    "problems": problems,
                    "seconds": round(took, 3),
                }
            )
        )
    else:
        for line in problems:
            print(f"{root}/{line}" if not line.startswith(str(root)) else line, file=sys.stderr)
        if doc and not problems:
            print(
                f"{root}: bundle {doc['bundle_sha256']} verified: {len(doc['artifacts'])} files, "
                f"{sum(a['size'] for a in doc['artifacts']) / 1e6:.1f} MB in {took:.1f} s; "
                f"key {doc['key']['fingerprint']}"
            )
    return 1 if problems else 0
