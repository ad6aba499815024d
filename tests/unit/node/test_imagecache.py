"""The fleet's image cache: which host runs it, its registry configuration, the nodes' mirror list, exposure."""

from __future__ import annotations

import pytest
import yaml

from hgxkit.errors import HgxkitError
from hgxkit.node.imagecache import (
    cache_config,
    cache_exposure_problems,
    cache_host_name,
    fill_source,
    mirror_url,
    upstream_url,
    with_mirror,
)


def test_the_cache_host_is_off_by_default_the_first_host_or_a_named_one() -> None:
    hosts = ["node1", "node2", "node3"]
    assert [cache_host_name(s, hosts) for s in (None, "off", "first", "node3")] == [None, None, "node1", "node3"]
    with pytest.raises(HgxkitError, match="image_cache names 'node9', which is not an inventory host"):
        cache_host_name("node9", hosts)


def test_the_registry_proxies_the_upstream_on_the_bound_address() -> None:
    config = yaml.safe_load(cache_config("10.0.0.5", 5050, "https://registry-1.docker.io", "/srv/cache"))
    assert config["proxy"] == {"remoteurl": "https://registry-1.docker.io"}
    assert config["http"]["addr"] == "10.0.0.5:5050"
    assert config["storage"]["filesystem"]["rootdirectory"] == "/srv/cache"
    assert yaml.safe_load(cache_config("fd00::5", 5050, "http://up:5000"))["http"]["addr"] == "[fd00::5]:5050"
    assert mirror_url("fd00::5", 5050) == "http://[fd00::5]:5050" and mirror_url("node1", 5050) == "http://node1:5050"


def test_the_cache_goes_first_in_registry_mirrors_and_off_takes_it_out_again() -> None:
    config = {"registry-mirrors": ["http://127.0.0.1:15000"], "exec-opts": ["native.cgroupdriver=cgroupfs"]}
    on = with_mirror(config, "http://node1:5050")
    assert on == {
        "exec-opts": ["native.cgroupdriver=cgroupfs"],
        "registry-mirrors": ["http://node1:5050", "http://127.0.0.1:15000"],
    }
    assert with_mirror(on, "http://node1:5050") == on  # a re-run changes nothing
    assert with_mirror(on, None, ["http://node1:5050"]) == config
    assert with_mirror({"registry-mirrors": ["http://node1:5050"]}, None, ["http://node1:5050"]) == {}
    moved = with_mirror(on, "http://node2:5050", ["http://node1:5050"])
    assert moved["registry-mirrors"] == ["http://node2:5050", "http://127.0.0.1:15000"]


def test_exposure_policy_applies_to_the_cache_port() -> None:
    assert [p.code for p in cache_exposure_problems("0.0.0.0", False)] == ["exposure"]
    assert cache_exposure_problems("0.0.0.0", True) == []
    assert [p.code for p in cache_exposure_problems("127.0.0.1", True)] == ["image-cache"]
    assert cache_exposure_problems("10.0.0.5", False) == []
    # The fill's own, non-proxy registry on the cache's storage answers on loopback only, while the fill runs.
    from hgxkit.node.cachefill import FILL_CONFIG

    assert yaml.safe_load(FILL_CONFIG.format(storage='"/s"', port=40000))["http"] == {"addr": "127.0.0.1:40000"}


def test_only_docker_hub_images_are_filled_through_the_mirror() -> None:
    from hgxkit.node.imagecache import hub_repository

    assert hub_repository("lmsysorg/sglang:dev-dspark") == ("lmsysorg/sglang", "dev-dspark")
    assert hub_repository("docker.io/vllm/vllm-openai:v0.11.0") == ("vllm/vllm-openai", "v0.11.0")
    assert hub_repository("ubuntu") == ("library/ubuntu", "latest")
    assert hub_repository("lmsysorg/sglang@sha256:" + "a" * 64) == ("lmsysorg/sglang", "sha256:" + "a" * 64)
    assert hub_repository("nvcr.io/nim/llama:1") is None and hub_repository("localhost:5000/x:1") is None


def test_the_fill_reads_the_bundle_before_the_upstream_and_an_air_gapped_cache_is_a_plain_registry() -> None:
    assert fill_source("/b/image", "https://registry-1.docker.io") == "oci:/b/image"
    assert fill_source("/b/image", "off") == "oci:/b/image"
    assert fill_source(None, "https://registry-1.docker.io/") == "https://registry-1.docker.io"
    with pytest.raises(HgxkitError, match="image_cache_upstream is off and no bundle is set: nothing can fill"):
        fill_source(None, "off")
    assert [upstream_url(s) for s in ("off", "None", "", None, " http://up:5000 ")] == [None] * 4 + ["http://up:5000"]
    assert "proxy" not in yaml.safe_load(cache_config("10.0.0.5", 5050, None, "/srv/cache"))
