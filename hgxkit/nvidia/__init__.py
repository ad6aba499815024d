"""Parsers for NVIDIA tools' output and host facts about GPUs (pure functions, tested on recorded outputs)."""
