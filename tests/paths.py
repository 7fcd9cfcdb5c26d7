"""Where things are, for every test wherever its file sits in the suite's folders: use these
instead of counting `Path(__file__).parent`s."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent
# The checkout: bot/, plugins/, benchmarks/, docs/, README.md, ...
REPO = TESTS.parent
# The suite's data: elizaOS character files, real-model answers, probe plugins.
DATA = TESTS / "data"
# CI's folder beside the checkout: the embedding model and the tokenizer files.
SHARED = REPO.parent / "shared"
