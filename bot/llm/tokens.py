"""Counting the tokens of a model call whose endpoint reported none.

llama-cpp-python (and other OpenAI-compatible servers) stream an answer without `usage`, even
when `stream_options.include_usage` asks for it: without a count of our own, `/stats`, the
metrics and the daily caps would see those calls as free. Mnemo counts them itself, and says
so wherever they are shown (`TaskUsage.counted_calls`).

How: tiktoken's `o200k_base` (the tokenizer of OpenAI's current models; for other models a
close count, since their BPE vocabularies split text much alike) when tiktoken is installed
(`pip install 'mnemo[bench]'`) and its encoding file is already on this machine
(`TIKTOKEN_CACHE_DIR`, or tiktoken's own cache): nothing is ever downloaded for it. Otherwise
an estimate from the characters (about 4 a token in English; fewer in other scripts, so it
counts low there).
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

# Characters per token, for the estimate when tiktoken's encoding is not at hand.
CHARS_PER_TOKEN = 4
# What the chat format adds to each message (its role and separators), and to the answer's
# start, in OpenAI's own accounting: a few tokens each, real tokens the server counts.
TOKENS_PER_MESSAGE = 3
TOKENS_PER_ANSWER = 3
_ENCODING = "o200k_base"
# Where tiktoken downloads the encoding from; its cache file is named by this address's SHA-1.
_ENCODING_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
# The file's hash tiktoken checks: one that does not match it would be downloaded again.
_ENCODING_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"


@dataclass(frozen=True)
class TokenCounter:
    """How Mnemo counts tokens itself: `label` says how (shown in the log at start-up)."""

    label: str
    count: Callable[[str], int]


def estimate(text: str) -> int:
    """Tokens guessed from the characters, rounded up: a short answer is a token."""
    return -(-len(text) // CHARS_PER_TOKEN)


ESTIMATE = TokenCounter(f"an estimate ({CHARS_PER_TOKEN} characters a token)", estimate)


def local_counter() -> TokenCounter:
    """tiktoken's o200k_base if it can be loaded without a download, else the estimate."""
    try:
        import tiktoken
    except ImportError:
        return ESTIMATE
    cached = _cached()
    if cached is None or not _intact(cached):
        log.info("tiktoken's %s is not in its cache: unreported tokens are estimated", _ENCODING)
        return ESTIMATE
    try:
        encoding = tiktoken.get_encoding(_ENCODING)
    except Exception as error:  # a corrupt cache file, an incompatible tiktoken ...
        log.warning("tiktoken could not load %s (%s): tokens are estimated", _ENCODING, error)
        return ESTIMATE

    def count(text: str) -> int:
        # Special-token names in what people typed are text, as the server reads them.
        return len(encoding.encode(text, disallowed_special=()))

    return TokenCounter(f"tiktoken {_ENCODING}", count)


def _cached() -> Path | None:
    """Where tiktoken looks for the encoding (its own rule: TIKTOKEN_CACHE_DIR, else
    DATA_GYM_CACHE_DIR, else a folder in the temporary directory); None: its cache is off
    (set to ""), so it would always download."""
    folder = os.environ.get("TIKTOKEN_CACHE_DIR", os.environ.get("DATA_GYM_CACHE_DIR"))
    if folder == "":
        return None
    base = Path(folder) if folder else Path(tempfile.gettempdir()) / "data-gym-cache"
    return base / hashlib.sha1(_ENCODING_URL.encode()).hexdigest()


def _intact(path: Path) -> bool:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest() == _ENCODING_SHA256
    except OSError:
        return False


def chat_tokens(counter: TokenCounter, texts: list[str]) -> int:
    """The prompt tokens of a chat request holding these messages' texts."""
    return sum(counter.count(text) + TOKENS_PER_MESSAGE for text in texts) + TOKENS_PER_ANSWER
