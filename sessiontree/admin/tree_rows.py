"""The rows of a tree window as HTML: entries (with their rendered body, tags,
the alternatives pager, branch-point and leaf marks), folded branches and
collapsed runs.

Built with ``html`` (``format_html``'s rule: every argument escaped unless it
is already safe HTML, without Django's lazy-string wrappers per call) rather
than a template loop: a window holds up to 1,500 rows, and the template
engine's per-row cost was most of the tree page's time
(``bench/bench_admin.py``). The markup is the page's contract with
``tree.js``, the CSS and the tests; ``templates/admin/sessiontree/tree/
_rows.html`` only places it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

from django.utils.safestring import SafeString, mark_safe
from django.utils.text import slugify

from sessiontree.selectors.tree_window import TreeRow

LEAF_MARK = mark_safe('<span class="leaf-mark">← leaf</span>')
STREAMING = mark_safe('<span class="inflight">streaming</span>')
NO_PREV = mark_safe('<span class="alt-none" aria-hidden="true">&lsaquo;</span>')
NO_NEXT = mark_safe('<span class="alt-none" aria-hidden="true">&rsaquo;</span>')
EMPTY = mark_safe("")
# Django's escape() table: & < > " '
_ESCAPES = {ord("&"): "&amp;", ord("<"): "&lt;", ord(">"): "&gt;", ord('"'): "&quot;", ord("'"): "&#x27;"}


def html(template: str, *args: Any) -> SafeString:
    """``format_html(template, *args)``, faster: each argument escaped as Django's
    ``conditional_escape`` does (safe HTML kept, anything else as text)."""
    return SafeString(
        template.format(*(arg.__html__() if hasattr(arg, "__html__") else str(arg).translate(_ESCAPES) for arg in args))
    )


@lru_cache(maxsize=512)
def _slug(marker: str) -> str:
    return slugify(marker)


def _pager(row: TreeRow, line_url: str) -> SafeString:
    prev = (
        html(
            '<a class="alt-prev" href="{}{}&amp;focus={}" title="previous alternative" '
            'aria-label="previous alternative">&lsaquo;</a>',
            line_url,
            row.prev_sibling,
            row.prev_sibling,
        )
        if row.prev_sibling
        else NO_PREV
    )
    following = (
        html(
            '<a class="alt-next" href="{}{}&amp;focus={}" title="next alternative" aria-label="next alternative">&rsaquo;</a>',
            line_url,
            row.next_sibling,
            row.next_sibling,
        )
        if row.next_sibling
        else NO_NEXT
    )
    return html(
        '<span class="alt-pager" role="group" aria-label="alternative {} of {}">{}'
        '<span class="alt-count">{}/{}</span>{}</span>',
        row.sibling_index,
        row.sibling_count,
        prev,
        row.sibling_index,
        row.sibling_count,
        following,
    )


def _entry(row: TreeRow, urls: Mapping[str, str], flags: Mapping[str, int]) -> SafeString:
    classes = "entry"
    flagged = flags.get(row.entry_id, 0)
    if row.on_active_path:
        classes += " active"
    if row.is_leaf:
        classes += " leaf"
    if row.compacted_by:
        classes += " compacted"
    if row.unreachable:
        classes += " unreachable"
    attributes = html(
        "{}{}{}{}",
        html(' data-label="{}"', row.label) if row.label else EMPTY,
        html(' data-prev="{}"', row.prev_sibling) if row.prev_sibling else EMPTY,
        html(' data-next="{}"', row.next_sibling) if row.next_sibling else EMPTY,
        html(' title="{}"', row.preview) if not row.body else EMPTY,
    )
    tags = html(
        "{}{}{}",
        html('<span class="tag" title="label">{}</span>', row.label) if row.label else EMPTY,
        html(
            '<span class="flag-mark" title="{} open moderation flag{}">⚑ {}</span>',
            flagged,
            "" if flagged == 1 else "s",
            flagged,
        )
        if flagged
        else EMPTY,
        html(
            '<span class="cut" title="left out of the model\'s context by compaction {}">✂ left out</span>',
            row.compacted_by,
        )
        if row.compacted_by
        else EMPTY,
    )
    content = (
        html('<div class="row-body">{}</div>', row.body)
        if row.body
        else html('<span class="preview">{}</span>', row.preview)
    )
    end = html(
        "{}{}{}{}",
        _pager(row, urls["line"]) if row.sibling_count else EMPTY,
        html(
            '<span class="fork-mark" title="branch point: {} alternatives continue from here">⎇ {}</span>',
            row.child_count,
            row.child_count,
        )
        if row.is_branch_point
        else EMPTY,
        STREAMING if row.in_flight else EMPTY,
        LEAF_MARK if row.is_leaf else EMPTY,
    )
    return html(
        '<div class="{}" id="entry-{}" data-entry="{}" data-type="{}"{}><span class="depth" title="depth">{}</span>'
        '<a class="entry-id" href="{}?focus={}"><code>{}</code></a><span class="marker marker-{}">{}{}</span>{}{}'
        '<span class="entry-end">{}</span></div>\n',
        classes,
        row.entry_id,
        row.entry_id,
        (row.entry or {}).get("type", ""),
        attributes,
        row.depth,
        urls["tree"],
        row.entry_id,
        row.entry_id,
        _slug(row.marker),
        "unreachable " if row.unreachable else "",
        row.marker,
        tags,
        content,
        end,
    )


def _branch(row: TreeRow, urls: Mapping[str, str], line: str | None, flags: Mapping[str, int]) -> SafeString:
    return html(
        '<details class="branch"{} data-url="{}{}/?level={}" data-branch="{}"><summary>branch of {}{} entr{} from '
        '<code>{}</code> — <span class="branch-name">{}: {}</span></summary><div class="branch-body">{}</div></details>\n',
        mark_safe(' open data-loaded="1"') if row.open else EMPTY,
        urls["branch"],
        row.entry_id,
        row.level,
        row.entry_id,
        "more than " if row.size_more else EMPTY,
        row.size,
        "y" if row.size == 1 and not row.size_more else "ies",
        row.entry_id,
        row.marker,
        row.preview,
        rows_html(row.rows, urls, line, flags=flags) if row.open else EMPTY,
    )


def _run(row: TreeRow, urls: Mapping[str, str], line: str | None) -> SafeString:
    return html(
        '<div class="run" data-url="{}{}/?count={}&amp;level={}{}" data-run="{}"><button type="button" '
        'class="run-expand" title="a linear stretch, collapsed: show it">⋯ {} entries</button></div>\n',
        urls["run"],
        row.entry_id,
        row.size,
        row.level,
        html("&amp;line={}", line) if line else EMPTY,
        row.entry_id,
        row.size,
    )


def rows_html(
    rows: Iterable[TreeRow], urls: Mapping[str, str], line: str | None = None, *, flags: Mapping[str, int] | None = None
) -> SafeString:
    """The HTML of ``rows`` (an open branch's rows inside it); ``line``: the
    entry the page's main line goes through, carried by expanded runs;
    ``flags``: open moderation flags per entry id, marked on their rows."""
    parts: list[str] = []
    counts = flags or {}
    for row in rows:
        if row.kind == "entry":
            parts.append(_entry(row, urls, counts))
        elif row.kind == "branch":
            parts.append(_branch(row, urls, line, counts))
        else:
            parts.append(_run(row, urls, line))
    return mark_safe("".join(parts))  # every part comes from format_html
