"""Recipes: one serving setup captured exactly, importable from a posted `docker run` and renderable back."""
