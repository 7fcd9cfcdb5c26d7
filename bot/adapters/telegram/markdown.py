"""The model's Markdown as Telegram HTML, in parts that each fit one message.

Models write Markdown (`**bold**`, lists, code); Telegram shows it raw unless it is converted.
markdown-it-py parses it (CommonMark, plus ~~strikethrough~~; raw HTML in the text is shown as
text, never passed on), and this module renders the tree with the few tags Telegram accepts:
<b>, <i>, <s>, <code>, <pre>, <a href>, <blockquote>. Headings become bold lines, list items
"•" or "1." lines, rules a line of dashes. Every piece of text is HTML-escaped, so a name like
"<Sam & Co>" or a stray "<" never becomes markup.

Telegram refuses what its entities do not allow (code inside bold, nested quotes, a code block
in a quote): those render as plain text instead.

Splitting happens on the rendered parts, never inside a tag or an `&amp;` entity: between
blocks (paragraphs, list items, code blocks) when possible; a block longer than one message is
cut between words (or lines of code) with its open tags closed at the cut and opened again in
the next part, so each part is valid HTML on its own. Lengths are counted in UTF-16 code units,
as Telegram counts them, on the HTML itself, which is never shorter than the text shown.

`plain_text(part)` is the same part without markup, for when Telegram refuses the HTML.

`answer_html(text)` renders our own text (a command's answer) the same way, in the same
parts, with one mark only: a `span` in backticks (a fact's id) is code; everything else,
people's names and the words of their facts included, is shown exactly as written, so an
asterisk or underscore in a name never turns into formatting.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from typing import Literal

from markdown_it import MarkdownIt
from markdown_it.token import Token

TELEGRAM_LIMIT = 4096
# Links Telegram opens; any other scheme (javascript:, data:, file:) stays plain text.
_LINK_SCHEMES = ("http://", "https://", "tg://", "mailto:")
_TAG = re.compile(r"<[^>]*>")
_PARSER = MarkdownIt("commonmark", {"html": False}).enable("strikethrough")
_RULE = "———"
# A code span in our own text: an id between backticks, on one line.
_CODE_SPAN = re.compile(r"`([^`\n]+)`")


@dataclass(frozen=True)
class Tag:
    open: str
    close: str


BOLD = Tag("<b>", "</b>")
ITALIC = Tag("<i>", "</i>")
STRIKE = Tag("<s>", "</s>")
CODE = Tag("<code>", "</code>")
QUOTE = Tag("<blockquote>", "</blockquote>")
# Tags that may hold others (Telegram: bold, italic, strikethrough and links nest freely).
_INLINE_STYLE = {"strong": BOLD, "em": ITALIC, "s": STRIKE}


@dataclass(frozen=True)
class Item:
    kind: Literal["open", "close", "text"]
    tag: Tag | None = None
    text: str = ""  # raw text: escaped when written


@dataclass
class Block:
    """One paragraph, heading, list item, code block or quote, and what goes before it."""

    items: list[Item] = field(default_factory=list)
    separator: str = "\n\n"

    def html(self) -> str:
        return "".join(_written(item) for item in self.items)


def units(text: str) -> int:
    """Telegram's length: UTF-16 code units."""
    return len(text.encode("utf-16-le")) // 2


def to_telegram_html(markdown: str, limit: int = TELEGRAM_LIMIT) -> list[str]:
    """`markdown` as Telegram HTML parts of at most `limit` units each; none empty."""
    if limit < 64:
        raise ValueError("limit too small for tags and text")
    return _pack(_Renderer().render(markdown), limit)


def answer_html(text: str, limit: int = TELEGRAM_LIMIT) -> list[str]:
    """Our own `text` as Telegram HTML parts: backticked spans as code, the rest as written
    (paragraphs kept apart as blocks, so a long answer is cut between them first)."""
    if limit < 64:
        raise ValueError("limit too small for tags and text")
    blocks = []
    for paragraph in text.split("\n\n"):
        items: list[Item] = []
        at = 0
        for span in _CODE_SPAN.finditer(paragraph):
            if span.start() > at:
                items.append(Item("text", text=paragraph[at : span.start()]))
            items += [Item("open", CODE), Item("text", text=span.group(1)), Item("close", CODE)]
            at = span.end()
        if at < len(paragraph):
            items.append(Item("text", text=paragraph[at:]))
        if any(item.kind == "text" and item.text.strip() for item in items):
            blocks.append(Block(items))
    return _pack(blocks, limit)


def plain_text(part: str) -> str:
    """A rendered part without its markup: what Telegram shows when sent without HTML."""
    return html.unescape(_TAG.sub("", part))


def escape(text: str) -> str:
    """Our own text (names, quotes of what people typed) inside an HTML message."""
    return html.escape(text, quote=False)


