"""Benchmark results: SGLang client JSONL, normalized summaries, the run archive, comparisons and reports."""
