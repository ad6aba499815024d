"""Per-cell telemetry read back from Prometheus: the query commands and their JSON turned into verify's archive texts.

When monitoring is on, verify starts no samplers while a cell runs; afterwards it asks Prometheus (on the
monitoring host, over SSH: Prometheus listens on its loopback by default) for the raw samples of the cell's
window (`samples_command`), and writes what came back in the SAME format as the samplers' files, so
`hgxkit.results.telemetry.summarise_cell_telemetry` reads both alike:

* the serving group's series -> exposition text, one `# hgxkit-scrape <t>` block per scrape (`metrics_text`);
* the DCGM exporter's fields of the group's GPUs -> rows of `nvidia-smi --query-gpu=GPU_QUERY` (`gpu_csv`),
  each GPU_QUERY column from the DCGM field in `DCGM_COLUMNS`.

Example:
    >>> answer = {"status": "success", "data": {"resultType": "matrix", "result": [
    ...     {"metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL", "gpu": "0"}, "values": [[1700000000, "35"]]},
    ...     {"metric": {"__name__": "DCGM_FI_DEV_POWER_USAGE", "gpu": "0"}, "values": [[1700000000, "141.83"]]}]}}
    >>> gpu_csv(parse_matrix(json.dumps(answer)))
    '2023/11/14 22:13:20.000, 0, 141.83, [N/A], [N/A], [N/A], [N/A], 35, [N/A]\\n'
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from datetime import datetime, timezone

from pyinfra.api import StringCommand

from hgxkit.hostcmd import argv
from hgxkit.results.prometheus import format_scrape_series

STEP_S = 1.0  # verify's own samplers' period: the finest padding of a window
# GPU_QUERY's columns after `timestamp,index`, each from the DCGM exporter's field(s); the first present wins
# (the clocks-event bitmask is DCGM_FI_DEV_CLOCKS_EVENT_REASONS from DCGM 3.3 on, _CLOCK_THROTTLE_REASONS before).
DCGM_COLUMNS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("power.draw", ("DCGM_FI_DEV_POWER_USAGE",)),
    ("clocks.sm", ("DCGM_FI_DEV_SM_CLOCK",)),
    ("clocks.mem", ("DCGM_FI_DEV_MEM_CLOCK",)),
    ("memory.used", ("DCGM_FI_DEV_FB_USED",)),
    ("temperature.gpu", ("DCGM_FI_DEV_GPU_TEMP",)),
    ("utilization.gpu", ("DCGM_FI_DEV_GPU_UTIL",)),
    ("clocks_throttle_reasons.active", ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS")),
)
MASK_COLUMN = "clocks_throttle_reasons.active"
NOT_AVAILABLE = "[N/A]"  # what nvidia-smi prints for a field it has no reading of
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


@dataclass(frozen=True)
class Series:
    """One series of a range query: its labels (with `__name__`) and its (unix time, value text) points."""

    labels: tuple[tuple[str, str], ...]
    points: tuple[tuple[float, str], ...]

    @property
    def name(self) -> str:
        return dict(self.labels).get("__name__", "")


def duration_s(text: str) -> float:
    """Seconds of a Prometheus duration ("15s", "1m30s", "500ms"); ValueError naming the text otherwise.

    >>> duration_s("1m30s"), duration_s("500ms")
    (90.0, 0.5)
    """
    parts = _DURATION.findall(str(text).strip())
    if not parts or "".join(n + u for n, u in parts) != str(text).strip():
        raise ValueError(f"prometheus_scrape_interval={text!r} is not a Prometheus duration; write e.g. 15s or 1m")
    return sum(float(n) * _UNIT_S[u] for n, u in parts)


def _matcher(value: str) -> str:
    """A PromQL string literal (backslash and quote escaped)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def server_query(node: str, group: str) -> str:
    """Every series Prometheus scraped from one serving group's /metrics (jobs `serving-<kind>`).

    >>> server_query("node1", "dsv4-0")
    '{job=~"serving-.+",node="node1",group="dsv4-0"}'
    """
    return f'{{job=~"serving-.+",node={_matcher(node)},group={_matcher(group)}}}'


def gpu_query(node: str, gpus: tuple[int, ...]) -> str:
    """The DCGM fields of `DCGM_COLUMNS` for the node's GPUs `gpus` (all of the node's when empty).

    >>> gpu_query("node1", (0, 1)).split(",", 1)[1]
    'job="dcgm",node="node1",gpu=~"0|1"}'
    """
    fields = sorted({f.removeprefix("DCGM_FI_DEV_") for _, names in DCGM_COLUMNS for f in names})
    selector = f'{{__name__=~"DCGM_FI_DEV_({"|".join(fields)})",job="dcgm",node={_matcher(node)}'
    if gpus:
        selector += f',gpu=~"{"|".join(str(int(g)) for g in gpus)}"'
    return selector + "}"


