"""`hgxkit sim image …` and `hgxkit sim client …`: the stand-in images (SGLang, vLLM) and the benchmark-client store.

Examples:
    hgxkit sim image build                                   # lmsysorg/sglang:dev-dspark, published to the mirror
    hgxkit sim image build --tag lmsysorg/sglang:v0.5.23 --variant rebuilt-1   # another content, another digest
    hgxkit sim image build --tag vllm/vllm-openai:v0.33.0    # the vLLM stand-in (kind inferred from the name)
    hgxkit sim image build --tag myorg/vllm-custom:1 --kind vllm               # any reference, kind given
    hgxkit sim image build --tag lmsysorg/sglang:v0.5.12-cu130 --other-versions   # takes flags 0.5.23 lacks
    hgxkit sim image build --router                          # lmsysorg/sgl-model-gateway:latest (real sglang-router)
    hgxkit sim image build --router vllm                     # vllm/vllm-router:v0.1.17 (real vllm-router)
    hgxkit sim image build --dcgm-exporter                   # the DCGM exporter stand-in (hgxkit-sim/dcgm-exporter)
    hgxkit sim image status                                  # tags and digests the nodes' mirror serves
    hgxkit sim client install                                # SGLang's and vLLM's real benchmark clients, once per host
    hgxkit sim client install --client sglang                # SGLang's alone (what `make demo` needs)
    hgxkit sim client status                                 # which clients the store holds
"""

from __future__ import annotations

import argparse
import json

from hgxkit.cli.args import json_option, package_schema
from hgxkit.errors import HgxkitError
from hgxkit.sim.standin import KINDS

IMAGE_STATUS_SCHEMA_VERSION = 1


def _image_build(args: argparse.Namespace) -> int:
    from hgxkit.sim import nodes
    from hgxkit.sim.standin import image as serving
    from hgxkit.sim.standin import registry as serving_registry

    if args.router:  # a router image: the router from PyPI (hgxkit/sim/standin/router_image.py)
        from hgxkit.sim.standin import router_image

        for tag, digest in router_image.ensure_published(nodes.client(), args.router).items():
            print(f"{tag}\t{router_image.image_tag(args.router)}\t{digest}")
        return 0
    if args.dcgm_exporter:  # the monitoring role's exporter (hgxkit/sim/standin/dcgm)
        from hgxkit.sim.standin.dcgm import image as dcgm_image

        for tag, digest in dcgm_image.ensure_published(nodes.client()).items():
            print(f"{tag}\t{dcgm_image.image_tag()}\t{digest}")
        return 0
    tags = args.tag or list(serving.VLLM_DEFAULT_TAGS if args.kind == "vllm" else serving.DEFAULT_TAGS)
    for t in tags:
        serving.check_tag(t)  # before any Docker call
    kind = serving.tags_kind(tags, args.kind)
    c = nodes.client()
    local = serving.ensure_image(c, tags, variant=args.variant, kind=kind, other_versions=args.other_versions)
    digests = serving_registry.publish(c, tags) if args.publish else {}
    for t in tags:
        print(f"{t}\t{local}\t{digests.get(serving.check_tag(t), 'not published')}")
    return 0


def _image_status(args: argparse.Namespace) -> int:
    from hgxkit.sim.standin import registry as serving_registry

    found = serving_registry.published()
    if args.json:
        print(json.dumps({"schema_version": IMAGE_STATUS_SCHEMA_VERSION, "images": found}, indent=2))
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
    clients = tuple(args.client or serving_client.CLIENTS)
    r = serving_client.ensure_installed(store, clients=clients)
    state = f"installed in {r.seconds:.0f} s" if r.installed else "already installed (same requirements)"
    print(f"{' and '.join(clients)} benchmark client(s) in {r.path}: {state}")
    return 0


def _client_status(args: argparse.Namespace) -> int:
    from hgxkit.sim.standin import client_store as serving_client

    store = serving_client.store_path()
    found = serving_client.installed_clients(store)
    if not serving_client.is_installed(store):
        have = f"it holds {', '.join(found)} for other requirements" if found else "it holds no client"
        raise HgxkitError(f"the client store {store} is not up to date ({have}): run `hgxkit sim client install`")
    print(f"{' and '.join(found)} benchmark clients in {store} (requirements {serving_client.requirements_hash()})")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add `image` and `client` to the `hgxkit sim` sub-commands (importing nothing outside the standard library:
    the handlers import what they need, after the sim extra is checked)."""
    img = sub.add_parser("image", help="the stand-in images (SGLang, vLLM) and the nodes' registry mirror")
    isub = img.add_subparsers(dest="image_command", metavar="SUBCOMMAND")
    isub.required = True
    p = isub.add_parser("build", help="build the stand-in (when changed), tag it, publish it to the mirror")
    p.add_argument(
        "--tag",
        action="append",
        help="image reference (repeatable; default lmsysorg/sglang:dev-dspark, or vllm/vllm-openai:latest with "
        "--kind vllm)",
    )
    p.add_argument(
        "--kind",
        choices=KINDS,
        default=None,
        help="which stand-in (default: inferred from the reference: lmsysorg/sglang:* or vllm/vllm-openai:*)",
    )
    p.add_argument("--variant", default="", help="extra content, so a rebuild gets another digest")
    p.add_argument(
        "--other-versions",
        action="store_true",
        help="a tag of another engine version than the stand-in's option table (lmsysorg/sglang:v0.5.12-cu130) "
        "gets a stand-in that takes the flags the table cannot read unread, as that version may (default: every "
        "tag parses as the table's version)",
    )
    p.add_argument("--no-publish", dest="publish", action="store_false", help="build and tag only")
    p.add_argument(
        "--router",
        nargs="?",
        const="sglang",
        choices=KINDS,
        help="build and publish the router image of this kind's prefill/decode split instead (default sglang: "
        "sglang-router; vllm: vllm-router; from PyPI)",
    )
    p.add_argument(
        "--dcgm-exporter", action="store_true", help="build and publish the DCGM exporter stand-in instead (monitoring)"
    )
    p.set_defaults(handler=_image_build)
    p = isub.add_parser("status", help="tags and digests the nodes' registry mirror serves")
    json_option(p, lambda: package_schema("hgxkit.sim", "image-status"), "the mirror's tags and digests")
    p.set_defaults(handler=_image_status)

    cli = sub.add_parser("client", help="SGLang's and vLLM's real benchmark clients, shared read-only by the nodes")
    csub = cli.add_subparsers(dest="client_command", metavar="SUBCOMMAND")
    csub.required = True
    p = csub.add_parser("install", help="install both once per host (7.2 GB; skipped when up to date)")
    p.add_argument("--store", default=None, help="default $HGXKIT_SIM_CLIENT_STORE or /var/lib/hgxkit/sglang-client")
    p.add_argument(
        "--client",
        action="append",
        choices=("sglang", "vllm"),
        help="only this client's layer (repeatable; vllm's needs sglang's, which it then installs too); default both",
    )
    p.set_defaults(handler=_client_install)
    p = csub.add_parser("status", help="exit 0 when the store holds both clients for the current requirements")
    p.set_defaults(handler=_client_status)
