"""The pure part of search: query terms and snippets."""

from __future__ import annotations

import html
import re

from hypothesis import given
from hypothesis import strategies as st

from sessiontree.core.search import MAX_TERMS, query_terms, snippet_html, term_words


def test_terms_are_pieces_with_a_word_in_them():
    assert query_terms('card  4111-1111 "bob@example.com" + - * () NOT') == [
        "card",
        "4111-1111",
        "bob@example.com",
        "NOT",
    ]
    assert query_terms('say "hello world"') == ["say", "hello", "world"]  # quotes are dropped, not phrases
    assert query_terms("Card card CARD") == ["Card"]
    assert query_terms("***  ") == [] and query_terms("") == []
    assert query_terms("a\x00b") == ["a", "b"]
    assert len(query_terms(" ".join(f"w{i}" for i in range(40)))) == MAX_TERMS
    assert term_words("bob@example.com") == ["bob", "example", "com"]


@given(st.text())
def test_no_term_holds_a_quote_or_white_space(q):
    for term in query_terms(q):
        assert '"' not in term and not re.search(r"\s", term) and "\x00" not in term and term_words(term)


def test_a_snippet_marks_the_words_and_escapes_the_rest():
    text = "<b>Hello</b> & welcome: my CARD is 4111-1111-1111-1111, the card."
    assert snippet_html(text, ["card"]) == (
        "&lt;b&gt;Hello&lt;/b&gt; &amp; welcome: my <mark>CARD</mark> is 4111-1111-1111-1111, the <mark>card</mark>."
    )
    long = "word " * 100 + "needle " + "word " * 100
    cut = snippet_html(long, ["needle"])
    assert cut.startswith("…") and cut.endswith("…") and "<mark>needle</mark>" in cut and len(cut) < 260
    assert snippet_html("nothing here", ["absent"]) == "nothing here"


@given(st.text(max_size=400), st.lists(st.text(max_size=12), max_size=4))
def test_a_snippet_is_safe_html_of_the_text(text, terms):
    snippet = snippet_html(text, terms)
    bare = snippet.replace("<mark>", "").replace("</mark>", "")
    assert "<" not in bare and ">" not in bare
    # What is shown is the text (white space folded), escaped.
    shown = html.unescape(bare).strip("…")
    assert shown in " ".join(text.split()) or not text.strip()
