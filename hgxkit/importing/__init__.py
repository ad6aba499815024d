"""Importing posts: the post reader and one module per source format, joined into one recipe by `importer`."""
