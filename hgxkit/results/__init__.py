"""Benchmark results: both clients' output (SGLang JSONL, vLLM --save-result JSON) normalised into one metric
vocabulary, repeats with 95% intervals, telemetry summaries, the run archive, comparisons, JSON Schemas,
Markdown and self-contained HTML reports."""
