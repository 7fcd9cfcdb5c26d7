"""The one parser of what people type after a command, shared by every surface."""

from __future__ import annotations

# Page numbers are small; platform user ids are not (see parse_person_search_page).
_MAX_PAGE_DIGITS = 4
_MIN_USER_ID_DIGITS = 5


def parse_person_search_page(args: str) -> tuple[str | None, str | None, int]:
    """`[@user | user id] [search text] [page]`: a first `@name` or long number is the person,
    a last short number the page, the rest the text to search for."""
    words = args.split()
    who: str | None = None
    if words:
        first = words[0]
        if first.startswith("@") or (first.isdigit() and len(first) >= _MIN_USER_ID_DIGITS):
            who = words.pop(0)
    page = 1
    if words and words[-1].isdigit() and len(words[-1]) <= _MAX_PAGE_DIGITS:
        page = max(int(words.pop()), 1)
    return who, " ".join(words) or None, page


def command_parts(text: str) -> tuple[str, str]:
    """`/facts@mnemo_bot sarah 2` → ("facts", "sarah 2")."""
    head, _, rest = text.strip().partition(" ")
    name = head.removeprefix("/").split("@", 1)[0].lower()
    return name, rest.strip()


# What people typed is shown back at most this long.
ECHO_LIMIT = 40
# Markup and mention characters of Discord's and Telegram's formats, and controls: an echo
# never formats, pings (`@everyone`) or breaks a line.
_NOT_ECHOED = str.maketrans({c: None for c in "`*_~|<>@#[]()\\"})


def echo(text: str, limit: int = ECHO_LIMIT) -> str:
    """Typed text as an answer may quote it: one line of plain words, cut to `limit`
    characters, in quotes (“like this”)."""
    words = " ".join("".join(c for c in text if c.isprintable()).translate(_NOT_ECHOED).split())
    if len(words) > limit:
        words = words[: limit - 1].rstrip() + "…"
    return f"“{words}”"
