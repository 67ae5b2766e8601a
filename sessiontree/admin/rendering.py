"""Entries as an operator reads them: messages rendered as a conversation
(role, markdown, code, tool calls and their results as blocks, images as
thumbnails, compaction and branch summaries as text), safe against whatever
the conversation holds.

What a model or a user wrote is never trusted as HTML:

- Markdown is rendered by markdown-it-py with raw HTML **off** (a ``<script>``
  in a message is shown as text) and every link checked: only ``http:``,
  ``https:`` and ``mailto:`` targets become links (``javascript:``,
  ``data:``, ``vbscript:``, ``file:`` and relative links stay text), and a
  link opens in a new tab without a referrer. Images in markdown are never
  loaded (an external image is a tracking pixel in an operator's console):
  they are shown as a link with their alt text.
- Image blocks of a message (``{"type": "image", "data", "mimeType"}``) are
  served by the entry's image URL (``tree/entry/<id>/image/<n>/``) only when
  their type is a raster image (PNG, JPEG, GIF, WebP) and their data is
  base64; anything else (SVG, HTML, a broken payload) is a placeholder.
- Every other string goes through ``format_html``/``escape``.

Rendering is cached per text (``markdown_html``): entries are append-only,
so a page viewed again renders nothing again, and the tree page keeps its cost.
"""

from __future__ import annotations

import base64
import binascii
import difflib
import re
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from functools import lru_cache
from typing import Any

import orjson
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict

from sessiontree.core.types import Entry

from .entry_display import shorten, to_json

# Characters of one text block rendered in a tree row (the panel shows all of it).
ROW_TEXT_CHARS = 700
# Characters of a tool call's arguments / a tool result shown in a tree row.
ROW_TOOL_CHARS = 300
# Characters of one text block rendered in the entry panel; longer ones are cut with a note.
PANEL_TEXT_CHARS = 100_000
# Rendered texts kept per process.
MARKDOWN_CACHE = 8192

IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
SAFE_SCHEMES = ("http:", "https:", "mailto:")
_BASE64 = re.compile(r"[A-Za-z0-9+/\s]*={0,2}\s*")


# --- markdown -----------------------------------------------------------------------------------


def _safe_link(url: str) -> bool:
    """Only absolute web and mail links; everything else stays text."""
    lowered = "".join(url.split()).lower()  # "java script:" with spaces or tabs is still javascript:
    return lowered.startswith(SAFE_SCHEMES)


def _link_open(self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
    token = tokens[idx]
    token.attrSet("rel", "noopener noreferrer nofollow")
    token.attrSet("target", "_blank")
    return self.renderToken(tokens, idx, options, env)


def _image(self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
    # Never load it: a link to it, named by its alt text.
    token = tokens[idx]
    alt = self.renderInlineAsText(token.children or [], options, env) or "image"
    src = str(token.attrGet("src") or "")
    return (
        f'<a class="md-image" href="{escape(src)}" rel="noopener noreferrer nofollow" target="_blank">'
        f"[image: {escape(alt)}]</a>"
    )


def _parser() -> MarkdownIt:
    parser = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False, "breaks": True})
    parser.enable(["table", "strikethrough"])
    parser.validateLink = _safe_link  # type: ignore[method-assign]
    parser.add_render_rule("link_open", _link_open)
    parser.add_render_rule("image", _image)
    return parser


_MARKDOWN = _parser()


# Text in which markdown could mean something: inline marks anywhere, block marks at a line's start.
_MARKDOWN_INLINE = re.compile(r"[\\`*_\[\]<>&~|!]")
_MARKDOWN_BLOCK = re.compile(r"^(?: {4}|\t| {0,3}(?:[#>=+-]|\d{1,9}[.)]))", re.MULTILINE)
_PARAGRAPHS = re.compile(r"\n[ \t]*\n")


def _plain_html(text: str) -> str:
    """What markdown-it renders for text without any markdown (paragraphs, a
    ``<br>`` per line break), without parsing it: most messages are prose."""
    paragraphs = []
    for paragraph in _PARAGRAPHS.split(text.replace("\r\n", "\n").strip(" \t\n")):
        lines = [line.strip(" \t\r") for line in paragraph.split("\n")]
        if any(lines):
            paragraphs.append("<p>" + "<br />\n".join(escape(line) for line in lines) + "</p>\n")
    return "".join(paragraphs)


@lru_cache(maxsize=MARKDOWN_CACHE)
def markdown_html(text: str) -> SafeString:
    """``text`` as markdown, rendered without raw HTML and with checked links."""
    if not _MARKDOWN_INLINE.search(text) and not _MARKDOWN_BLOCK.search(text):
        return mark_safe(_plain_html(text))  # every line escaped
    return mark_safe(_MARKDOWN.render(text))  # markdown-it escapes all text; raw HTML is off


def _cut(text: str, limit: int) -> tuple[str, bool]:
    """At most ``limit`` characters of ``text``, cut at a line or word boundary."""
    if len(text) <= limit:
        return text, False
    cut = text[:limit]
    boundary = max(cut.rfind("\n"), cut.rfind(" "))
    if boundary >= limit // 2:
        cut = cut[:boundary]
    return cut.rstrip() + " …", True


