"""A file on its way in: the partial file that is hashed as it is written and resumed mid-file."""

from __future__ import annotations

import os
from collections.abc import Callable

from hgxkit.model import core

from .errors import FetchError


class Partial:
    """A file on its way in: `<local_dir>/.cache/hgxkit/partial/<content id>`, hashed as it is written (no
    second read). It outlives a killed run: the next one hashes the bytes already there once and asks the
    source for the rest (HTTP Range, or an offset to the parent's `peer-serve tail`), so a cut transfer
    resumes mid-file."""

    def __init__(self, local_dir: str, meta: core.FileMeta) -> None:
        self.meta = meta
        self.local_dir = local_dir
        self.rel = f"{core.PARTIAL_DIR}/{core.content_key(meta)}"
        self.path = os.path.join(local_dir, self.rel)  # for messages: every access goes through a directory fd
        self.hash = core.ContentHash(meta)
        self.resumed_at = 0
        self._fd = -1

    @property
    def offset(self) -> int:
        return self.hash.size

    def open(self) -> None:
        """Open for writing at the end of what is there (hashing that once, on the first open of this run). A
        link, FIFO or device planted at the partial's name is removed by name, never opened."""
        if self._fd >= 0:
            return
        with core.parent_of(self.local_dir, self.rel, create=True) as (dfd, name):
            try:
                fd = core.open_regular(dfd, name, os.O_RDWR)
            except core.NotRegular:
                fd = core.create_new(dfd, name)
            except FileNotFoundError:
                fd = core.create_new(dfd, name)
        have = os.fstat(fd).st_size
        if self.offset == 0 and 0 < have <= self.meta.size:
            core.hash_into(fd, self.hash, have)
            self.resumed_at = self.offset
        self._fd = fd
        os.ftruncate(self._fd, self.offset)  # bytes past what was hashed (or a too-long file) go
        os.lseek(self._fd, self.offset, os.SEEK_SET)

    def restart(self) -> None:
        """From byte 0 again (the source ignored the Range, or sent another file)."""
        self.open()
        os.ftruncate(self._fd, 0)
        os.lseek(self._fd, 0, os.SEEK_SET)
        self.hash = core.ContentHash(self.meta)

    def write(self, data: memoryview) -> None:
        self.hash.update(data)
        try:
            while data:
                data = data[os.write(self._fd, data) :]
        except OSError as err:  # not the network's fault: no retry
            raise FetchError(f"cannot write {self.path}: {err.strerror}: free space or fix the disk") from None

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def discard(self) -> None:
        self.close()
        core.remove_under(self.local_dir, self.rel)
        self.hash = core.ContentHash(self.meta)

    def install(self, name: str) -> None:
        """Move the verified file to `name` under local_dir (a rename through directory fds, which replaces
        whatever was planted there), and prove that what landed is the very file written and hashed."""
        self.open()
        st = os.fstat(self._fd)
        self.close()
        landed = core.move_under(self.local_dir, self.rel, name)
        if landed is None or (landed.st_dev, landed.st_ino) != (st.st_dev, st.st_ino):
            raise FetchError(f"{name}: the partial file was swapped while it downloaded; not installed: re-run")


def pump(read_into: Callable[[memoryview], int | None], part: Partial, nbytes: int, what: str) -> None:
    """Move `nbytes` from `read_into` into `part` through one reused buffer (the loop runs once per MB)."""
    buf = bytearray(core.BUFFER)
    view = memoryview(buf)
    left = nbytes
    while left > 0:
        n = read_into(view[: min(core.BUFFER, left)])
        if not n:
            raise FetchError(f"{what}: the stream ended at byte {part.offset} of {part.meta.size}", transient=True)
        part.write(view[:n])
        left -= n
