"""The model sync: a pinned, resumable, verified copy of a recipe's model on a node.

core.py         stdlib-only core shared by the role and the host program: the `Spec` the role builds and the
                program reads, file selection, hashing, the manifest, progress lines, the free-space check
fetch/          the program the model role ships to the node and starts in a systemd unit (huggingface_hub),
                one module per job
nodeprogram.py  builds fetch/ into the one file the node gets (hgxkit_fetch.py), the same bytes from the same
                sources
facts.py        the role's metadata-only status check (a pyinfra fact running `hgxkit_fetch.py status`)
"""
