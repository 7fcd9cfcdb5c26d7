"""Clean text at the door: what a platform hands us becomes text every store accepts.

Applied by the domain models (`bot.domain.records`), which every adapter builds, so no adapter has
to remember it: lone UTF-16 surrogates (Telegram's JSON and Windows consoles produce them)
become U+FFFD instead of failing the database write, NUL characters are removed, and a
message longer than `MAX_MESSAGE_CHARS` is kept cut, with a note saying so.

Names (display names, usernames, the names people tell the bot) and fact texts are one line
people read, so they keep only what can be seen (`readable`, `visible`): a display name
`Zed\u202eevil\u200b` (a right-to-left override and a zero-width space) is `Zedevil`, never a
name that reads differently from what it is, and never a line break in a prompt. What looks
alike compares alike (`name_key`: case, accents and compatibility forms folded). Messages
keep their characters: a joiner in an emoji or a direction mark in Hebrew is the person's.
"""

from __future__ import annotations

import re
import unicodedata

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


# Letters that draw nothing: the Hangul fillers and the braille blank pass for an empty name.
_BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0\u2800")
# Removed from names and fact texts: format characters (Cf: the bidi controls U+202A-202E and
# U+2066-2069, direction marks, zero-width spaces and joiners, the BOM, soft hyphens, tags)
# and control characters (Cc), which a reader cannot see.
_INVISIBLE = frozenset({"Cf", "Cc"})


def visible(text: str) -> str:
    """`text` without what people cannot see (format and control characters, blank letters),
    a tab or line break (of any kind) made a space; for fact texts, one line people read."""
    if text.isprintable() and not _BLANK_LETTERS.intersection(text):
        return text  # the usual text: nothing to do
    kept = []
    for char in text:
        if char in "\t\n\r\v\f" or unicodedata.category(char) in ("Zl", "Zp"):
            kept.append(" ")
        elif unicodedata.category(char) not in _INVISIBLE and char not in _BLANK_LETTERS:
            kept.append(char)
    return "".join(kept)


def readable(text: str) -> str:
    """`text` as a name people can read: `visible`, every kind of space one plain space, runs
    of them one, the ends trimmed (no name passes for another by its spacing)."""
    return " ".join(visible(text).split())


def name_key(name: str) -> str:
    """What names that read alike share: `readable`, compatibility forms folded (full-width
    letters, ligatures), accents dropped, case folded. "Tóbrin", "TOBRIN" and "Ｔｏｂｒｉｎ"
    are the same name."""
    decomposed = unicodedata.normalize("NFKD", readable(name))
    letters = "".join(char for char in decomposed if not unicodedata.combining(char))
    return " ".join(letters.casefold().split())