def samples_command(base_url: str, selector: str, start: float, end: float) -> StringCommand:
    """curl of Prometheus' `/api/v1/query` for the raw samples of `selector` in (start, end]: the range selector
    `selector[<end - start>s]` evaluated at `end` answers a matrix of every scrape with its own time (what the
    samplers would have written; a `query_range` step only repeats the last scrape before it, up to one scrape
    interval stale, which cuts a counter's increase short at the window's end). Values are URL-encoded by curl.

    >>> str(samples_command("http://127.0.0.1:9090", "up", 10, 20)).split()[-5:]
    ["'query=up[10s]'", '--data-urlencode', 'time=20.000', '--', 'http://127.0.0.1:9090/api/v1/query']
    """
    seconds = max(math.ceil(end - start), 1)
    return argv(
        "curl",
        "-sS",
        "-m",
        "60",
        "-G",
        "--data-urlencode",
        f"query={selector}[{seconds}s]",
        "--data-urlencode",
        f"time={end:.3f}",
        "--",
        f"{base_url.rstrip('/')}/api/v1/query",
    )


def local_url(bind_address: str, port: int) -> str:
    """Prometheus' API as its own host reaches it (verify asks it there, over SSH).

    >>> local_url("127.0.0.1", 9090), local_url("0.0.0.0", 9090), local_url("fd00::5", 9091)
    ('http://127.0.0.1:9090', 'http://127.0.0.1:9090', 'http://[fd00::5]:9091')
    """
    address = "127.0.0.1" if bind_address in ("0.0.0.0", "::", "") else bind_address
    return f"http://[{address}]:{port}" if ":" in address else f"http://{address}:{port}"


def parse_matrix(text: str, *, source: str = "Prometheus") -> list[Series]:
    """The series of a matrix answer (`samples_command`'s, or `/api/v1/query_range`'s); ValueError in one line
    naming what is wrong."""
    if not text.strip():
        raise ValueError(f"{source}: Prometheus answered nothing (is it running on the monitoring host?)")
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        raise ValueError(f"{source}: Prometheus answered no JSON ({text.strip()[:120]!r})") from None
    if not isinstance(data, dict) or data.get("status") != "success":
        error = data.get("error") if isinstance(data, dict) else None
        raise ValueError(f"{source}: Prometheus answered {error or 'no success'!s}")
    result = (data.get("data") or {}).get("result")
    if (data.get("data") or {}).get("resultType") != "matrix" or not isinstance(result, list):
        raise ValueError(f"{source}: expected a matrix result (a range selector)")
    out = []
    for item in result:
        labels = tuple(sorted((str(k), str(v)) for k, v in (item.get("metric") or {}).items()))
        points = tuple((float(t), str(v)) for t, v in item.get("values") or [])
        out.append(Series(labels, points))
    return out


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def metrics_text(series: list[Series]) -> str:
    """The scrape-series file (`# hgxkit-scrape <t>` before each scrape's exposition text), oldest first."""
    scrapes: dict[float, list[str]] = {}
    for s in series:
        if not s.name:
            continue
        labels = ",".join(f'{k}="{_escape(v)}"' for k, v in s.labels if k != "__name__")
        line = f"{s.name}{{{labels}}}" if labels else s.name
        for t, value in s.points:
            scrapes.setdefault(t, []).append(f"{line} {value}")
    return format_scrape_series([(t, "\n".join(sorted(lines))) for t, lines in sorted(scrapes.items())])


def _smi_timestamp(t: float) -> str:
    # nvidia-smi's format, in UTC (verify runs nvidia-smi with TZ=UTC; parse_gpu_csv reads it as UTC).
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]


def _mask(value: str) -> str:
    try:
        return f"0x{int(float(value)):016x}"
    except (ValueError, OverflowError):
        return NOT_AVAILABLE


def gpu_csv(series: list[Series]) -> str:
    """`nvidia-smi --query-gpu=GPU_QUERY --format=csv,noheader,nounits` rows, one per (scrape time, GPU); a field
    Prometheus has no value of at that time is `[N/A]`, as nvidia-smi prints it."""
    values: dict[tuple[float, int], dict[str, str]] = {}
    for s in series:
        gpu = dict(s.labels).get("gpu", "")
        if not gpu.isdigit():
            continue
        for t, value in s.points:
            values.setdefault((t, int(gpu)), {})[s.name] = value
    rows = []
    for (t, gpu), fields in sorted(values.items()):
        columns = []
        for column, names in DCGM_COLUMNS:
            found = next((fields[n] for n in names if n in fields), None)
            if found is None:
                columns.append(NOT_AVAILABLE)
            else:
                columns.append(_mask(found) if column == MASK_COLUMN else found)
        rows.append(", ".join([_smi_timestamp(t), str(gpu), *columns]) + "\n")
    return "".join(rows)


def query_window(start: float, end: float, interval_s: float) -> tuple[float, float]:
    """The range to read for a cell run from `start` to `end`: one scrape interval (at least 1 s) either side,
    so the summariser finds a scrape before and after the window (counters then cover the whole cell).

    >>> query_window(100.4, 130.2, 1.0)
    (99.0, 132.0)
    """
    pad = max(interval_s, STEP_S)
    return float(math.floor(start - pad)), float(math.ceil(end + pad))
