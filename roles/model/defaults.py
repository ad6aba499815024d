"""Knobs of the model role (inventory data overrides each; `--data key=value` on the command line).

What to fetch comes from the recipe (`model.repo_id`, `revision`, `local_dir`, `allow_patterns`); these knobs
say where from, how, and how carefully.

model_hf_hub_requirement what pip installs there (pinned; changing it re-creates the install).
model_xet_chunk_cache_gb hf_xet's chunk cache limit (HF_XET_CHUNK_CACHE_SIZE_BYTES; 10 as hf_xet's default: it lets
                         a cut Xet download re-use the chunks it already had).
model_xet_shard_cache_gb hf_xet's shard cache limit (HF_XET_SHARD_CACHE_SIZE_LIMIT; 16 as hf_xet's default).
                         When any file to fetch is in Xet storage, both limits (less what the cache already
                         holds) are added to the free-space check on the cache's file system: a disk too
                         small for them is refused before the download, with the path and the need.

Shared knobs read here (hgxkit/knobs.py): recipe (its `model:` section is what is synced), models_dir and
model_dirs_allowed (where model.local_dir may be).
"""

from __future__ import annotations

from dataclasses import dataclass

from hgxkit.knobs import Knobs, declare, shared


@dataclass(frozen=True)
class ModelKnobs(Knobs):
    """The model role's knobs (inventory data or `--data key=value` overrides each)."""

    recipe: str = shared("recipe")
    models_dir: str = shared("models_dir")
    model_dirs_allowed: list[str] = shared("model_dirs_allowed")
    bundle: str | None = shared("bundle")
    bundle_fingerprint: str | None = shared("bundle_fingerprint")
    model_source: str = declare(
        "hub",
        "hub (default: the Hub, or the mirror in hf_endpoint); dir (verify what is already in local_dir, never "
        "download); peer (stream over SSH from model_peer, each file once the peer has verified it; the peer's file "
        "list is taken as it is); fleet (every host with model_source fleet, in inventory order, forms a tree: the "
        "first downloads from the Hub or mirror, each other host streams every file from its parent as soon as the "
        "parent verified it and checks it against the Hub's hashes itself, so the Hub serves each file once and the "
        "fleet finishes about when the first host does).",
    )
    model_peer: str | None = declare(None, "inventory name of the host to copy from (model_source: peer).")
    model_peer_address: str | None = shared("model_peer_address")
    model_peer_user: str = declare("root", "the SSH user on the peer (its authorized_keys gets this host's peer key).")
    model_peer_key: str = declare(
        "/root/.ssh/hgxkit_model_peer",
        "private key generated on this host for peer copies (its .pub is authorized on the peer, comment "
        '`hgxkit-model-peer@<host>`; remove that line from the peer to revoke it). The line is `restrict,from="<this '
        'host\'s addresses>",command="<downloader> peer-serve ..."`: the key can only read the peer\'s verified model '
        "files and sync state, nothing else.",
    )
    model_peer_wait_s: float = declare(
        3600, "how long a peer or fleet copy waits while its parent verifies no new file."
    )
    hf_endpoint: str | None = declare(
        None,
        "a Hub mirror (HF_ENDPOINT), e.g. http://mirror.internal:8080; None: huggingface.co.",
    )
    hf_token_env: str = declare(
        "HF_TOKEN",
        "controller environment variable holding the token (HF_TOKEN). It reaches the host on stdin into a root-only "
        "file that the downloader deletes on start: never on a command line, in the environment, a log, the manifest "
        "or the record.",
    )
    hf_token_file: str | None = declare(
        None,
        "or: a file on the controller holding the token (wins over hf_token_env).",
    )
    model_venv: str = declare(
        "/opt/hgxkit/hf-venv",
        "the dedicated virtualenv huggingface_hub (with hf_xet) is installed in; never system Python.",
    )
    model_hf_hub_requirement: str = declare(
        "huggingface_hub[hf_xet]==2.4.0", "what pip installs there (pinned; changing it re-creates the install)."
    )
    model_lib_dir: str = declare(
        "/usr/local/lib/hgxkit/model",
        "where the downloader (hgxkit/model/fetch.py + core.py, as hgxkit_fetch.py and model_core.py) is uploaded.",
    )
    model_state_dir: str = declare(
        "/var/lib/hgxkit/model",
        "the record `<name>.json` (commit, files, bytes; the verify role reads it), the spec, progress and result "
        "files, and the peer known_hosts.",
    )
    model_disk_margin_pct: float = declare(
        2, "free space needed beyond the bytes still to fetch, in percent of them ..."
    )
    model_disk_margin_gb: float = declare(5, "... plus this floor (GB); a shortfall fails before anything downloads.")
    model_full_rehash: bool = declare(
        False,
        "true: re-hash every file (sha256) instead of trusting the manifest's size+mtime check.",
    )
    model_download_workers: int = declare(
        8,
        "files fetched at once, one connection each, largest first (8 fills a 10-25 Gb/s link from the Hub's CDN; "
        "each file is hashed as its bytes arrive, so there is no second read, and a cut transfer resumes at its last "
        "byte: HTTP Range, or an offset over SSH).",
    )
    model_fleet_fanout: int = declare(
        2,
        "fleet: hosts each host serves (2: a binary tree; 1: a chain). More spreads the bytes over more links; fewer "
        "keeps each parent's uplink for fewer children.",
    )
    model_fleet_port: int = declare(
        8097,
        "fleet: the port a host serves its verified files on to the hosts below it (HTTP on its fabric_address, else "
        "model_peer_address; sendfile, no encryption cost per byte), while its sync runs and until they have their "
        "copies. Each request is signed (HMAC-SHA256 over method, path, Range, time and a nonce) with a secret the "
        "server makes per run, readable by root only, which the hosts below read over SSH with their peer key; "
        "anything unsigned gets 403 and does not keep the server alive. Connections time out after 10 s idle, and at "
        "most 32 (or model_download_workers + 2 per host below, when more) are served at once. A host that cannot "
        "reach it (or a parent not running its sync) copies over SSH.",
    )
    model_fleet_bind_any: bool = declare(
        False,
        "fleet: true lets a host with neither fabric_address nor model_peer_address (or one set to 0.0.0.0) serve on "
        "every address; false (default): such a host does not serve over HTTP, and the hosts below copy over SSH.",
    )
    model_xet: bool = declare(
        True,
        "true: files the Hub keeps in Xet storage go through hf_xet (chunked, parallel, deduplicated; each is hashed "
        "right after it lands, from the page cache); false: plain HTTP for them too (hashed as they stream, resumable"
        " mid-file).",
    )
    model_xet_high_performance: bool = declare(
        True,
        "true: HF_XET_HIGH_PERFORMANCE=1 (more concurrent range fetches and larger buffers: what an HGX node's link "
        "and RAM are for).",
    )
    model_xet_cache_dir: str | None = declare(
        None,
        "where hf_xet keeps its chunk and shard caches (HF_XET_CACHE). None: under local_dir "
        "(.cache/huggingface/xet), on the models disk, never on the root file system.",
    )
    model_xet_chunk_cache_gb: float = declare(
        10,
        "hf_xet's chunk cache limit (HF_XET_CHUNK_CACHE_SIZE_BYTES; 10 as hf_xet's default: it lets a cut Xet "
        "download re-use the chunks it already had).",
    )
    model_xet_shard_cache_gb: float = declare(
        16,
        "hf_xet's shard cache limit (HF_XET_SHARD_CACHE_SIZE_LIMIT; 16 as hf_xet's default). When any file to fetch "
        "is in Xet storage, both limits (less what the cache already holds) are added to the free-space check on "
        "the cache's file system: a disk too small for them is refused before the download, with the path and the "
        "need.",
    )
    model_retries: int = declare(5, "retries of a network failure (exponential backoff from model_retry_backoff_s).")
    model_retry_backoff_s: float = declare(2, "first backoff delay; doubles per retry (capped at 60 s).")
    model_corrupt_refetch: int = declare(
        2,
        "times a file that fails its hash check is fetched again before the sync fails.",
    )
    model_wait_timeout_s: float = declare(
        21600,
        "how long the role waits for the download; after that it stops waiting (the download goes on in its unit) and"
        " a re-run attaches to it.",
    )
    model_poll_interval_s: float = declare(2, "how often the role reads the download's progress file.")
    model_progress_every_s: float = declare(
        10,
        "how often a progress line (bytes done/total, rate, ETA) is printed while waiting.",
    )


DEFAULTS = ModelKnobs.defaults()
__doc__ = f"{__doc__}\n{ModelKnobs.table()}\n"


TOKEN_DIR = "/run/hgxkit/model"  # tmpfs, mode 0700: the token file lives here until the downloader starts
