"""The operator console of issue 25, server side: rendered messages safe against
hostile content, deep links, the alternatives pager, compare from named tips
aligned by content, find in the text, token totals explained, stale
confirmations, one time format, one channel casing, one lineage section, unique
element ids, linked audit rows, a favicon, the wording. (The browser tests in
tests/browser/test_console.py drive the same in Chromium.)"""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from sessiontree import services
from sessiontree.admin.entry_display import shorten
from sessiontree.models import AgentSession, AuditRecord
from sessiontree.selectors.entry_context import compare_leaves

from .conftest import BUILDER, action_url, labelled, leaf_of, provider_of, tree_url
from .console_sessions import alternatives_session, hostile_session, message, rich_session

pytestmark = pytest.mark.django_db

MOMENT = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC$")


class Page(HTMLParser):
    """Every element of a page: (tag, attributes), and the text of <time> elements."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str]]] = []
        self.times: list[str] = []
        self._in_time = False
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, {name: value or "" for name, value in attrs}))
        self._in_time = tag == "time"
        if self._in_time:
            self.times.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "time":
            self._in_time = False

    def handle_data(self, data: str) -> None:
        if self._in_time:
            self.times[-1] += data

    def ids(self) -> list[str]:
        return [attrs["id"] for _tag, attrs in self.elements if "id" in attrs]


def html_of(response) -> str:
    assert response.status_code == 200, response.status_code
    return response.content.decode()


def messages_of(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


# --- rendered messages ----------------------------------------------------------------------


def test_messages_render_as_a_conversation_in_the_tree_and_the_panel(admin_client, kind):
    row = rich_session(kind)

    tree = html_of(admin_client.get(tree_url(row)))
    panel = html_of(admin_client.get(tree_url(row, "tree_entry", "a0000002")))

    # Markdown (bold, lists, code) rendered, not shown as source.
    assert "<strong>fix</strong>" in tree and "<code>total()</code>" in tree and "<li>round once</li>" in tree
    # A tool call and its result as blocks, the call's arguments shown.
    assert 'class="msg-block msg-tool-call"' in tree and "billing/invoice.py" in tree
    assert 'class="msg-block msg-tool-result"' in tree
    assert 'class="msg-block msg-tool-result msg-error"' in tree  # an error result says so
    # The image as a thumbnail served by the entry's image URL.
    image_url = tree_url(row, "tree_image", "a0000004", "0")
    assert f'<img class="msg-image msg-image-small" src="{image_url}"' in tree
    # Summaries as text (markdown), never as escaped JSON.
    assert "<strong>integer cents</strong>" in tree and "<em>rounding</em>" in tree
    assert "&quot;summary&quot;" not in tree
    # The panel shows the whole message: thinking folded, code as a block.
    assert '<details class="msg-thinking">' in panel and '<code class="language-python">' in panel


def test_an_image_is_served_only_as_the_raster_image_it_says_it_is(admin_client, kind):
    row = rich_session(kind)
    hostile = hostile_session(kind)

    image = admin_client.get(tree_url(row, "tree_image", "a0000004", "0"))

    assert image.status_code == 200 and image["Content-Type"] == "image/png"
    assert image["X-Content-Type-Options"] == "nosniff"
    assert image.content.startswith(b"\x89PNG")
    assert admin_client.get(tree_url(row, "tree_image", "a0000004", "1")).status_code == 404
    assert admin_client.get(tree_url(hostile, "tree_image", "b0000002", "0")).status_code == 404  # SVG
    assert admin_client.get(tree_url(hostile, "tree_image", "b0000002", "1")).status_code == 404  # not base64


def assert_no_markup_from_content(html: str, page_urls: tuple[str, ...]) -> None:
    page = Page(html)
    for tag, attrs in page.elements:
        assert tag not in ("iframe", "object", "embed", "style", "base"), (tag, attrs)
        for name, value in attrs.items():
            assert not name.startswith("on"), (tag, attrs)
            if name in ("href", "src", "action", "formaction"):
                lowered = "".join(value.split()).lower()
                assert not lowered.startswith(("javascript:", "data:", "vbscript:")), (tag, attrs)
        if tag == "script":
            assert attrs.get("src", "").startswith("/static/"), attrs  # only the admin's own files
        if tag == "img":
            assert attrs["src"].startswith(page_urls), attrs  # never a tracking pixel or a data URL
    assert "<script>window.__pwned" not in html and 'onerror="window' not in html


def test_hostile_content_is_shown_never_run(admin_client, kind):
    row = hostile_session(kind)
    own = ("/static/", tree_url(row, "tree_entry", "x").rsplit("x/", 1)[0])

    pages = [
        admin_client.get(tree_url(row)),
        admin_client.get(tree_url(row), {"q": "click"}),
        admin_client.get(tree_url(row), {"focus": "b0000008"}),
        admin_client.get(tree_url(row, "tree_compare"), {"a": "b0000007", "b": "b0000008"}),
        *(admin_client.get(tree_url(row, "tree_entry", f"b000000{n}")) for n in range(1, 9)),
    ]
    for response in pages:
        html = html_of(response)
        assert_no_markup_from_content(html, own)
    tree = pages[0].content.decode()
    assert "&lt;script&gt;window.__pwned = &#x27;script&#x27;&lt;/script&gt;" in tree  # shown, as text
    assert "[click me](javascript:window.__pwned=&#x27;link&#x27;)" in tree  # not a link
    assert 'href="https://tracker.example.com/p.gif"' in tree and "[image: pixel]" in tree  # a link, never loaded
    panel = pages[5].content.decode()  # the assistant message, in full
    assert "[image not shown: image/svg+xml" in panel and "[image not shown: image/png" in panel
    assert pages[0]["Content-Security-Policy"].startswith("default-src 'self'; script-src 'self'")


# --- deep links ----------------------------------------------------------------------------------


def test_an_unknown_focus_or_line_says_so(admin_client, branched):
    html = html_of(admin_client.get(tree_url(branched), {"focus": "deadbeef"}))

    assert 'id="unknown-focus"' in html and "No entry <code>deadbeef</code> in this session" in html
    assert 'data-focus=""' in html  # nothing is opened

    html = html_of(admin_client.get(tree_url(branched), {"line": "deadbeef"}))
    assert 'id="unknown-line"' in html

    known = labelled(branched, "decimal fix")
    assert "unknown-focus" not in html_of(admin_client.get(tree_url(branched), {"focus": known}))


def test_every_view_state_has_an_address(admin_client, branched):
    leaf = leaf_of(branched)
    html = html_of(admin_client.get(tree_url(branched)))

    # Entries, the leaf and matches link to the tree page with ?focus= (the panel open), not to a fragment.
    assert f'<a class="entry-id" href="{tree_url(branched)}?focus={leaf}">' in html
    assert f'id="jump-leaf" href="{tree_url(branched)}?focus={leaf}"' in html
    found = html_of(admin_client.get(tree_url(branched), {"q": "decimal", "show": "messages"}))
    assert 'name="q" id="filter-q" value="decimal"' in found and '<option value="messages" selected>' in found
    # The alternatives pager keeps the filters.
    assert f"{tree_url(branched)}?show=messages&amp;q=decimal&amp;line=" in found


# --- the alternatives pager ---------------------------------------------------------------------------


def test_every_alternative_at_a_branch_point_has_a_pager(admin_client, kind):
    row = alternatives_session(kind)

    html = html_of(admin_client.get(tree_url(row)))

    # The line goes through the active alternative (2 of 3); its pager links the other two.
    pager = re.search(r'id="entry-c0000003".*?<span class="alt-pager"[^>]*>(.*?)</span></span>', html, re.S)
    assert pager is not None
    assert 'aria-label="alternative 2 of 3"' in html and ">2/3<" in pager.group(1)
    assert f"{tree_url(row)}?line=c0000002&amp;focus=c0000002" in pager.group(1)
    assert f"{tree_url(row)}?line=c0000004&amp;focus=c0000004" in pager.group(1)
    assert 'data-prev="c0000002" data-next="c0000004"' in html
    assert re.search(r'id="entry-c0000001".*?class="fork-mark"[^>]*>⎇ 3<', html, re.S)

    flipped = html_of(admin_client.get(tree_url(row), {"line": "c0000004", "focus": "c0000004"}))

    # The main line now goes through the third answer and on to its follow-up; the active path stays marked.
    rows = re.findall(r'<div class="entry[^"]*" id="entry-([^"]+)"', flipped)
    assert rows[:1] == ["c0000001"] and "c0000004" in rows and "c0000006" in rows
    assert ">3/3<" in flipped and 'id="back-to-active"' in flipped
    assert re.search(r'class="entry active" id="entry-c0000001"', flipped)
    assert not re.search(r'class="entry active[^"]*" id="entry-c0000004"', flipped)
    assert "⑂" not in flipped  # the glyph no default Debian font has


# --- compare -------------------------------------------------------------------------------------------


def test_compare_opens_on_the_leaf_and_the_latest_other_branch_named(admin_client, branched):
    html = html_of(admin_client.get(tree_url(branched, "tree_compare")))

    leaf = leaf_of(branched)
    options = re.findall(r'<select name="a" id="compare-a".*?</select>', html, re.S)[0]
    assert f'<option value="{leaf}" selected>{leaf} · the leaf (active path)' in options
    # Tips are named by their label and first message, not bare ids.
    assert "“decimal fix” — user: Use Decimal with ROUND_HALF_UP." in options
    assert 'id="compare-table"' in html and "Common ancestor:" in html  # a comparison without choosing
    assert not re.search(r"<thead>.*?<code>.*?</thead>", html, re.S)  # no id in an upper-cased header


def test_compare_aligns_from_the_common_ancestor_by_content(admin_client, kind):
    entries = [
        message("d0000001", None, {"role": "user", "content": "Plan the trip."}),
        # A: a model change first, then the same question as B, then different answers.
        {
            "type": "model_change",
            "id": "d0000002",
            "parentId": "d0000001",
            "timestamp": "2026-11-20T14:03:05.000Z",
            "provider": "openai",
            "modelId": "gpt-5",
        },
        message("d0000003", "d0000002", {"role": "user", "content": "Which city first?"}),
        message(
            "d0000004", "d0000003", {"role": "assistant", "content": [{"type": "text", "text": "Rome, then Florence."}]}
        ),
        message("d0000005", "d0000001", {"role": "user", "content": "Which city first?"}),
        message(
            "d0000006", "d0000005", {"role": "assistant", "content": [{"type": "text", "text": "Florence, then Rome."}]}
        ),
    ]
    services.sessions.create_session(actor=BUILDER, channel="internal", kind=kind, session_id="trip", entries=entries)
    row = AgentSession.objects.get(session_id="trip")

    comparison = compare_leaves(provider_of(row), "trip", "d0000004", "d0000006")

    kinds = [(aligned.kind, (aligned.a or {}).get("id"), (aligned.b or {}).get("id")) for aligned in comparison.rows]
    # By index, the model change would face the question and the questions the answers.
    assert kinds == [
        ("only_a", "d0000002", None),
        ("same", "d0000003", "d0000005"),
        ("changed", "d0000004", "d0000006"),
    ]
    html = html_of(admin_client.get(tree_url(row, "tree_compare"), {"a": "d0000004", "b": "d0000006"}))
    assert "1 the same on both sides" in html and "1 changed" in html
    assert "<del>" in html and "<ins>" in html  # what differs in the changed answers


# --- find ---------------------------------------------------------------------------------------------------


def test_find_searches_the_text_not_the_json(admin_client, branched):
    def found(q: str) -> list[str]:
        return [e["id"] for e in admin_client.get(tree_url(branched), {"q": q}).context["matches"].entries]

    assert found("usage") == []  # a key of every assistant message
    assert found("role") == [] and found("timestamp") == [] and found("parentId") == []
    assert len(found("integer cents")) == 3
    assert len(found("decimal fix")) == 1  # the label entry's text
    leaf = leaf_of(branched)
    assert leaf in found(leaf)  # an entry id finds that entry


# --- token totals -------------------------------------------------------------------------------------------


def test_the_entry_panel_says_how_its_token_total_is_counted(admin_client, kind):
    row = rich_session(kind)
    detail_html = html_of(admin_client.get(tree_url(row, "tree_entry", "a0000003")))

    explanation = re.search(r'<p class="token-explanation"[^>]*>(.*?)</p>', detail_html, re.S).group(1)
    numbers = [int(n) for n in re.findall(r"<strong>(\d+)</strong>", explanation)]
    total = int(re.search(r"How the (\d+) tokens are counted", explanation).group(1))
    reported, estimated, rows = numbers[:3]
    assert reported == 1000 and reported + estimated == total  # the provider's usage + the estimate after it
    assert "as the provider reported them in the usage of assistant reply" in explanation
    assert rows < total  # the rows count their own text only: said, not left to puzzle over
    assert 'data-entry-link="a0000002"' in explanation


# --- confirmations ---------------------------------------------------------------------------------------------


def test_a_stale_confirmation_shows_the_tree_as_it_is_and_confirming_acts_on_it(moderator_client, branched):
    seen = leaf_of(branched)
    target = labelled(branched, "decimal fix")
    appended = services.entries.append_message(
        session_id=branched.session_id,
        message={"role": "user", "content": "one more"},
        actor=BUILDER,
        channel="internal",
    )
    now = appended["id"]

    page = html_of(
        moderator_client.post(action_url(branched, "switch_leaf"), {"entry_id": target, "expected_leaf": seen})
    )

    assert 'id="leaf-moved"' in page and f"you saw <code>{seen}</code>, it is now <code>{now}</code>" in page
    assert f"The leaf moves from {now}" in page  # the current leaf, said to be the current one
    assert f'<input type="hidden" name="expected_leaf" value="{now}">' in page
    done = moderator_client.post(
        action_url(branched, "switch_leaf"), {"entry_id": target, "expected_leaf": now, "confirmed": "yes"}
    )
    assert done.status_code == 302 and leaf_of(branched) == target


def test_yes_on_a_stale_page_does_nothing_and_shows_it_again(moderator_client, compacted):
    seen = leaf_of(compacted)
    count = len(provider_of(compacted).list_entries(compacted.session_id))
    services.entries.append_message(
        session_id=compacted.session_id,
        message={"role": "user", "content": "x " * 400},
        actor=BUILDER,
        channel="internal",
    )

    done = moderator_client.post(
        action_url(compacted, "compact"),
        {"expected_leaf": seen, "keep_recent_tokens": "10", "confirmed": "yes"},
    )

    # The compaction was checked against the leaf the operator saw: nothing appended.
    assert len(provider_of(compacted).list_entries(compacted.session_id)) == count + 1
    html = html_of(done)
    assert 'id="leaf-moved"' in html and 'id="confirm-action"' in html
    assert any("leaf_conflict" in m for m in messages_of(done))


def test_nothing_to_compact_does_not_ask_are_you_sure(moderator_client, branched):
    html = html_of(
        moderator_client.post(
            action_url(branched, "compact"), {"expected_leaf": leaf_of(branched), "keep_recent_tokens": "100000"}
        )
    )

    assert "Nothing to compact" in html
    assert "are you sure" not in html and "Compact now: nothing to do" in html
    assert 'id="confirm-action"' not in html


def test_previews_end_at_a_word_with_an_ellipsis(moderator_client, kind):
    assert shorten("alpha beta gamma delta", 14) == "alpha beta…"
    assert shorten("supercalifragilistic", 8) == "superca…"  # one long word: cut, and said to be
    assert shorten("short", 10) == "short"
    row = alternatives_session(kind)
    long_text = "word " * 60
    services.entries.append_message(
        session_id=row.session_id, message={"role": "user", "content": long_text}, actor=BUILDER, channel="internal"
    )
    html = html_of(moderator_client.post(action_url(row, "reset_leaf"), {"expected_leaf": leaf_of(row)}))

    shown = re.search(r"The leaf moves from \w+ \(user: ([^)]*)\)", html).group(1)
    assert shown.endswith("word…") and len(shown) <= 80


# --- times, channels, lineage, ids, audit links, favicon ---------------------------------------------------------


def test_times_have_one_format_with_the_zone(admin_client, moderator_client, branched):
    moderator_client.post(action_url(branched, "set_label"), {"entry_id": leaf_of(branched), "label": "seen"})
    pages = [
        admin_client.get(tree_url(branched)),
        admin_client.get(tree_url(branched, "tree_entry", leaf_of(branched))),
        admin_client.get(reverse("admin:sessiontree_agentsession_changelist")),
        admin_client.get(reverse("admin:sessiontree_auditrecord_changelist")),
        admin_client.get(reverse("admin:sessiontree_agentsession_change", args=[branched.pk])),
    ]
    for response in pages:
        html = html_of(response)
        times = Page(html).times
        assert times, response.wsgi_request.path
        assert all(MOMENT.match(text) for text in times), times
        assert not re.search(r"\b[ap]\.m\.", html)  # Django's default "2:03 p.m." is gone


def test_channels_read_the_same_on_every_page(admin_client, moderator_client, branched):
    moderator_client.post(action_url(branched, "set_label"), {"entry_id": leaf_of(branched), "label": "seen"})

    audit_list = html_of(admin_client.get(reverse("admin:sessiontree_auditrecord_changelist")))
    tree = html_of(admin_client.get(tree_url(branched)))

    assert '<td class="field-channel_name">admin</td>' in audit_list and "<td>admin</td>" in tree
    assert ">Admin<" not in audit_list and ">Internal<" not in audit_list  # the filter too
    filtered = admin_client.get(reverse("admin:sessiontree_auditrecord_changelist"), {"channel": "admin"})
    assert all(record.channel == "admin" for record in filtered.context["cl"].result_list)


def test_audit_rows_link_to_their_session(admin_client, moderator_client, branched):
    moderator_client.post(action_url(branched, "set_label"), {"entry_id": leaf_of(branched), "label": "seen"})
    AuditRecord.objects.create(actor="x", channel="api", operation="delete_session", session_id="gone-for-good")

    html = html_of(admin_client.get(reverse("admin:sessiontree_auditrecord_changelist")))

    assert f'<a href="{tree_url(branched)}">{branched.session_id}</a>' in html
    assert "gone-for-good <em>(deleted)</em>" in html


def test_the_change_page_has_one_lineage_section(admin_client, branched):
    html = html_of(admin_client.get(reverse("admin:sessiontree_agentsession_change", args=[branched.pk])))

    assert len(re.findall(r"<h2[^>]*>\s*Lineage\s*</h2>", html)) == 1


def test_element_ids_are_unique_on_every_page_and_with_the_panel_open(admin_client, kind):
    row = rich_session(kind)
    tree = html_of(admin_client.get(tree_url(row)))
    panel = html_of(admin_client.get(tree_url(row, "tree_entry", "a0000004")))
    pages = {
        "tree + panel": tree + panel,  # the panel is loaded into the tree page
        "compare": html_of(admin_client.get(tree_url(row, "tree_compare"))),
        "change": html_of(admin_client.get(reverse("admin:sessiontree_agentsession_change", args=[row.pk]))),
        "list": html_of(admin_client.get(reverse("admin:sessiontree_agentsession_changelist"))),
    }
    for name, html in pages.items():
        ids = Page(html).ids()
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        assert not duplicates, (name, duplicates)


def test_every_page_names_its_icon(admin_client, client, branched):
    for url in (tree_url(branched), reverse("admin:index"), reverse("admin:login")):
        html = html_of((admin_client if url != reverse("admin:login") else client).get(url))
        assert re.search(r'<link rel="icon" href="/static/sessiontree/favicon.svg"', html), url
    response = client.get("/favicon.ico")
    assert response.status_code == 302 and response["Location"] == "/static/sessiontree/favicon.svg"
    from django.contrib.staticfiles import finders

    assert finders.find("sessiontree/favicon.svg")


@pytest.mark.parametrize(
    "value", ["<script>x</script>", "\" onmouseover='x'", "a & b", 42, None, "\u2019 unicode \u2387"]
)
def test_the_rows_escape_as_format_html_does(value):
    from django.utils.html import format_html
    from django.utils.safestring import mark_safe

    from sessiontree.admin.tree_rows import html

    assert html('<b title="{}">{}</b>', value, value) == format_html('<b title="{}">{}</b>', value, value)
    assert html("<i>{}</i>", mark_safe("<em>kept</em>")) == "<i><em>kept</em></i>"


@pytest.mark.parametrize(
    "text",
    [
        "hello",
        "step 3: look at this",
        "line one\nline two",
        "para one\n\npara two\n  indented two",
        "trailing  \nnext",
        "a\r\nb\n\n\n\nc",
        "quote \"x\" and 'y', emoji 🎉 — fine.",
    ],
)
def test_prose_renders_as_markdown_it_would_without_parsing(text):
    from html import unescape

    from sessiontree.admin.rendering import _MARKDOWN, markdown_html

    # The shortcut for text without markdown gives the same HTML (an apostrophe may be escaped).
    assert unescape(markdown_html(text)) == unescape(_MARKDOWN.render(text))


@pytest.mark.parametrize(
    "text", ["**b**", "# h", "- item", "1. one", "    code", "a <b> c", "[l](https://x.y)", "x & y"]
)
def test_text_with_markdown_is_parsed(text):
    from sessiontree.admin.rendering import _MARKDOWN, markdown_html

    assert markdown_html(text) == _MARKDOWN.render(text)


def test_the_audit_list_reads_neither_the_ids_nor_the_details_it_does_not_show(
    admin_client, moderator_client, branched
):
    """An import's record lists every id of its batch (55 KB at 5,000 entries):
    the list of records shows neither that nor the detail, and reads neither;
    a record's own page shows both."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    moderator_client.post(action_url(branched, "set_label"), {"entry_id": leaf_of(branched), "label": "seen"})
    with CaptureQueriesContext(connection) as captured:
        html = html_of(admin_client.get(reverse("admin:sessiontree_auditrecord_changelist")))
    listed = [
        q["sql"] for q in captured.captured_queries if "FROM `sessiontree_auditrecord`" in q["sql"].replace('"', "`")
    ]
    assert listed and not any("entry_ids" in sql or "`detail`" in sql.replace('"', "`") for sql in listed), listed
    assert "set_label" in html
    record = AuditRecord.objects.filter(operation="set_label").latest("created_at")
    page = html_of(admin_client.get(reverse("admin:sessiontree_auditrecord_change", args=[record.pk])))
    assert "seen" in page and leaf_of(branched) in page  # the detail (the label) and the entry ids
