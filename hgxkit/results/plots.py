"""PNG plots for people who would rather look than read: TTFT vs concurrency per input length, accept length.

Example:
    paths = plot_comparison(run_a, run_b, Path("plots"))
"""

from __future__ import annotations

from pathlib import Path

from hgxkit.results.summary import RunSummary


def plot_comparison(a: RunSummary, b: RunSummary, out_dir: Path, label_a: str, label_b: str) -> list[Path]:
    """Write `ttft.png` (mean and P99 TTFT vs concurrency, one panel per input length) and `accept_length.png`."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display is needed or wanted
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    inputs = sorted({c.input_len for c in a.cells} | {c.input_len for c in b.cells})
    fig, axes = plt.subplots(1, max(len(inputs), 1), figsize=(5 * max(len(inputs), 1), 4), squeeze=False)
    for axis, input_len in zip(axes[0], inputs, strict=False):
        for run, label, style in ((a, label_a, "-o"), (b, label_b, "--s")):
            cells = sorted(
                (c for c in run.cells if c.input_len == input_len and c.group == 0), key=lambda c: c.concurrency
            )
            conc = [c.concurrency for c in cells]
            axis.plot(conc, [c.ttft_mean_ms for c in cells], style, label=f"{label} mean")
            axis.plot(conc, [c.ttft_p99_ms for c in cells], style, alpha=0.5, label=f"{label} P99")
        axis.set_title(f"input {input_len} tokens")
        axis.set_xlabel("concurrency")
        axis.set_ylabel("TTFT (ms)")
        axis.grid(True, alpha=0.3)
        axis.legend(fontsize="small")
    title = "TTFT vs concurrency" + (" — SIMULATED" if a.simulated or b.simulated else "")
    fig.suptitle(title)
    fig.tight_layout()
    ttft = out_dir / "ttft.png"
    fig.savefig(ttft, dpi=110)
    plt.close(fig)

    fig, axis = plt.subplots(figsize=(6, 4))
    for run, label, style in ((a, label_a, "-o"), (b, label_b, "--s")):
        for input_len in inputs:
            cells = sorted(
                (c for c in run.cells if c.input_len == input_len and c.group == 0), key=lambda c: c.concurrency
            )
            values = [c.accept_length for c in cells]
            if any(v is not None for v in values):
                axis.plot([c.concurrency for c in cells], values, style, label=f"{label} {input_len}")
    axis.set_xlabel("concurrency")
    axis.set_ylabel("accept length (tokens / step)")
    axis.set_title("Accept length" + (" — SIMULATED" if a.simulated or b.simulated else ""))
    axis.grid(True, alpha=0.3)
    axis.legend(fontsize="small")
    fig.tight_layout()
    accept = out_dir / "accept_length.png"
    fig.savefig(accept, dpi=110)
    plt.close(fig)
    return [ttft, accept]
