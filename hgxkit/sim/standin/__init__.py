"""The simulated serving stack: stand-ins for the serving images, the nodes' registry mirror, the real
benchmark-client store, and the router image — everything a simulated node needs to serve a recipe offline.

    image.py         the SGLang stand-in image (`lmsysorg/sglang:dev-dspark` and any other tag)
    sglang/          the stdlib-only SGLang stand-in server that runs inside it
    registry.py      the registry storage every node's mirror serves (published stand-ins, real digests)
    client_store.py  the host's shared read-only store of SGLang's real benchmark client
    router_image.py  the router image (the REAL sglang-router from PyPI)
    node.py          what `hgxkit sim up` prepares for serving and mounts into each node
    cli.py           `hgxkit sim image …` and `hgxkit sim client …`
"""

# The stand-ins there are (image.py builds one per kind); here so `hgxkit sim image build --kind` can list them
# without importing the Docker SDK before a sim command runs.
KINDS = ("sglang", "vllm")
