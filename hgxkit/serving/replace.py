"""Replacing one serving group, as a script the serving role runs on the node in a systemd transient unit:
stop the old container and keep it aside, start the new spec, wait for health, then keep the new one or put
the old one back. Run by systemd, it finishes (or rolls back) even when SSH drops or the controller is
killed; the next run attaches to it. `recovery_script` finishes what a unit that died left behind (a node
rebooted mid-replace): the group ends on the old or the new spec, never neither.

Every container is touched only when it carries hgxkit's `hgxkit.serve` label (`ours`), never by name alone.

No container starts on a host path a container could have changed: the new spec's start script first walks every
host path of its argv with no symlink followed (`check-mounts.sh`, hgxkit.nofollow), before the old container is
stopped and again just before `docker run`; an old container is started again only when the bind sources Docker
recorded for it pass the same walk (`mounts_ok`). A refusal keeps the old container serving, or leaves it
stopped, and says why in the status. A restart by Docker itself (a restart policy, dockerd restarting) resolves
the sources with no such check: the recipe policy (hgxkit.recipe.danger) keeps every source out of the
container's reach (none inside another read-write mount, none above a models root), and this is the second line.

Example:
    >>> text = replace_script(name="m-0", old_id="", health_url="http://127.0.0.1:5000/health", timeout_s=60,
    ...                       interval_s=5, workdir="/var/lib/hgxkit/serve/replace/m-0")
    >>> "docker-run.sh" in text and "hgxkit-previous" in text
    True
"""

from __future__ import annotations

from pathlib import Path

from pyinfra.api import StringCommand

from hgxkit import nofollow
from hgxkit.hostcmd import argv, script, text
from hgxkit.serving.containers import MANAGED_LABEL

PREVIOUS_SUFFIX = "-hgxkit-previous"
UNIT_PREFIX = "hgxkit-serve-"
CHECK_SCRIPT = "check-mounts.sh"  # in the group's state folder: the walk of the new spec's host paths
CHECK_REFUSED = nofollow.REFUSED
_NOFOLLOW = Path(nofollow.__file__).read_text()
_BIND_SOURCES = '{{range .Mounts}}{{if eq .Type "bind"}}{{println .Source}}{{end}}{{end}}'
# Shell functions every script uses: a container's hgxkit label (empty when absent or not ours), state files,
# and the walk of the bind sources Docker recorded for a container (prints the refusals; false when any).
_PRELUDE = (
    """\
#!/bin/sh
set -u
ours() { [ "$(docker inspect -f '{{index .Config.Labels "LABEL"}}' "$1" 2>/dev/null)" = 1 ]; }
say() { printf '%s\\n' "$*" > progress.tmp && mv -f progress.tmp progress; }
finish() { printf '%s\\n' "$*" > status.tmp && mv -f status.tmp status; exit 0; }
""".replace("LABEL", MANAGED_LABEL)
    + text(
        script(
            'mounts_ok() {{ docker inspect -f {fmt} "$1" 2>/dev/null | python3 -c {program} --stdin; }}',
            fmt=_BIND_SOURCES,
            program=_NOFOLLOW,
        )
    )
    + "\n"
)


def mounts_check_script(paths: list[str]) -> str:
    """`check-mounts.sh`: walk each of `paths` (the host paths of a spec's argv, hgxkit.recipe.danger.host_paths)
    with no symlink followed; prints each refusal (`refused: …`) and exits CHECK_REFUSED when any."""
    lines = [
        "command -v python3 >/dev/null 2>&1 || { echo 'refused: python3 is missing, and root walks every mount "
        f"source with it before a container starts: install python3'; exit {CHECK_REFUSED}; }}",
        text(argv("exec", "python3", "-c", _NOFOLLOW, *paths)),
    ]
    return "\n".join(lines) + "\n"


def start_preamble(folder: str) -> str:
    """The first line of `docker-run.sh`: the walk again, at the moment of use, stopping the start when refused."""
    return text(script("sh {check} || exit {code}", check=f"{folder}/{CHECK_SCRIPT}", code=CHECK_REFUSED)) + "\n"


def unit_name(container: str) -> str:
    """The systemd unit that replaces the group whose container is `container` (a valid unit name)."""
    safe = "".join(c if c.isalnum() or c in "_.-" else "_" for c in container)
    return f"{UNIT_PREFIX}{safe}"


def poll_command(unit: str, workdir: str) -> StringCommand:
    """What the controller runs to follow a replace unit: `<status>#<progress>#<unit state>` (status and progress
    files of `workdir`). The unit's state is read BEFORE its status: the unit writes its status before it
    exits, so a unit seen stopped has its status there already (read the other way round, a unit that ended
    between the two reads looked like one that had stopped without a result)."""
    return script(
        "active=$(systemctl is-active {unit} 2>/dev/null || true); cat {status} 2>/dev/null; echo '#'; "
        "cat {progress} 2>/dev/null; echo '#'; echo \"$active\"",
        unit=unit,
        status=f"{workdir}/status",
        progress=f"{workdir}/progress",
    )


