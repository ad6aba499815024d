"""Walk a host path one component at a time from `/`, following no symbolic link: what root checks just before
it hands Docker a path that a container may have been able to change (a bind-mount source, an env file).

A container that can write a directory can replace anything below it with a link to `/`; Docker resolves
every bind source again at each start, so the check belongs to the moment of use. Each component is opened
relative to its parent's descriptor with O_NOFOLLOW (as a path only, O_PATH: nothing is read or triggered), so
a link anywhere on the way is seen as a link, never followed. A component that does not exist ends the walk
(Docker makes a missing `-v` source itself, under parents just proved real).

Stdlib only, and a program: the serving role runs this file's text on the node (`python3 -c PROGRAM PATH…`, or
`--stdin` for one path a line, what `docker inspect` lists), which prints one line per refused path and exits
`REFUSED` when any was refused.

Example:
    >>> import os, tempfile
    >>> top = tempfile.mkdtemp()
    >>> os.symlink("/", os.path.join(top, "swapped"))
    >>> symlink_in(top) is None, symlink_in(os.path.join(top, "swapped", "etc")) == f"{top}/swapped is a symbolic link"
    (True, True)
"""

from __future__ import annotations

import os
import stat
import sys

REFUSED = 3  # the exit status of a refusal (any other failure of the program is a refusal too)
# The distribution's own links (/var/run, usrmerge's /bin…), followed when they point where the distribution
# points them: a container reaches them only through a mount of a system directory, which the policy names
# (hgxkit.recipe.danger: host-system-mount).
SYSTEM_LINKS = {
    "/var/run": ("/run", "../run"),
    "/var/lock": ("/run/lock", "../run/lock"),
    "/bin": ("usr/bin", "/usr/bin"),
    "/sbin": ("usr/sbin", "/usr/sbin"),
    "/lib": ("usr/lib", "/usr/lib"),
    "/lib32": ("usr/lib32", "/usr/lib32"),
    "/lib64": ("usr/lib64", "/usr/lib64"),
    "/libx32": ("usr/libx32", "/usr/libx32"),
}


def symlink_in(path: str) -> str | None:
    """Why root may not use `path` (a link, or a non-directory on the way), or None when every component of it
    that exists was reached from `/` with no link followed."""
    if not path.startswith("/"):
        return f"{path} is not an absolute path"
    parts = [part for part in path.split("/") if part not in ("", ".")]
    fd = os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    walked = ""
    try:
        for depth, part in enumerate(parts, 1):
            walked += "/" + part
            try:
                nxt = os.open(part, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except FileNotFoundError:
                return None
            except OSError as err:
                return f"{walked}: {err.strerror}"
            target = _system_target(walked, part, fd)
            os.close(fd)
            fd = nxt
            mode = os.fstat(fd).st_mode
            if stat.S_ISLNK(mode) and target is not None and target.startswith("/"):
                return symlink_in("/".join([target, *parts[depth:]]))
            if stat.S_ISLNK(mode):
                return f"{walked} is a symbolic link"
            if depth < len(parts) and not stat.S_ISDIR(mode):
                return f"{walked} is not a directory"
        return None
    finally:
        os.close(fd)


def _system_target(walked: str, part: str, parent: int) -> str | None:
    """Where the distribution's link `walked` leads (an absolute path), or None when it is no such link or
    points elsewhere."""
    allowed = SYSTEM_LINKS.get(walked)
    if allowed is None:
        return None
    try:
        target = os.readlink(part, dir_fd=parent)
    except OSError:
        return None
    if target not in allowed:
        return None
    return target if target.startswith("/") else os.path.normpath(os.path.join(os.path.dirname(walked), target))


def refusals(paths: list[str]) -> list[str]:
    """One line per path of `paths` that root may not hand Docker, naming it, why, and what to do."""
    lines = []
    for path in paths:
        why = symlink_in(path)
        if why is not None:
            lines.append(
                f"refused: the host path {path} cannot be used: {why} (a container that mounts a directory above "
                "it may have put it there); not started: remove the link, see what that container did, run again"
            )
    return lines


def main(argv: list[str]) -> int:
    """`PATH…`, or `--stdin` (one path a line): print each refusal, exit REFUSED when any (0 otherwise)."""
    paths = [line.strip() for line in sys.stdin if line.strip()] if argv[:1] == ["--stdin"] else argv
    lines = refusals(paths)
    for line in lines:
        print(line)
    return REFUSED if lines else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
