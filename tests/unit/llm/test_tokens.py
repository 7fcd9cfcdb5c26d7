"""Mnemo's own count of a call's tokens, for an endpoint that reports none: tiktoken's
o200k_base only when its file is already on this machine (never a download), else the
estimate by characters."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bot.llm.tokens import ESTIMATE, chat_tokens, estimate, local_counter
from tests.paths import SHARED

# The offline files: where the Makefile points tiktoken (from SHARED), else CI's folder.
SHARED_TIKTOKEN = Path(os.environ.get("TIKTOKEN_CACHE_DIR") or SHARED / "models" / "tiktoken")


@pytest.mark.parametrize("cache", ["", "empty"])
def test_without_the_encoding_at_hand_the_tokens_are_estimated(
    cache: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # "" turns tiktoken's cache off (it would download every time); an empty folder lacks it.
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path) if cache else "")
    counter = local_counter()
    assert counter is ESTIMATE
    assert counter.count("Hello there, how are you?") == estimate("Hello there, how are you?") == 7


def test_a_corrupt_cached_encoding_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # tiktoken would delete a file that fails its hash and download it again: not Mnemo.
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    (tmp_path / "fb374d419588a4632f3f557e76b4b70aebbca790").write_bytes(b"not an encoding")
    assert local_counter() is ESTIMATE


def test_with_the_encoding_cached_tiktoken_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("tiktoken")
    if not SHARED_TIKTOKEN.is_dir():
        pytest.skip("offline tiktoken files not found beside the checkout")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(SHARED_TIKTOKEN))
    counter = local_counter()
    assert counter.label == "tiktoken o200k_base"
    assert counter.count("Hello there, how are you?") == 7
    # Each message adds its role and separators, and the answer's start: OpenAI's accounting.
    assert chat_tokens(counter, ["Hi", "Hello"]) == 1 + 3 + 1 + 3 + 3