# --- images -------------------------------------------------------------------------------------


def image_blocks(entry: Entry) -> list[Mapping[str, Any]]:
    """The image blocks of an entry's message (or custom message), in order: what ``/image/<n>/`` numbers."""
    message = _message(entry)
    content = message.get("content") if message is not None else entry.get("content")
    if not isinstance(content, list):
        return []
    return [block for block in content if isinstance(block, Mapping) and block.get("type") == "image"]


def image_bytes(block: Mapping[str, Any]) -> tuple[bytes, str] | None:
    """The decoded image and its type, when it is a raster image in base64; else ``None``."""
    mime = block.get("mimeType")
    data = block.get("data")
    if not isinstance(mime, str) or mime.lower() not in IMAGE_TYPES or not isinstance(data, str):
        return None
    if not _BASE64.fullmatch(data):
        return None
    try:
        return base64.b64decode("".join(data.split()), validate=True), mime.lower()
    except (binascii.Error, ValueError):
        return None


def _image_html(block: Mapping[str, Any], index: int, image_base: str | None, *, compact: bool) -> SafeString:
    mime = block.get("mimeType")
    data = block.get("data")
    size = len(data) * 3 // 4 if isinstance(data, str) else 0
    what = f"{mime if isinstance(mime, str) else 'unknown type'}, {_size(size)}"
    if image_base is None or image_bytes(block) is None:
        return format_html('<span class="msg-image-missing">[image not shown: {}]</span>', what)
    url = f"{image_base}{index}/"
    return format_html(
        '<a class="msg-image-link" href="{}" target="_blank" rel="noopener"><img class="msg-image{}" src="{}" '
        'alt="image {} ({})" loading="lazy"></a>',
        url,
        " msg-image-small" if compact else "",
        url,
        index + 1,
        what,
    )


def _size(count: int) -> str:
    if count >= 1024 * 1024:
        return f"{count / (1024 * 1024):.1f} MB"
    if count >= 1024:
        return f"{count / 1024:.0f} KB"
    return f"{count} bytes"


# --- messages as blocks --------------------------------------------------------------------------


def _message(entry: Mapping[str, Any]) -> Mapping[str, Any] | None:
    message = entry.get("message") if entry.get("type") == "message" else None
    return message if isinstance(message, Mapping) else None


def _text_html(text: str, *, compact: bool) -> SafeString:
    shown, _ = _cut(text, ROW_TEXT_CHARS if compact else PANEL_TEXT_CHARS)
    return format_html('<div class="msg-text">{}</div>', markdown_html(shown))


def _pre(text: str, limit: int | None, css: str) -> SafeString:
    shown = _cut(text, limit)[0] if limit is not None else text
    return format_html('<pre class="{}">{}</pre>', css, shown)


def _arguments(arguments: Any, *, compact: bool) -> str:
    if isinstance(arguments, str):
        return arguments
    if compact:
        return to_json(arguments)
    return to_json(arguments, pretty=True)


def _content_blocks(content: Any, image_base: str | None, *, compact: bool) -> Iterator[SafeString]:
    if isinstance(content, str):
        if content:
            yield _text_html(content, compact=compact)
        return
    if not isinstance(content, list):
        return
    image_index = 0
    for block in content:
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "text":
            text = block.get("text")
            if isinstance(text, str) and text:
                yield _text_html(text, compact=compact)
        elif kind == "thinking":
            thinking = block.get("thinking")
            if not isinstance(thinking, str) or not thinking:
                continue
            if compact:
                yield format_html('<div class="msg-thinking-chip">thinking: {}</div>', shorten(thinking, 160))
            else:
                yield format_html(
                    '<details class="msg-thinking"><summary>thinking</summary>{}</details>',
                    _text_html(thinking, compact=False),
                )
        elif kind == "toolCall":
            yield format_html(
                '<div class="msg-block msg-tool-call"><div class="msg-block-head">tool call <code>{}</code>{}</div>{}</div>',
                str(block.get("name") or "?"),
                format_html(' <span class="quiet">{}</span>', block["id"]) if block.get("id") and not compact else "",
                _pre(
                    _arguments(block.get("arguments", {}), compact=compact),
                    ROW_TOOL_CHARS if compact else None,
                    "msg-code",
                ),
            )
        elif kind == "image":
            yield _image_html(block, image_index, image_base, compact=compact)
            image_index += 1
        else:
            yield format_html(
                '<div class="msg-block msg-other"><div class="msg-block-head">{} block</div>{}</div>',
                str(kind),
                _pre(to_json(block, pretty=not compact), ROW_TOOL_CHARS if compact else None, "msg-code"),
            )


def _tool_result_text(content: Any) -> tuple[str, list[Mapping[str, Any]]]:
    if isinstance(content, str):
        return content, []
    texts: list[str] = []
    rest: list[Mapping[str, Any]] = []
    if isinstance(content, list):
        for block in content:
            if isinstance(block, Mapping) and block.get("type") == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif isinstance(block, Mapping):
                rest.append(block)
    return "\n".join(texts), rest


