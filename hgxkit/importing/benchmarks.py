"""A post's benchmark commands and printed results as the recipe's `matrix` and `reference`.

Each client command that targets the imported server (its `--model` is a name the server answers to) is a
cell; a printed block belongs to the client command before it in the same file. A script's log gives cells
itself (`--- marlin input=5000 conc=1 prompts=10 ---`). Where a post compares several setups (log
instances, table columns), the one whose label is a setting of the imported server is taken (`marlin` for
`--moe-runner-backend marlin`). A table's numbers join the cell their row names; when a table and a block
give the same number, the more precise is kept if they agree, and a disagreement is a note. The client
commands are a source format of a post (`BENCH_COMMANDS`, see `formats`); the printed numbers are read by
`result_blocks`.

Example:
    >>> from hgxkit.importing.commands import simple_commands
    >>> from hgxkit.importing.post import find_commands, read_post
    >>> post = read_post("p.txt", "vllm bench serve --model m --num-prompts 5 --max-concurrency 2\\n"
    ...     "============ Serving Benchmark Result ============\\nMean TTFT (ms): 12.5\\n" + "=" * 50)
    >>> found = benchmarks([post], bench_commands(simple_commands(find_commands(post))), served={"m"}, values=set(),
    ...                    ports=set())
    >>> [(c.id, c.num_prompts) for c in found.matrix.cells()], found.reference.cells[0].ttft_mean_ms
    ([('1024x2', 5)], 12.5)
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from hgxkit.errors import InputError
from hgxkit.importing.bench_clients import clients, parse_bench
from hgxkit.importing.commands import Simple, exec_command
from hgxkit.importing.outcome import Report
from hgxkit.importing.post import PostFile
from hgxkit.importing.reading import Bench, Reading
from hgxkit.importing.result_blocks import Run, TableValue, Warmup, printed_results
from hgxkit.importing.variables import Scope
from hgxkit.kinds import posted_lengths, python_program
from hgxkit.recipe.matrix import BenchmarkMatrix, MatrixCell, Reference, ReferenceCell, WarmupRun
from hgxkit.recipe.matrix_io import cell_id


@dataclass
class Found:
    """The matrix and reference a post gives, with a report line per benchmark and result it used or skipped."""

    matrix: BenchmarkMatrix | None = None
    reference: Reference | None = None
    notes: list[str] = field(default_factory=list)
    report: list[Report] = field(default_factory=list)
    warmups: list[Warmup] = field(default_factory=list)
    aside: list[str] = field(default_factory=list)  # the server's benchmark parts set aside, each with why


@dataclass
class _Numbers:
    """One reference cell being assembled: metric -> (value, decimals, source)."""

    cell: MatrixCell
    values: dict[str, tuple[float | int, int, str]] = field(default_factory=dict)


class BenchCommands:
    """A benchmark client command, plain or run with `docker exec` (one run with `docker run` is the docker run
    format's): a matrix cell once the server is known (`benchmarks`)."""

    name = "benchmark command"

    def claims(self, simple: Simple) -> bool:
        return bool(simple.client) and simple.kind in ("bench", "docker-exec")

    def take(self, simple: Simple, reading: Reading) -> None:
        reading.benches.append(bench_of(reading.simples, simple))


BENCH_COMMANDS = BenchCommands()


def bench_commands(simples: Sequence[Simple]) -> list[Bench]:
    """The client commands among `simples` (plain, or run with `docker exec`), `$NAME`s the post sets resolved."""
    return [bench_of(simples, simple) for simple in simples if BENCH_COMMANDS.claims(simple)]


def bench_of(simples: Sequence[Simple], simple: Simple) -> Bench:
    """One client command with the `$NAME`s the post sets before it resolved; a command whose words cannot be
    resolved is kept with its words as written (`benchmarks` reports it)."""
    assert simple.client is not None
    words = simple.texts if simple.kind == "bench" else exec_command(simple.texts[2:])
    try:
        scope = Scope.before(simples, simple)
        words = [scope.resolve(word, where=simple.where())[0] for word in words]
    except InputError:
        pass
    return simple, simple.client, words


def benchmarks(
    posts: Sequence[PostFile],
    benches: Sequence[Bench],
    *,
    served: set[str],
    values: set[str],
    ports: set[int],
    aside: Mapping[int, str] | None = None,
    other_servers: Sequence[Simple] = (),
) -> Found:
    """Cells and numbers of `posts` for a server answering to `served` names, with flag/setting `values`
    (lowercase) that pick among compared setups, reached on `ports` (its own, and the published ones). `aside`:
    why each benchmark command (by `id`) the importer set aside was (a placeholder); the block printed under one
    stays with it, set aside too, and says so. `other_servers`: the launches the import did not take (`--pick`);
    a block printed under one, after the benchmark command before it, is that server's run, set aside."""
    found = Found()
    aside = aside or {}
    cells: list[MatrixCell] = []
    numbers: dict[str, _Numbers] = {}
    by_bench: dict[int, MatrixCell | None] = {}
    for simple, client, words in benches:
        if id(simple) not in aside:
            by_bench[id(simple)] = _cell_of(simple, client, words, served, ports, cells, found)
    all_simples = [simple for simple, _, _ in benches]
    label = None
    for post in posts:
        printed = printed_results(post)
        found.notes += printed.notes
        label = _choose_label(post, printed.runs, printed.tables, values, found) or label
        for run in printed.runs:
            if run.cell is not None:
                _logged(run, label, cells, numbers, found)
                continue
            bench = _bench_before(all_simples, post, run.first)
            server = _bench_before(other_servers, post, run.first)
            if server is not None and (bench is None or bench.command.last < server.command.first):
                why = f"printed under the server at {server.where()}, which the import did not take"
                found.report.append(Report(run.where(), "skipped", f"result block: {why}"))
                found.notes.append(f"{run.where()}: result block set aside: {why}")
                continue
            cell = by_bench.get(id(bench)) if bench is not None else None
            taken = [(s, by_bench.get(id(s))) for s in all_simples]
            if bench is None:  # printed apart (its own file or fence): the command whose settings it shows
                bench = _bench_matching(run, taken, found)
                cell = by_bench.get(id(bench)) if bench is not None else None
            elif cell is not None and not _agrees(run, cell, _totals(run)):  # another command's, printed after both
                bench, cell = _better_match(run, bench, cell, taken, found)
            if bench is not None and id(bench) in aside:
                _stays_aside(run, bench, aside[id(bench)], found)
                continue
            if cell is None:
                why = (
                    "no benchmark command before it" if bench is None else f"its command ({bench.where()}) was skipped"
                )
                found.report.append(Report(run.where(), "skipped", f"result block: {why}"))
                continue
            _check_block(run, cell, found)
            _merge(numbers, cell, run.metrics, run.source(), found, run.decimals)
            what = f"result block -> reference for cell {cell.id}"
            found.report.append(Report(run.where(), "took", what, "reference"))
        warmups = [w for w in printed.warmups if label is None or w.label is None or w.label.lower() == label.lower()]
        if warmups and cells:
            where = f"{post.name}:{warmups[0].line}"
            found.report.append(Report(where, "took", f"{len(warmups)} warmup run(s)", "matrix.warmup_runs"))
        tables = [t for t in printed.tables if _label_matches(t.label, label, values)]
        _tables(tables, cells, numbers, values, found)
        found.warmups += warmups
    if cells:
        warmup_runs = tuple(WarmupRun(w.input_len, w.concurrency, w.num_prompts) for w in found.warmups)
        found.matrix = BenchmarkMatrix(entries=tuple(cells), warmup_runs=warmup_runs)
    ref_cells = [_reference_cell(n) for n in numbers.values() if n.values]
    if ref_cells:
        clients = sorted({c.client for c in cells if c.client}) or ["the post's benchmark log"]
        found.reference = Reference(
            tool=", ".join(clients),
            label=label,
            notes="Numbers as the post printed them (hgxkit recipe import); each cell lists the lines they came from.",
            cells=tuple(ref_cells),
        )
    return found


def _cell_of(
    simple: Simple,
    client: str,
    words: list[str],
    served: set[str],
    ports: set[int],
    cells: list[MatrixCell],
    found: Found,
) -> MatrixCell | None:
    """The matrix cell a client command runs (added to `cells`), or None with a report line saying why not."""
    where = simple.span()
    if simple.in_block:
        why = f"benchmark inside a `{simple.in_block}` block: its settings vary"
        found.report.append(Report(where, "skipped", why))
        return None
    bench = parse_bench(python_program(words), where=where, client=client)
    bench = replace(bench, cell=replace(bench.cell, source=simple.source()))
    if bench.unresolved:
        found.report.append(Report(where, "skipped", f"benchmark: {bench.unresolved} is not set by the post"))
        return None
    if bench.model is not None and bench.model not in served:
        why = f"benchmark for model {bench.model}, not the imported server's"
        found.report.append(Report(where, "skipped", why))
        return None
    found.notes += [*simple.notes, *bench.notes]
    if ports and bench.port is not None and bench.port not in ports:
        shown = ", ".join(map(str, sorted(ports)))
        found.notes.append(f"{where}: the client asks port {bench.port}; the imported server is on {shown}")
    for cell in cells:
        if replace(cell, id="", source=None) == replace(bench.cell, source=None):
            found.report.append(Report(where, "took", f"benchmark (the same as cell {cell.id})", "matrix"))
            return cell
    cell = replace(bench.cell, id=cell_id(bench.cell, {c.id for c in cells}))
    cells.append(cell)
    found.report.append(Report(where, "took", f"benchmark -> matrix cell {cell.id} ({cell.client})", "matrix"))
    return cell


def _stays_aside(run: Run, bench: Simple, why: str, found: Found) -> None:
    """A result block printed under a benchmark command set aside: set aside with it, saying whose it is."""
    where = f"lines {run.first}-{run.last}" if run.post is bench.command.post else run.where()
    at = f"line {bench.first_line}" if run.post is bench.command.post else bench.where()
    said = f"the result block at {where} belongs to the benchmark command at {at}, set aside with it: {why}"
    found.notes.append(f"{run.where()}: {said}")
    found.report.append(Report(run.where(), "skipped", f"result block: its command ({bench.where()}) was set aside"))
    found.aside.append(f"{run.where()}: {said}")


def _bench_before(simples: Sequence[Simple], post: PostFile, line: int) -> Simple | None:
    before = [s for s in simples if s.command.post is post and s.command.last < line]
    return before[-1] if before else None


_TOTALS = re.compile(r"(?im)^\s*Total (input|generated) tokens\s*:\s*(\d+)\s*$")


def _totals(run: Run) -> dict[str, int]:
    """The block's `Total input tokens` and `Total generated tokens`."""
    text = "\n".join(run.post.lines[run.first - 1 : run.last])
    return {kind: int(value) for kind, value in _TOTALS.findall(text)}


def _better_match(
    run: Run, bench: Simple, cell: MatrixCell, taken: Sequence[tuple[Simple, MatrixCell | None]], found: Found
) -> tuple[Simple, MatrixCell]:
    """The one other benchmark command whose cell agrees with a block that the command before it contradicts
    (two commands, then their numbers: the block is the first's), with a note; else the command before it."""
    totals = _totals(run)
    matches = {id(c): (s, c) for s, c in taken if c is not None and c is not cell and _agrees(run, c, totals)}
    if len(matches) != 1:
        return bench, cell
    ((other, other_cell),) = matches.values()
    found.notes.append(
        f"{run.where()}: the result block's requests and lengths are those of the benchmark command at "
        f"{other.where()}, not of the one just before it ({bench.where()}): taken for cell {other_cell.id}"
    )
    return other, other_cell


def _bench_matching(run: Run, taken: Sequence[tuple[Simple, MatrixCell | None]], found: Found) -> Simple | None:
    """The benchmark command (of any file of the import) a result block printed apart belongs to: the one
    whose cell agrees with what the block shows (requests, concurrency, rate, mean input/output length); None
    when none does (said in a report line); a refusal naming them when several do."""
    totals = _totals(run)
    matches = [simple for simple, cell in taken if cell is not None and _agrees(run, cell, totals)]
    matches = list(dict.fromkeys(matches))
    if len({id(cell) for simple, cell in taken if simple in matches}) > 1:
        shown = ", ".join(f"{s.where()} (cell {c.id})" for s, c in taken if s in matches and c is not None)
        raise InputError(
            f"{run.where()}: a result block printed apart from its benchmark command fits "
            f"{len(matches)} of them ({shown}); put it after the command it belongs to"
        )
    if matches:
        found.notes.append(
            f"{run.where()}: a result block printed apart; it belongs to the benchmark command at "
            f"{matches[0].where()} (its requests, concurrency, rate and lengths agree)"
        )
        return matches[0]
    return None


def _agrees(run: Run, cell: MatrixCell, totals: dict[str, int]) -> bool:
    """True when nothing the block shows contradicts `cell` (a block that shows nothing agrees with nothing)."""
    shown = 0
    completed = run.metrics.get("completed")
    if isinstance(completed, int) and cell.num_prompts is not None:
        shown += 1
        if completed > cell.num_prompts or completed < cell.num_prompts * 0.9:
            return False
    concurrency = run.settings.get("concurrency", "")
    if concurrency.isdigit():
        shown += 1
        if cell.concurrency != int(concurrency):
            return False
    rate = run.settings.get("request_rate", "").lower()
    if rate:
        shown += 1
        if (rate == "inf") != (cell.request_rate is None):
            return False
        if rate != "inf" and cell.request_rate is not None and abs(float(rate) - cell.request_rate) > 1e-6:
            return False
    for kind, length in (("input", cell.input_len), ("generated", cell.output_len)):
        if cell.dataset == "random" and length and kind in totals and isinstance(completed, int) and completed:
            shown += 1
            low, high = _length_range(cell, length)
            if not low * 0.85 <= totals[kind] / completed <= high * 1.15:
                return False
    return shown > 0


def _length_range(cell: MatrixCell, length: int) -> tuple[float, float]:
    """The range a random dataset's lengths are drawn from, as wide as the cell's ratio is far from its client's
    "fixed lengths" ratio (SGLang's 1.0 draws from [len x ratio, len], vLLM's 0.0 from [len x (1 - ratio),
    len x (1 + ratio)]; the wider of the two is taken); the default kind's convention for other clients."""
    fixed = posted_lengths(cell.client).fixed
    spread = min(abs((cell.range_ratio if cell.range_ratio is not None else fixed) - fixed), 1.0)
    return length * (1 - spread), length * (1 + spread)


def _check_block(run: Run, cell: MatrixCell, found: Found) -> None:
    completed = run.metrics.get("completed")
    if cell.num_prompts is not None and isinstance(completed, int) and completed != cell.num_prompts:
        found.notes.append(
            f"{run.source()}: {completed} of the cell's {cell.num_prompts} requests succeeded (kept as printed)"
        )
    if run.missing:
        found.notes.append(f"{run.source()}: printed without a number: {', '.join(run.missing[:4])}")


def _choose_label(
    post: PostFile, runs: list[Run], tables: list[TableValue], values: set[str], found: Found
) -> str | None:
    spelled = {
        label.lower(): label
        for label in sorted({r.label for r in runs if r.label} | {t.label for t in tables if t.label})
    }
    labels = sorted(spelled.values(), key=str.lower)
    if not labels:
        return None
    matching = [label for label in labels if label.lower() in values]
    if len(matching) == 1:
        others = [label for label in labels if label != matching[0]]
        if others:
            found.notes.append(
                f"{post.name}: the post compares {', '.join(labels)}; {matching[0]} is the imported server's setting, "
                f"so its numbers are taken"
            )
        return matching[0]
    found.notes.append(f"{post.name}: the post compares {', '.join(labels)}; none is a setting of the imported server")
    return None


def _label_matches(label: str | None, chosen: str | None, values: set[str]) -> bool:
    return label is None or (chosen is not None and label.lower() == chosen.lower()) or label.lower() in values


def _logged(run: Run, label: str | None, cells: list[MatrixCell], numbers: dict[str, _Numbers], found: Found) -> None:
    assert run.cell is not None
    if run.label is not None and (label is None or run.label.lower() != label.lower()):
        return
    input_len, concurrency, prompts = run.cell
    cell = next((c for c in cells if (c.input_len, c.concurrency, c.num_prompts) == run.cell), None)
    if cell is None:
        client = _client_named(run.post)
        cell = MatrixCell(
            id="", input_len=input_len, concurrency=concurrency, num_prompts=prompts, client=client, source=run.source()
        )
        found.notes.append(
            f"{run.where()}: a logged run gives input length, concurrency and prompts; its output length, dataset "
            f"and range ratio are not stated, so the cell leaves them unset"
            + (f" (the log names the client {client})" if client else "")
        )
    if not cell.id:
        cell = replace(cell, id=cell_id(cell, {c.id for c in cells}))
        cells.append(cell)
        what = f"logged run -> matrix cell {cell.id} and its reference numbers"
        found.report.append(Report(run.where(), "took", what, "matrix, reference"))
    _merge(numbers, cell, run.metrics, run.source(), found, run.decimals)


def _client_named(post: PostFile) -> str | None:
    """The one benchmark client a post's log names (`…/sglang/bench_serving.py:13: FutureWarning`), if one."""
    text = "\n".join(post.lines)
    named = {c.name for c in clients() if c.printed and re.search(c.printed, text)}
    return named.pop() if len(named) == 1 else None


def _tables(
    tables: list[TableValue], cells: list[MatrixCell], numbers: dict[str, _Numbers], values: set[str], found: Found
) -> None:
    outcomes: dict[str, list[str]] = {}
    for value in tables:
        cell = next((c for c in cells if _row_is_cell(value.keys, c, values)), None)
        if cell is None:
            outcome = ["no cell"]
        else:
            number = round(value.value, value.decimals)
            places = {value.metric: value.decimals}
            outcome = _merge(numbers, cell, {value.metric: number}, value.source(), found, places)
        outcomes.setdefault(value.where(), []).extend(outcome)
    for where, seen in outcomes.items():
        counts = {k: seen.count(k) for k in ("new", "finer", "agrees", "differs", "no cell") if k in seen}
        taken = counts.get("new", 0) + counts.get("finer", 0)
        said = {
            "new": "added",
            "finer": "more precise than before",
            "agrees": "agree with more precise ones read",
            "differs": "differ (noted)",
            "no cell": "name no matrix cell",
        }
        what = "; ".join(f"{n} {said[k]}" for k, n in counts.items())
        shown = f"table of {len(seen)} number(s): {what}"
        found.report.append(Report(where, "took" if taken else "checked", shown, "reference" if taken else ""))


def _row_is_cell(keys: dict[str, str], cell: MatrixCell, values: set[str]) -> bool:
    for key, text in keys.items():
        setting = {"input_len": cell.input_len, "output_len": cell.output_len, "concurrency": cell.concurrency}
        if key in setting:
            if setting[key] is None or str(setting[key]) != text:
                return False
        elif text.lower() not in values:
            return False
    return True


def _merge(
    numbers: dict[str, _Numbers],
    cell: MatrixCell,
    metrics: dict[str, float | int],
    source: str,
    found: Found,
    decimals: dict[str, int],
) -> list[str]:
    """Add numbers to a cell's reference; per number: `new`, `finer` (replaces a rounder one), `agrees`
    (a rounder copy of one already read) or `differs` (a note; the first one read is kept)."""
    entry = numbers.setdefault(cell.id, _Numbers(cell))
    outcome = []
    for key, value in metrics.items():
        places = decimals.get(key, 0)
        old = entry.values.get(key)
        if old is None:
            entry.values[key] = (value, places, source)
            outcome.append("new")
            continue
        low = min(places, old[1])
        if round(float(old[0]), low) != round(float(value), low):
            found.notes.append(
                f"{source}: {key} {value} for cell {cell.id} differs from {old[0]} ({old[2]}); kept {old[0]}"
            )
            outcome.append("differs")
        elif places > old[1]:
            entry.values[key] = (value, places, source)
            outcome.append("finer")
        else:
            outcome.append("agrees")
    return outcome


def _reference_cell(entry: _Numbers) -> ReferenceCell:
    sources = tuple(dict.fromkeys(source for _, _, source in entry.values.values()))
    return ReferenceCell(cell=entry.cell, sources=sources, **{k: v for k, (v, _, _) in entry.values.items()})
