"""pyinfra facts only the doctor reads: sudo, the clock, reach to a URL, the run lock, the fabric address.

Each changes nothing on the host (the lock check opens the lock file only when it exists, and never takes it
beyond the instant of `flock -n`).

Example (hgxkit/cli/doctor.py):
    host.get_fact(SudoState, _sudo=False)   # "root", "passwordless" or "denied: sudo: a password is required"
"""

from __future__ import annotations

from pyinfra.api import FactBase, StringCommand

from hgxkit.hostcmd import script
from hgxkit.hostlock import LOCK_FILE, holders_command


class SudoState(FactBase[str]):
    """`root` for root, `passwordless` when `sudo -n true` works, else `denied: <sudo's first line>`."""

    def command(self) -> StringCommand:
        return script(
            'if [ "$(id -u)" = 0 ]; then echo root; elif out=$(sudo -n true 2>&1); then echo passwordless; '
            'else echo "denied: $(printf %s "$out" | head -n1)"; fi'
        )

    @staticmethod
    def default() -> str:
        return "denied: no answer"

    def process(self, output: list[str]) -> str:
        return output[-1].strip() if output else self.default()


class ClockState(FactBase[tuple[float | None, bool | None]]):
    """The node's clock (epoch seconds) and whether systemd says it is NTP-synchronized (None: unknown)."""

    def command(self) -> StringCommand:
        return script("date +%s.%N; timedatectl show -p NTPSynchronized --value 2>/dev/null || true")

    @staticmethod
    def default() -> tuple[float | None, bool | None]:
        return None, None

    def process(self, output: list[str]) -> tuple[float | None, bool | None]:
        try:
            epoch: float | None = float(output[0])
        except (IndexError, ValueError):
            epoch = None
        sync = output[1].strip() if len(output) > 1 else ""
        return epoch, {"yes": True, "no": False}.get(sync)


class UrlStatus(FactBase[tuple[int | None, str]]):
    """The HTTP status `url` answers the node with (any status: the route works), or (None, curl's error)."""

    def command(self, url: str, timeout_s: int = 10) -> StringCommand:
        return script(
            "if command -v curl >/dev/null 2>&1; then "
            "curl -sS -o /dev/null -m {timeout} -w 'http=%{{http_code}}\\n' {url} 2>&1 || true; "
            "else echo 'curl is not installed on the node'; fi",
            url=url,
            timeout=timeout_s,
        )

    @staticmethod
    def default() -> tuple[int | None, str]:
        return None, "no answer"

    def process(self, output: list[str]) -> tuple[int | None, str]:
        codes = [line.strip()[5:] for line in output if line.strip().startswith("http=")]
        if codes and codes[-1].isdigit() and codes[-1] != "000":
            return int(codes[-1]), ""
        errors = [line.strip() for line in output if line.strip() and not line.strip().startswith("http=")]
        return None, errors[-1] if errors else "no answer"


class RunLockHolder(FactBase[str | None]):
    """The process holding hgxkit's run lock (pid, start, command), or None when it is free or absent."""

    def command(self) -> StringCommand:
        return script(
            "if [ -e {lock} ] && ! flock -n {lock} true 2>/dev/null; then echo busy; {holders}; fi",
            lock=LOCK_FILE,
            holders=holders_command(),
        )

    def process(self, output: list[str]) -> str | None:
        if not output or output[0].strip() != "busy":
            return None
        return output[1].strip() if len(output) > 1 else "a process the doctor cannot see (no root)"


class FabricAddresses(FactBase[tuple[list[str], list[str]]]):
    """The addresses `name` resolves to on the node, and the node's own addresses (`ip -o addr`)."""

    def command(self, address: str) -> StringCommand:
        return script(
            "getent ahosts {address} 2>/dev/null | awk '{{print \"resolved \" $1}}' | sort -u; "
            'ip -o addr show 2>/dev/null | awk \'{{split($4, a, "/"); print "own " a[1]}}\'',
            address=address,
        )

    @staticmethod
    def default() -> tuple[list[str], list[str]]:
        return [], []

    def process(self, output: list[str]) -> tuple[list[str], list[str]]:
        pairs = [line.split(" ", 1) for line in output if " " in line]
        return [v for k, v in pairs if k == "resolved"], [v for k, v in pairs if k == "own"]


class DockerMirrors(FactBase[list[str]]):
    """The `registry-mirrors` of /etc/docker/daemon.json (empty without the file or the key)."""

    def command(self) -> StringCommand:
        return script("cat /etc/docker/daemon.json 2>/dev/null || true")

    @staticmethod
    def default() -> list[str]:
        return []

    def process(self, output: list[str]) -> list[str]:
        import json

        try:
            config = json.loads("\n".join(output))
        except ValueError:
            return []
        mirrors = config.get("registry-mirrors") if isinstance(config, dict) else None
        return [str(m) for m in mirrors] if isinstance(mirrors, list) else []