def message_html(message: Mapping[str, Any], *, image_base: str | None = None, compact: bool = False) -> SafeString:
    """One agent message as HTML blocks (no role heading: the row or panel shows the role)."""
    role = message.get("role")
    parts: list[SafeString] = []
    if role == "toolResult":
        text, rest = _tool_result_text(message.get("content"))
        error = bool(message.get("isError"))
        parts.append(
            format_html(
                '<div class="msg-block msg-tool-result{}"><div class="msg-block-head">result of <code>{}</code>{}</div>{}</div>',
                " msg-error" if error else "",
                str(message.get("toolName") or "?"),
                " (error)" if error else "",
                _pre(text, ROW_TOOL_CHARS if compact else PANEL_TEXT_CHARS, "msg-code") if text else "",
            )
        )
        parts.extend(_content_blocks(rest, image_base, compact=compact))
    elif role == "bashExecution":
        command = str(message.get("command") or "")
        output = str(message.get("output") or "")
        parts.append(
            format_html(
                '<div class="msg-block msg-bash"><div class="msg-block-head">shell</div>{}</div>',
                _pre(f"$ {command}\n{output}", ROW_TOOL_CHARS if compact else PANEL_TEXT_CHARS, "msg-code"),
            )
        )
    elif role in ("compactionSummary", "branchSummary"):
        parts.append(_text_html(str(message.get("summary") or ""), compact=compact))
    else:
        parts.extend(_content_blocks(message.get("content"), image_base, compact=compact))
        error_text = message.get("errorMessage")
        if isinstance(error_text, str) and error_text:
            parts.append(format_html('<div class="msg-error-text">error: {}</div>', error_text))
    if not parts:
        return format_html('<div class="msg-empty quiet">{}</div>', "(no content)")
    return SafeString("".join(parts))


def entry_body_html(entry: Entry, *, image_base: str | None = None, compact: bool = False) -> SafeString | None:
    """The readable body of an entry that holds a conversation's words (a
    message, a custom message, a compaction or branch summary), as HTML;
    ``None`` for the others (their one-line preview says it all)."""
    kind = entry.get("type")
    message = _message(entry)
    if message is not None:
        return message_html(message, image_base=image_base, compact=compact)
    if kind == "custom_message":
        blocks = list(_content_blocks(entry.get("content"), image_base, compact=compact))
        return SafeString("".join(blocks)) if blocks else None
    if kind in ("compaction", "branch_summary"):
        summary = entry.get("summary")
        if isinstance(summary, str) and summary:
            return _text_html(summary, compact=compact)
    return None


# Tree rows rendered per process, keyed by the entry's bytes: the same content
# renders the same (an erased entry has other bytes, so it renders anew).
_ROW_BODIES: OrderedDict[tuple[str, bytes], SafeString | None] = OrderedDict()
_ROW_BODIES_LOCK = threading.Lock()
ROW_BODY_CACHE = 6_000


def row_body_html(entry: Entry, *, image_base: str) -> SafeString | None:
    """``entry_body_html(entry, compact=True)``, kept per process for the
    tree page's rows (a page of 1,500 rows viewed again renders nothing)."""
    try:
        key = (image_base, orjson.dumps(entry))
    except TypeError:  # a value orjson refuses: render, keep nothing
        return entry_body_html(entry, image_base=image_base, compact=True)
    with _ROW_BODIES_LOCK:
        if key in _ROW_BODIES:
            _ROW_BODIES.move_to_end(key)
            return _ROW_BODIES[key]
    body = entry_body_html(entry, image_base=image_base, compact=True)
    with _ROW_BODIES_LOCK:
        _ROW_BODIES[key] = body
        while len(_ROW_BODIES) > ROW_BODY_CACHE:
            _ROW_BODIES.popitem(last=False)
    return body


# --- what differs between two texts -----------------------------------------------------------------

DIFF_WORDS = 3000  # a longer text is compared as a whole, not word by word
_WORDS = re.compile(r"\s+|[^\s]+")


def word_diff_html(old: str, new: str) -> tuple[SafeString, SafeString] | None:
    """``old`` and ``new`` with the words only one of them has marked
    (``<del>`` on the old side, ``<ins>`` on the new); ``None`` when they are
    too long to compare word by word."""
    a = _WORDS.findall(old)
    b = _WORDS.findall(new)
    if len(a) > DIFF_WORDS or len(b) > DIFF_WORDS:
        return None
    left: list[SafeString] = []
    right: list[SafeString] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        old_part = "".join(a[i1:i2])
        new_part = "".join(b[j1:j2])
        if tag == "equal":
            left.append(escape(old_part))
            right.append(escape(new_part))
            continue
        if old_part:
            left.append(format_html("<del>{}</del>", old_part))
        if new_part:
            right.append(format_html("<ins>{}</ins>", new_part))
    return SafeString("".join(left)), SafeString("".join(right))


__all__ = [
    "IMAGE_TYPES",
    "entry_body_html",
    "image_blocks",
    "image_bytes",
    "markdown_html",
    "message_html",
    "row_body_html",
    "word_diff_html",
]
