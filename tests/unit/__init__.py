"""Tests that need no database, no Chroma, no embedder, no subprocess and no network server:
pure functions, parsing, settings, files. One folder per package of the code."""