def replace_script(
    *, name: str, old_id: str, health_url: str, timeout_s: float, interval_s: float, workdir: str
) -> str:
    """The unit's script. `old_id` is the running container being replaced ("" when the group is new); the new
    spec's `docker run` is `docker-run.sh` in `workdir` (root-only; it may hold secrets and is deleted once
    run). It writes `progress` lines and a final `status`: `ok`, or `failed: <why>` (logs in failed.log)."""
    lines = [
        _PRELUDE,
        text(script("cd {dir} || exit 1", dir=workdir)),
        text(
            script(
                "name={name}; prev={prev}; old={old}; url={url}",
                name=name,
                prev=name + PREVIOUS_SUFFIX,
                old=old_id,
                url=health_url,
            )
        ),
        f"timeout={int(timeout_s)}; interval={max(int(interval_s), 1)}",
        'rm -f status; say "starting"',
        # A host path of the new spec that a container replaced with a link: refused before the old one stops.
        text(
            script(
                "if ! sh ./{check} > refused.log 2>&1; then rm -f docker-run.sh secrets.env; "
                'finish "failed: $(head -n 1 refused.log); the old container serves on"; fi',
                check=CHECK_SCRIPT,
            )
        ),
        # The copy kept aside by an earlier replace of this group is only ever ours.
        'if docker inspect "$prev" >/dev/null 2>&1; then ours "$prev" && docker rm -f "$prev" >/dev/null; fi',
        'if [ -n "$old" ]; then docker stop "$old" >/dev/null 2>&1; docker rename "$old" "$prev" || { '
        'mounts_ok "$old" > refused.log || finish "failed: could not set the old container aside; $(head -n 1 '
        'refused.log)"; docker start "$old" >/dev/null; finish "failed: could not set the old container aside; it '
        'serves on"; }; fi',
        "sh ./docker-run.sh > start.log 2>&1; started=$?; rm -f docker-run.sh secrets.env",
        text(script('code=; why=; [ "$started" = {n} ] && why=$(grep -m 1 "^refused:" start.log)', n=CHECK_REFUSED)),
        "start=$(date +%s)",
        'while [ -z "$why" ]; do',
        '  code=$(curl -s -m 30 -o /dev/null -w "%{http_code}" "$url" 2>/dev/null)',
        '  [ "$code" = 200 ] && break',
        "  state=$(docker inspect -f '{{.State.Running}} {{.RestartCount}}' \"$name\" 2>/dev/null || echo missing)",
        '  case "$state" in "true 0") ;; *) why="exited before it became healthy"; break ;; esac',
        "  elapsed=$(( $(date +%s) - start ))",
        '  if [ "$elapsed" -gt "$timeout" ]; then why="did not answer its health check within ${timeout} s"; break; fi',
        '  say "waiting for health, ${elapsed} s; last log: $(docker logs --tail 1 "$name" 2>&1 | tail -c 160)"',
        '  sleep "$interval"',
        "done",
        'if [ "$code" = 200 ]; then',
        '  if docker inspect "$prev" >/dev/null 2>&1; then ours "$prev" && docker rm -f "$prev" >/dev/null; fi',
        '  finish "ok"',
        "fi",
        '{ docker logs --tail 20 "$name" 2>&1 || cat start.log; } > failed.log',
        'ours "$name" && docker rm -f "$name" >/dev/null 2>&1',
        'if [ -n "$old" ] && ours "$prev"; then docker rename "$prev" "$name" || finish "failed: $why"; '
        'mounts_ok "$name" > refused.log || finish "failed: $why; the previous container was not restarted: '
        '$(head -n 1 refused.log)"; docker start "$name" >/dev/null; '
        'finish "failed: $why; the previous container was restarted"; fi',
        'finish "failed: $why"',
    ]
    return "\n".join(lines) + "\n"


def recovery_script(*, name: str, health_url: str) -> str:
    """Finish a replace whose unit died (no unit runs, `<name>-hgxkit-previous` is still there): keep the new
    container when it answers its health check now, else put the previous one back. Prints what it did."""
    lines = [
        _PRELUDE,
        text(script("name={name}; prev={prev}; url={url}", name=name, prev=name + PREVIOUS_SUFFIX, url=health_url)),
        'ours "$prev" || exit 0',
        'code=$(curl -s -m 30 -o /dev/null -w "%{http_code}" "$url" 2>/dev/null)',
        'if [ "$code" = 200 ] && ours "$name"; then docker rm -f "$prev" >/dev/null; '
        'echo "kept the new $name (healthy); removed the copy kept aside"; exit 0; fi',
        'if docker inspect "$name" >/dev/null 2>&1; then',
        '  ours "$name" || { echo "$name is not a container hgxkit made; leaving both as they are"; exit 1; }',
        '  docker rm -f "$name" >/dev/null',
        "fi",
        'docker rename "$prev" "$name" || exit 1',
        'mounts_ok "$name" || { echo "left the previous $name stopped"; exit 1; }',
        'docker start "$name" >/dev/null && echo "put the previous $name back (the interrupted replace had not '
        'become healthy)"',
    ]
    return "\n".join(lines) + "\n"
