"""Clean text at the door: what a platform hands us becomes text every store accepts.

Applied by the domain models (`bot.domain.records`), which every adapter builds, so no adapter has
to remember it: lone UTF-16 surrogates (Telegram's JSON and Windows consoles produce them)
become U+FFFD instead of failing the database write, NUL characters are removed, and a
message longer than `MAX_MESSAGE_CHARS` is kept cut, with a note saying so.
"""

from __future__ import annotations

import re

# Far above any platform's own limit (Discord 4,000, Telegram 4,096); stops a pasted book.
MAX_MESSAGE_CHARS = 16_000
_SURROGATE = re.compile("[\ud800-\udfff]")
_CUT_NOTE = re.compile(r"\n\[cut: the message had [\d,]+ characters; the first [\d,]+ are kept\]\Z")


def valid_text(text: str) -> str:
    """`text` with lone surrogates replaced (paired ones joined) and NUL characters removed."""
    if _SURROGATE.search(text):
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text.replace("\x00", "") if "\x00" in text else text


def capped(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """`text`, or its first `limit` characters followed by a note giving the full length."""
    if len(text) <= limit:
        return text
    noted = _CUT_NOTE.search(text)
    if noted is not None and noted.start() <= limit:
        return text  # cut already (a stored message read back): cutting again would lose it
    note = f"[cut: the message had {len(text):,} characters; the first {limit:,} are kept]"
    return f"{text[:limit]}\n{note}"
