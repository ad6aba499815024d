"""Knobs of the model role (inventory data overrides each; `--data key=value` on the command line).

What to fetch comes from the recipe (`model.repo_id`, `revision`, `local_dir`, `allow_patterns`); these knobs
say where from, how, and how carefully.

model_source             hub (default: the Hub, or the mirror in hf_endpoint); dir (verify what is already in
                         local_dir, never download); peer (rsync over SSH from model_peer, which must hold a
                         verified copy: a fleet downloads from outside once).
model_peer               inventory name of the host to copy from (model_source: peer).
model_peer_address       set on a host: the address other hosts reach it at for peer copies (default: its
                         ssh_hostname, else its inventory name).
model_peer_user          the SSH user on the peer (its authorized_keys gets this host's peer key).
model_peer_key           private key generated on this host for peer copies (its .pub is authorized on the peer,
                         comment `hgxkit-model-peer@<host>`; remove that line from the peer to revoke it).
model_peer_wait_s        how long a peer copy waits for the peer's own sync to finish.
hf_endpoint              a Hub mirror (HF_ENDPOINT), e.g. http://mirror.internal:8080; None: huggingface.co.
hf_token_env             controller environment variable holding the token (HF_TOKEN). It reaches the host on
                         stdin into a root-only file that the downloader deletes on start: never on a command
                         line, in the environment, a log, the manifest or the record.
hf_token_file            or: a file on the controller holding the token (wins over hf_token_env).
model_venv               the dedicated virtualenv huggingface_hub (with hf_xet) is installed in; never system Python.
model_hf_hub_requirement what pip installs there (pinned; changing it re-creates the install).
model_lib_dir            where the downloader (hgxkit/model/fetch.py + core.py, as hgxkit_fetch.py and
                         model_core.py) is uploaded.
model_state_dir          the record `<name>.json` (commit, files, bytes; the verify role reads it), the spec,
                         progress and result files, and the peer known_hosts.
model_disk_margin_pct    free space needed beyond the bytes still to fetch, in percent of them ...
model_disk_margin_gb     ... plus this floor (GB); a shortfall fails before anything downloads.
model_full_rehash        true: re-hash every file (sha256) instead of trusting the manifest's size+mtime check.
model_download_workers   files fetched in parallel.
model_retries            retries of a network failure (exponential backoff from model_retry_backoff_s).
model_retry_backoff_s    first backoff delay; doubles per retry (capped at 60 s).
model_corrupt_refetch    times a file that fails its hash check is fetched again before the sync fails.
model_wait_timeout_s     how long the role waits for the download; after that it stops waiting (the download
                         goes on in its unit) and a re-run attaches to it.
model_poll_interval_s    how often the role reads the download's progress file.
model_progress_every_s   how often a progress line (bytes done/total, rate, ETA) is printed while waiting.

Shared knobs read here (hgxkit/knobs.py): recipe (its `model:` section is what is synced), models_dir and
model_dirs_allowed (where model.local_dir may be).
"""

from hgxkit.knobs import shared_defaults

DEFAULTS = {
    **shared_defaults("recipe", "models_dir", "model_dirs_allowed"),
    "model_source": "hub",
    "model_peer": None,
    "model_peer_address": None,
    "model_peer_user": "root",
    "model_peer_key": "/root/.ssh/hgxkit_model_peer",
    "model_peer_wait_s": 3600,
    "hf_endpoint": None,
    "hf_token_env": "HF_TOKEN",
    "hf_token_file": None,
    "model_venv": "/opt/hgxkit/hf-venv",
    "model_hf_hub_requirement": "huggingface_hub[hf_xet]==2.4.0",
    "model_lib_dir": "/usr/local/lib/hgxkit/model",
    "model_state_dir": "/var/lib/hgxkit/model",
    "model_disk_margin_pct": 2,
    "model_disk_margin_gb": 5,
    "model_full_rehash": False,
    "model_download_workers": 8,
    "model_retries": 5,
    "model_retry_backoff_s": 2,
    "model_corrupt_refetch": 2,
    "model_wait_timeout_s": 6 * 3600,
    "model_poll_interval_s": 2,
    "model_progress_every_s": 10,
}

TOKEN_DIR = "/run/hgxkit/model"  # tmpfs, mode 0700: the token file lives here until the downloader starts