def _written(item: Item) -> str:
    if item.kind == "text":
        return escape(item.text)
    assert item.tag is not None
    return item.tag.open if item.kind == "open" else item.tag.close


# --------------------------------------------------------------------------- rendering
@dataclass
class _List:
    ordered: bool
    number: int
    # How many blocks the list has rendered: the first one is set apart from what precedes.
    blocks: int = 0


class _Renderer:
    def __init__(self) -> None:
        # Blocks of the document, and of each quote being rendered (a quote is one block).
        self._containers: list[list[Block]] = [[]]
        self._lists: list[_List] = []
        self._marker: str | None = None
        self._block: Block | None = None
        # Open inline tags (None: a tag left out, e.g. a link with an unsafe address).
        self._inline: list[Tag | None] = []
        # Inside a heading (rendered bold): no code within it.
        self._heading = False

    @property
    def _quoted(self) -> bool:
        return len(self._containers) > 1

    def render(self, markdown: str) -> list[Block]:
        for token in _PARSER.parse(markdown):
            self._token(token)
        return self._containers[0]

    def _token(self, token: Token) -> None:
        kind = token.type
        if kind in ("paragraph_open", "heading_open"):
            self._start()
            if kind == "heading_open":
                self._heading = True
                self._add(Item("open", BOLD))
        elif kind == "heading_close":
            self._heading = False
            self._add(Item("close", BOLD))
            self._finish()
        elif kind == "paragraph_close":
            self._finish()
        elif kind == "inline":
            if self._block is None:
                self._start()
            self._inline_tokens(token.children or [])
        elif kind in ("bullet_list_open", "ordered_list_open"):
            start = int(token.attrGet("start") or 1)
            self._lists.append(_List(ordered=kind == "ordered_list_open", number=start))
        elif kind in ("bullet_list_close", "ordered_list_close"):
            self._lists.pop()
        elif kind == "list_item_open":
            current = self._lists[-1]
            self._marker = f"{current.number}. " if current.ordered else "• "
            current.number += 1
        elif kind == "blockquote_open":
            self._containers.append([])
        elif kind == "blockquote_close":
            self._end_quote()
        elif kind in ("fence", "code_block"):
            self._code(token)
        elif kind == "hr":
            self._start()
            self._add(Item("text", text=_RULE))
            self._finish()

    def _start(self) -> None:
        separator = "\n\n"
        indent = ""
        if self._lists:
            current = self._lists[-1]
            separator = "\n\n" if current.blocks == 0 and len(self._lists) == 1 else "\n"
            current.blocks += 1
            indent = "   " * (len(self._lists) - 1)
        self._block = Block(separator=separator)
        if self._lists:
            marker = self._marker if self._marker is not None else "   "
            self._marker = None
            self._add(Item("text", text=indent + marker))

    def _add(self, item: Item) -> None:
        if self._block is None:
            self._start()
        assert self._block is not None
        self._block.items.append(item)

    def _finish(self) -> None:
        block, self._block = self._block, None
        # Inline tags left open by odd input are closed within their block.
        for tag in reversed(self._inline):
            if tag is not None and block is not None:
                block.items.append(Item("close", tag))
        self._inline = []
        if block is not None and any(i.kind == "text" and i.text.strip() for i in block.items):
            self._containers[-1].append(block)

    def _code(self, token: Token) -> None:
        self._start()
        code = token.content.rstrip("\n")
        if self._quoted:
            # Telegram takes no code block inside a quote: the code as quoted text.
            self._add(Item("text", text=code))
        else:
            language = (token.info or "").split()[:1]
            attribute = (
                f' class="language-{html.escape(language[0], quote=True)}"' if language else ""
            )
            self._add(Item("open", Tag(f"<pre><code{attribute}>", "</code></pre>")))
            self._add(Item("text", text=code))
            self._add(Item("close", Tag(f"<pre><code{attribute}>", "</code></pre>")))
        self._finish()

    def _end_quote(self) -> None:
        inner = self._containers.pop()
        if not inner:
            return
        items: list[Item] = []
        for index, block in enumerate(inner):
            if index:
                items.append(Item("text", text=block.separator))
            items.extend(block.items)
        # Quotes do not nest on Telegram: a quote in a quote is part of the outer one.
        if not self._quoted:
            items = [Item("open", QUOTE), *items, Item("close", QUOTE)]
        separator = inner[0].separator if self._lists else "\n\n"
        self._containers[-1].append(Block(items, separator=separator))

    # ------------------------------------------------------------------ inline
    def _inline_tokens(self, tokens: list[Token]) -> None:
        for token in tokens:
            kind = token.type
            if kind == "text":
                self._add(Item("text", text=token.content))
            elif kind in ("softbreak", "hardbreak"):
                self._add(Item("text", text="\n"))
            elif kind == "code_inline":
                # Telegram's code takes no other entity around or inside it.
                if self._heading or any(tag is not None for tag in self._inline):
                    self._add(Item("text", text=token.content))
                else:
                    self._add(Item("open", CODE))
                    self._add(Item("text", text=token.content))
                    self._add(Item("close", CODE))
            elif kind.endswith("_open") and kind[: -len("_open")] in _INLINE_STYLE:
                self._open(_INLINE_STYLE[kind[: -len("_open")]])
            elif kind == "link_open":
                href = str(token.attrGet("href") or "")
                inside_link = any(t is not None and t.open.startswith("<a ") for t in self._inline)
                if href.lower().startswith(_LINK_SCHEMES) and not inside_link:
                    self._open(Tag(f'<a href="{html.escape(href, quote=True)}">', "</a>"))
                else:
                    self._inline.append(None)
            elif kind.endswith("_close"):
                self._close()
            elif kind == "image":
                self._add(Item("text", text=token.content or "image"))
            elif kind == "html_inline":
                self._add(Item("text", text=token.content))

    def _open(self, tag: Tag) -> None:
        self._inline.append(tag)
        self._add(Item("open", tag))

    def _close(self) -> None:
        if not self._inline:
            return
        tag = self._inline.pop()
        if tag is not None:
            self._add(Item("close", tag))


