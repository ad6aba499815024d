"""`hgxkit sim image …` and `hgxkit sim client …`: the SGLang stand-in image and the benchmark-client store.

Examples:
    hgxkit sim image build                                   # lmsysorg/sglang:dev-dspark, published to the mirror
    hgxkit sim image build --tag lmsysorg/sglang:v0.5.23 --variant rebuilt-1   # another content, another digest
    hgxkit sim image build --router                          # lmsysorg/sgl-model-gateway:latest (real sglang-router)
    hgxkit sim image status                                  # tags and digests the nodes' mirror serves
    hgxkit sim client install                                # SGLang's real benchmark client, once per host
    hgxkit sim client status
"""

from __future__ import annotations

import argparse
import json

from hgxkit.errors import HgxkitError


def _image_build(args: argparse.Namespace) -> int:
    from hgxkit.sim import nodes
    from hgxkit.sim.standin import image as serving
    from hgxkit.sim.standin import registry as serving_registry

    if args.router:  # the router image: sglang-router from PyPI (hgxkit/sim/standin/router_image.py)
        from hgxkit.sim.standin import router_image

        for tag, digest in router_image.ensure_published(nodes.client()).items():
            print(f"{tag}\t{router_image.image_tag()}\t{digest}")
        return 0
    tags = args.tag or list(serving.DEFAULT_TAGS)
    for t in tags:
        serving.check_tag(t)  # before any Docker call
    c = nodes.client()
    local = serving.ensure_image(c, tags, variant=args.variant)
    digests = serving_registry.publish(c, tags) if args.publish else {}
    for t in tags:
        print(f"{t}\t{local}\t{digests.get(serving.check_tag(t), 'not published')}")
    return 0


def _image_status(args: argparse.Namespace) -> int:
    from hgxkit.sim.standin import registry as serving_registry

    found = serving_registry.published()
    if args.json:
        print(json.dumps(found, indent=2))
        return 0
    if not found:
        print("the nodes' registry mirror holds nothing yet: run `hgxkit sim image build` (or `hgxkit sim up`)")
    for tag, info in found.items():
        print(f"{tag}\t{info['digest']}\t{info['image']}")
    return 0


def _client_install(args: argparse.Namespace) -> int:
    from pathlib import Path

    from hgxkit.sim.standin import client_store as serving_client

    store = Path(args.store) if args.store else serving_client.store_path()
    r = serving_client.ensure_installed(store)
    state = f"installed in {r.seconds:.0f} s" if r.installed else "already installed (same requirements)"
    print(f"SGLang benchmark client in {r.path}: {state}")
    return 0


def _client_status(args: argparse.Namespace) -> int:
    from hgxkit.sim.standin import client_store as serving_client

    store = serving_client.store_path()
    if not serving_client.is_installed(store):
        raise HgxkitError(f"no SGLang benchmark client in {store}: run `hgxkit sim client install`")
    print(f"SGLang benchmark client in {store} (requirements {serving_client.requirements_hash()})")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add `image` and `client` to the `hgxkit sim` sub-commands."""
    img = sub.add_parser("image", help="the SGLang stand-in image and the nodes' registry mirror")
    isub = img.add_subparsers(dest="image_command", metavar="SUBCOMMAND")
    isub.required = True
    p = isub.add_parser("build", help="build the stand-in (when changed), tag it, publish it to the mirror")
    p.add_argument("--tag", action="append", help="image tag (repeatable; default lmsysorg/sglang:dev-dspark)")
    p.add_argument("--variant", default="", help="extra content, so a rebuild gets another digest")
    p.add_argument("--no-publish", dest="publish", action="store_false", help="build and tag only")
    p.add_argument("--router", action="store_true", help="build and publish the router image instead (PyPI)")
    p.set_defaults(handler=_image_build)
    p = isub.add_parser("status", help="tags and digests the nodes' registry mirror serves")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_image_status)

    cli = sub.add_parser("client", help="SGLang's real benchmark client, shared read-only by the nodes")
    csub = cli.add_subparsers(dest="client_command", metavar="SUBCOMMAND")
    csub.required = True
    p = csub.add_parser("install", help="install it once per host (6.3 GB; skipped when up to date)")
    p.add_argument("--store", default=None, help="default $HGXKIT_SIM_CLIENT_STORE or /var/lib/hgxkit/sglang-client")
    p.set_defaults(handler=_client_install)
    p = csub.add_parser("status", help="exit 0 when the store holds the client for the current requirements")
    p.set_defaults(handler=_client_status)
