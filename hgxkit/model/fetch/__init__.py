"""hgxkit_fetch: sync one model into a directory on this host (shipped to the host and started by roles/model).

Runs in the role's virtualenv (stdlib + huggingface_hub, which brings hf_xet); `hgxkit/model/core.py` is
uploaded next to it as `model_core.py`. The modules of this package, one job each, are built into that one
file by hgxkit/model/nodeprogram.py (`python -m hgxkit.model.fetch` runs them from the repository as they are).
The role starts `run` in a systemd transient unit, so an SSH drop or a pyinfra timeout cannot kill it, and
polls the progress file it writes. `status` is the role's metadata-only check (no hashing, no download). Both
leave `<state_dir>/<name>.stamp` when they find the copy complete (core.write_stamp: what the node's shell checks
first, hgxkit.model.facts); `run` removes it before anything else.

    hgxkit_fetch.py status --spec SPEC.json [--token-stdin]     # one JSON line: complete|incomplete|running|error
    hgxkit_fetch.py run --spec SPEC.json [--token-file F] [--run-id ID]
    hgxkit_fetch.py peer-serve --dir D --state-dir S state|serve|tail OFFSET NAME   # a peer key's forced command

A sync: resolve the revision to a commit; list the files matching the allow patterns with their sizes and
hashes (every name must stay inside local_dir); check free space (files still to fetch plus a margin, plus
hf_xet's caches when the Hub keeps files in Xet storage); fetch what is missing, `workers` files at once, from
the Hub or a mirror, or over SSH from a parent host (a peer, or the host above this one in a fleet tree) as
soon as the parent has verified each file. Each file is hashed as its bytes arrive (size; sha256 of LFS
files, git blob id of the others) into a partial file that a later run resumes mid-file, and moved into
place only when it matches; a corrupted one is fetched again alone. `.hgxkit-manifest.json` is written only
when all files verified, and the record `<state_dir>/<name>.json`; while it runs, the journal
`.cache/hgxkit/verified.json` says which files are verified (what a later run, and a host below, go by).
The token is read from a root-only file that is deleted at once; it never reaches the command line, the
environment, a log or the manifest. A container may have local_dir mounted read-write while this runs as root:
every file below local_dir is reached from a directory descriptor with no symlink followed (core.parent_of).
"""
