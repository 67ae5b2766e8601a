"""The entry panel (JSON, path, label, context with left-out entries), two
leaves compared, and the Pi JSONL exports."""

from __future__ import annotations

import json
import re

import pytest

from sessiontree.core.compaction import estimate_context_tokens
from sessiontree.models import AuditRecord

from .conftest import labelled, leaf_of, provider_of, tree_url

pytestmark = pytest.mark.django_db


def test_entry_panel_shows_json_path_label_and_context(admin_client, branched):
    target = labelled(branched, "decimal fix")
    provider = provider_of(branched)
    path = provider.get_active_path(branched.session_id, target)
    context = provider.build_context(branched.session_id, target)

    response = admin_client.get(tree_url(branched, "tree_entry", target))

    assert response.status_code == 200
    html = response.content.decode()
    assert "&quot;type&quot;: &quot;message&quot;" in html  # pretty JSON (escaped), not a repr
    assert f"&quot;id&quot;: &quot;{target}&quot;" in html
    assert "“decimal fix”" in html
    assert f"Path: {len(path)} entries" in html
    assert re.findall(r'<a href="#entry-([^"]+)" data-entry-link', html) == [e["id"] for e in path]
    tokens = estimate_context_tokens(context["messages"]).tokens
    assert f"{len(context['messages'])} messages, about <strong>{tokens}</strong> tokens" in html
    assert html.count('class="step step-sent"') == len(context["messages"])
    assert "off the active path" in html
    assert f"?a={leaf_of(branched)}&amp;b={target}" in html  # compare with the leaf
    assert "Switch the leaf here" in html


def test_entry_panel_marks_entries_a_compaction_left_out(admin_client, compacted):
    leaf = leaf_of(compacted)
    path = provider_of(compacted).get_active_path(compacted.session_id)
    compaction = next(e for e in path if e["type"] == "compaction")
    cut = [e["id"] for e in path].index(compaction["firstKeptEntryId"])

    html = admin_client.get(tree_url(compacted, "tree_entry", leaf)).content.decode()

    # The steps are the context's segment, from the first kept entry to the
    # leaf; the entries above it are counted, not listed (issue 23).
    steps = re.findall(r'<li class="step step-[a-z_]+" data-entry-link="([^"]+)"', html)
    assert steps == [e["id"] for e in path[cut:]]
    assert 'class="step step-compacted"' not in html
    assert f'<strong class="left-out-count">{cut}</strong> entries on the path are left out' in html
    assert f"compaction <code>{compaction['id']}</code>" in html
    assert 'class="step step-summary"' in html


def test_entry_panel_of_a_roleplay_commit_shows_its_fields(admin_client, roleplay):
    commit = next(e for e in provider_of(roleplay).list_entries(roleplay.session_id) if e["type"] == "custom")

    html = admin_client.get(tree_url(roleplay, "tree_entry", commit["id"])).content.decode()

    assert "<th>commit</th><td>c1</td>" in html
    assert "<th>ops</th><td>add /hair = &quot;short&quot;</td>" in html


def test_compare_two_leaves(admin_client, branched):
    provider = provider_of(branched)
    leaf = leaf_of(branched)
    decimal = labelled(branched, "decimal fix")
    path_a = [e["id"] for e in provider.get_active_path(branched.session_id, leaf)]
    path_b = [e["id"] for e in provider.get_active_path(branched.session_id, decimal)]
    common = [a for a, b in zip(path_a, path_b, strict=False) if a == b][-1]

    response = admin_client.get(tree_url(branched, "tree_compare"), {"a": leaf, "b": decimal})

    assert response.status_code == 200
    comparison = response.context["comparison"]
    assert comparison.common_ancestor_id == common
    assert [e["id"] for e in comparison.a.entries] == path_a[path_a.index(common) + 1 :]
    assert [e["id"] for e in comparison.b.entries] == path_b[path_b.index(common) + 1 :]
    context_a = provider.build_context(branched.session_id, leaf)["messages"]
    assert comparison.a.context_tokens == estimate_context_tokens(context_a).tokens
    assert comparison.b.divergent_tokens > 0
    html = response.content.decode()
    assert "Common ancestor: <a" in html and common in html
    # Every divergent entry of each side is on exactly one aligned row.
    assert html.count('<tr class="compare-row') == len(comparison.rows)
    assert [r.a["id"] for r in comparison.rows if r.a] == [e["id"] for e in comparison.a.entries]
    assert [r.b["id"] for r in comparison.rows if r.b] == [e["id"] for e in comparison.b.entries]


def test_compare_offers_the_branch_tips(admin_client, branched):
    html = admin_client.get(tree_url(branched, "tree_compare")).content.decode()

    assert html.count('<option value="') == 2 * branched.branch_count  # one list per side
    assert admin_client.get(tree_url(branched, "tree_compare"), {"a": "nope", "b": "x"}).status_code == 200


@pytest.mark.parametrize("scope", ["full", "active", "subtree"])
def test_export_as_pi_jsonl(admin_client, admin_user, branched, scope):
    provider = provider_of(branched)
    entry = labelled(branched, "decimal fix") if scope == "subtree" else None
    query = {"scope": scope, **({"entry": entry} if entry else {})}

    response = admin_client.get(tree_url(branched, "tree_export"), query)

    assert response.status_code == 200
    assert "attachment" in response["Content-Disposition"]
    lines = [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()]
    assert lines[0]["type"] == "session" and lines[0]["id"] == branched.session_id
    ids = [e["id"] for e in lines[1:]]
    everything = [e["id"] for e in provider.list_entries(branched.session_id)]
    if scope == "full":
        assert ids == everything
    elif scope == "active":
        assert ids == [e["id"] for e in provider.get_active_path(branched.session_id)]
    else:
        assert entry in ids and len(ids) < len(everything)
    record = AuditRecord.objects.get(operation="export_session", session_id=branched.session_id)
    assert (record.actor, record.channel, record.detail["scope"]) == (admin_user.username, "admin", scope)


def test_export_of_an_unknown_entry_is_a_message(admin_client, branched):
    response = admin_client.get(tree_url(branched, "tree_export"), {"scope": "subtree", "entry": "nope"})

    assert response.status_code == 302
    assert not AuditRecord.objects.filter(operation="export_session").exists()


def test_view_only_staff_may_inspect_and_export(viewer_client, branched):
    assert viewer_client.get(tree_url(branched, "tree_entry", leaf_of(branched))).status_code == 200
    assert viewer_client.get(tree_url(branched, "tree_compare")).status_code == 200
    assert viewer_client.get(tree_url(branched, "tree_export"), {"scope": "active"}).status_code == 200
