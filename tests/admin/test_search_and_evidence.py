"""The admin's search page (entries across sessions, a highlighted snippet,
a link into the tree page at the entry; permission-checked) and the export
manifest beside each download (audited, the SHA-256 of the bytes)."""

from __future__ import annotations

import hashlib
import json

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils.http import urlencode

from sessiontree.admin.plugins import CONTENT_SECURITY_POLICY
from sessiontree.models import AuditRecord

from .conftest import labelled, staff, tree_url

# InnoDB's full-text index sees committed rows only: these tests commit.
pytestmark = pytest.mark.django_db(transaction=True)
SEARCH = "admin:sessiontree_agentsession_search"


def test_the_search_page_lists_entries_with_a_snippet_linking_into_the_tree(admin_client, branched):
    target = labelled(branched, "decimal fix")
    response = admin_client.get(reverse(SEARCH), {"q": "quantizes Decimal"})
    assert response.status_code == 200
    assert response["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
    html = response.content.decode()
    entry_url = tree_url(branched, "tree") + "?" + urlencode({"focus": target}) + f"#entry-{target}"
    assert f'href="{entry_url}"' in html
    assert "<mark>quantizes</mark>" in html and "<mark>Decimal</mark>" in html
    assert html.count('class="search-hit"') == 1
    assert "Every session is searched." in html


def test_filters_and_an_empty_result(admin_client, branched, kind):
    assert (
        admin_client.get(reverse(SEARCH), {"q": "quantizes", "provider": kind})
        .content.decode()
        .count('class="search-hit"')
        == 1
    )
    other = "mysql" if kind == "file" else "file"
    html = admin_client.get(reverse(SEARCH), {"q": "quantizes", "provider": other}).content.decode()
    assert 'class="search-hit"' not in html and "No entry holds these words." in html
    html = admin_client.get(reverse(SEARCH), {"q": "quantizes", "status": "archived"}).content.decode()
    assert 'class="search-hit"' not in html


def test_the_snippet_is_escaped(admin_client, branched):
    from sessiontree.services import entries

    entries.append_message(
        session_id=branched.session_id,
        message={"role": "user", "content": "<img src=x onerror=alert(1)> tarsier", "timestamp": 1},
        actor="t",
        channel="internal",
    )
    html = admin_client.get(reverse(SEARCH), {"q": "tarsier"}).content.decode()
    assert "<img src=x" not in html and "&lt;img src=x onerror=alert(1)&gt; <mark>tarsier</mark>" in html


def test_who_may_search(branched):
    nobody = staff("nobody")  # staff without a session permission
    client = Client()
    client.force_login(nobody)
    assert client.get(reverse(SEARCH), {"q": "Decimal"}).status_code == 403
    plain = User.objects.create_user("plain", password="pw")  # not staff: the admin sends them to log in
    client.force_login(plain)
    assert client.get(reverse(SEARCH), {"q": "Decimal"}).status_code == 302
    viewer = staff("viewer2", "view_agentsession")
    client.force_login(viewer)
    assert client.get(reverse(SEARCH), {"q": "quantizes"}).content.decode().count('class="search-hit"') == 1


def test_the_session_list_links_to_the_search(admin_client, branched):
    html = admin_client.get(reverse("admin:sessiontree_agentsession_changelist")).content.decode()
    assert f'href="{reverse(SEARCH)}"' in html


def test_a_manifest_beside_each_download(admin_client, admin_user, branched):
    page = admin_client.get(tree_url(branched)).content.decode()
    assert "scope=full&amp;manifest=1" in page and "scope=active&amp;manifest=1" in page
    download = admin_client.get(tree_url(branched, "tree_export"), {"scope": "active"})
    data = b"".join(download.streaming_content)
    response = admin_client.get(tree_url(branched, "tree_export"), {"scope": "active", "manifest": "1"})
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    assert response["Content-Disposition"] == f'attachment; filename="{branched.session_id}-active.manifest.json"'
    manifest = json.loads(response.content)
    assert manifest["sha256"] == hashlib.sha256(data).hexdigest()
    assert (manifest["session_id"], manifest["scope"], manifest["exporter"], manifest["channel"]) == (
        branched.session_id,
        "active",
        admin_user.username,
        "admin",
    )
    assert manifest["entry_count"] == len(data.splitlines()) - 1 and manifest["bytes"] == len(data)
    records = list(AuditRecord.objects.filter(operation="export_session").order_by("id"))
    assert [r.detail.get("manifest_only", False) for r in records] == [False, True]
    assert all(r.detail["sha256"] == manifest["sha256"] for r in records)