# --------------------------------------------------------------------------- packing
def _pack(blocks: list[Block], limit: int) -> list[str]:
    """Blocks into parts: whole blocks while they fit, a long block cut inside."""
    parts: list[str] = []
    current = ""
    for block in blocks:
        rendered = block.html()
        joined = f"{current}{block.separator}{rendered}" if current else rendered
        if units(joined) <= limit:
            current = joined
            continue
        if current:
            parts.append(current)
            current = ""
        if units(rendered) <= limit:
            current = rendered
            continue
        pieces = _cut(block.items, limit)
        parts.extend(pieces[:-1])
        current = pieces[-1] if pieces else ""
    if current:
        parts.append(current)
    return [part.strip() for part in parts if plain_text(part).strip()]


def _cut(items: list[Item], limit: int) -> list[str]:
    """One block too long for a message, as parts: cut in its text, with the tags open at
    each cut closed there and opened again at the start of the next part. A tag that would
    leave no room for text even in a fresh part (a huge link address) is left out."""
    parts: list[str] = []
    open_tags: list[Tag] = []
    opened: list[bool] = []  # for each open item: whether its tag was written
    current = ""

    def closing() -> str:
        return "".join(tag.close for tag in reversed(open_tags))

    def reopening() -> str:
        return "".join(tag.open for tag in open_tags)

    def new_part() -> None:
        nonlocal current
        parts.append(current + closing())
        current = reopening()

    for item in items:
        if item.kind == "open":
            assert item.tag is not None
            wrapped = item.tag.open + item.tag.close
            if units(reopening() + wrapped + closing()) + _WIDEST_CHARACTER > limit:
                opened.append(False)
                continue
            if units(current + wrapped + closing()) + _WIDEST_CHARACTER > limit:
                new_part()
            open_tags.append(item.tag)
            opened.append(True)
            current += item.tag.open
        elif item.kind == "close":
            if opened.pop():
                current += open_tags.pop().close
        else:
            text = item.text
            while text:
                room = limit - units(current) - units(closing())
                if units(escape(text)) <= room:
                    current += escape(text)
                    break
                head = _fitting(text, room)
                if not head:
                    if current != reopening():
                        new_part()
                        continue
                    head = text[:1]  # cannot happen: every open tag left room for one
                # The boundary (a space, a line end) stays at the end of this part, unshown.
                current += escape(head.rstrip(" \n"))
                text = text[len(head) :]
                new_part()
    parts.append(current + closing())
    return parts


# The most units one character takes once escaped ("&amp;"): what every tag leaves room for.
_WIDEST_CHARACTER = 5
_BREAKS = ("\n\n", "\n", ". ", " ")


def _fitting(text: str, room: int) -> str:
    """The longest start of `text` whose escaped form takes at most `room` units, ending at
    the biggest boundary found in its second half (a paragraph, a line, a sentence, a word)."""
    low, high = 0, len(text)
    while low < high:  # the longest prefix that fits, found by halving
        middle = (low + high + 1) // 2
        if units(escape(text[:middle])) <= room:
            low = middle
        else:
            high = middle - 1
    head = text[:low]
    for mark in _BREAKS:
        at = head.rfind(mark)
        if at >= len(head) // 2:
            return head[: at + len(mark)]
    return head
