"""``sessiontree`` imports nothing from ``roleplay``: roleplay plugs its admin
pages, links, markers and renderers into the session admin
(``sessiontree/admin/plugins.py``) from ``RoleplayConfig.ready()``.

The AST walk is the plain-pytest guard of that rule; the rest tests the
plug-in registry itself: what a plug-in adds, that the session admin works
with none registered (as without the roleplay app), and that a failing
plug-in never breaks a session's page.
"""

from __future__ import annotations

import ast
import logging
import types
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.contrib import admin
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpResponse
from django.test import Client, override_settings
from django.urls import NoReverseMatch, path, reverse
from django.utils.html import format_html

from roleplay.admin import PLUGIN_NAME, register_admin_plugin
from sessiontree.admin import plugins
from sessiontree.admin.plugins import PageContext, SessionAdminPlugin, SessionLink, SessionPage
from sessiontree.admin.sessions import AgentSessionAdmin
from sessiontree.management.commands.load_demo import build_roleplay
from sessiontree.models import AgentSession
from sessiontree.providers.factory import get_provider
from tests.admin.conftest import build, staff, tree_url

SESSIONTREE = Path(__file__).resolve().parent.parent / "sessiontree"
ROLEPLAY_PAGES = {"sessiontree_agentsession_roleplay", "sessiontree_agentsession_roleplay_diff"}
ROLEPLAY_PAGES |= {"sessiontree_agentsession_roleplay_action"}


# --- the import rule -----------------------------------------------------------------------------


def _is_roleplay(module: str | None) -> bool:
    return module is not None and (module == "roleplay" or module.startswith("roleplay."))


def roleplay_imports(source: str, filename: str) -> list[str]:
    """Every place ``source`` imports roleplay: import statements, and
    ``import_module``/``import_string``/``__import__`` of a literal name."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            found += [f"{filename}:{node.lineno} import {a.name}" for a in node.names if _is_roleplay(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and _is_roleplay(node.module):
            found.append(f"{filename}:{node.lineno} from {node.module} import …")
        elif isinstance(node, ast.Call) and node.args:
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            first = node.args[0]
            if (
                name in ("import_module", "import_string", "__import__")
                and isinstance(first, ast.Constant)
                and isinstance(first.value, str)
                and _is_roleplay(first.value)
            ):
                found.append(f"{filename}:{node.lineno} {name}({first.value!r})")
    return found


def test_no_module_under_sessiontree_imports_roleplay():
    files = sorted(SESSIONTREE.rglob("*.py"))
    assert len(files) > 50  # the walk found the package
    found = [hit for path in files for hit in roleplay_imports(path.read_text(), str(path.relative_to(SESSIONTREE)))]
    assert found == []


@pytest.mark.parametrize(
    "source",
    [
        "from roleplay.schema import roleplay_entry_kind",
        "import roleplay.service as service",
        "def f():\n    from roleplay import service",
        "import importlib\nimportlib.import_module('roleplay.admin')",
        "from django.utils.module_loading import import_string\nimport_string('roleplay.service.inspect_state')",
    ],
)
def test_the_walk_finds_every_form_of_import(source):
    assert roleplay_imports(source, "x.py")


def test_the_walk_leaves_mentions_and_other_packages_alone():
    source = '"""The roleplay layer plugs in."""\nfrom sessiontree import roleplay_like\nimport roleplaying\n'
    assert roleplay_imports(source, "x.py") == []


# --- the registry -----------------------------------------------------------------------------


def url_names(model_admin: AgentSessionAdmin) -> set[str]:
    return {pattern.name for pattern in model_admin.get_urls() if getattr(pattern, "name", None)}


def session_admin() -> AgentSessionAdmin:
    return AgentSessionAdmin(AgentSession, admin.site)


@contextmanager
def admin_with(*registered: SessionAdminPlugin) -> Iterator[plugins.PluginRegistry]:
    """The admin with only ``registered`` plug-ins, its URLs built anew (as at a
    start with only those apps), for the duration of the block."""
    with plugins.isolated(*registered) as registry:
        urls = types.ModuleType("plugin_admin_urls")
        urls.urlpatterns = [path("admin/", admin.site.urls)]  # type: ignore[attr-defined]
        with override_settings(ROOT_URLCONF=urls):
            yield registry


def test_roleplay_registers_its_plugin_when_the_app_is_ready():
    registered = {plugin.name: plugin for plugin in plugins.registry().plugins()}

    assert PLUGIN_NAME in registered
    assert url_names(session_admin()) >= ROLEPLAY_PAGES


def test_the_registry_is_empty_without_roleplays_ready_and_registering_again_replaces():
    with plugins.isolated() as registry:
        assert registry.plugins() == [] and registry.pages() == []
        assert not ROLEPLAY_PAGES & url_names(session_admin())
        register_admin_plugin()
        register_admin_plugin()
        assert [plugin.name for plugin in registry.plugins()] == [PLUGIN_NAME]
        assert url_names(session_admin()) >= ROLEPLAY_PAGES
    assert PLUGIN_NAME in [plugin.name for plugin in plugins.registry().plugins()]  # back after the block


@pytest.fixture(params=["file", "mysql"])
def roleplay_row(request, db) -> AgentSession:
    return build(build_roleplay, f"plugin-rp-{request.param}", request.param)


def test_without_plugins_the_session_pages_work_and_show_no_roleplay(admin_client, roleplay_row):
    with_roleplay = admin_client.get(tree_url(roleplay_row)).content.decode()
    assert 'id="roleplay-state"' in with_roleplay and "marker-rp-" in with_roleplay
    commit = next(
        e for e in get_provider(roleplay_row.provider).list_entries(roleplay_row.session_id) if e["type"] == "custom"
    )

    with admin_with():
        with pytest.raises(NoReverseMatch):  # no roleplay page routed: the session pages must not need one
            reverse("admin:sessiontree_agentsession_roleplay", args=[roleplay_row.pk])
        tree = admin_client.get(tree_url(roleplay_row))
        entry = admin_client.get(tree_url(roleplay_row, "tree_entry", commit["id"]))
        change = admin_client.get(tree_url(roleplay_row, "change"))

    assert tree.status_code == entry.status_code == change.status_code == 200
    page = tree.content.decode()
    assert 'id="roleplay-state"' not in page and "Roleplay" not in page and "marker-rp-" not in page
    assert 'class="marker marker-custom">custom<' in page  # the session admin's own marker
    panel = entry.content.decode()
    assert "Roleplay state at this entry" not in panel
    assert "<caption>pi-roleplay-commit</caption>" in panel  # the data as plain fields
    assert "Roleplay" not in change.content.decode()


# --- what a plug-in can add ----------------------------------------------------------------------


def notes_view(model_admin: AgentSessionAdmin):
    def view(request, object_id: str, entry_id: str) -> HttpResponse:
        row = model_admin.session_for(request, object_id)
        context = model_admin.page_context(request, row, f"Notes of {row}")
        return HttpResponse(f"notes of {row.session_id} at {entry_id}; tree {context['urls']['tree']}")

    return view


def notes_links(page: PageContext) -> list[SessionLink]:
    where = page.entry_id or page.leaf_entry_id or "none"
    url = plugins.session_page_url("notes", page.session, where)
    return [SessionLink(f"Notes ({page.page}, {len(page.entries)} loaded)", url, element_id=f"notes-{page.page}")]


def notes_panel(page: PageContext) -> str:
    return format_html('<div class="module" id="notes-panel-{}">Notes of {}</div>', page.page, page.session.session_id)


def note_marker(entry) -> str | None:
    return "note" if entry.get("customType") == "test-note" else None


def tool_fields(entry):
    message = entry.get("message") or {}
    if message.get("toolName") != "test_tool":
        return None
    return [("tool said", str(message.get("details", {}).get("said")))]


NOTES = SessionAdminPlugin(
    name="notes",
    pages=[SessionPage("notes", "notes/<str:entry_id>/", notes_view)],
    links={"tree": notes_links, "entry": notes_links, "change": notes_links},
    panels={"tree": notes_panel, "entry": notes_panel, "change": notes_panel},
    entry_markers=[note_marker],
    entry_renderers=[tool_fields],
    custom_entry_renderers={"test-note": lambda data: [("note text", data["text"].upper())]},
)


@pytest.fixture
def notes_session(db) -> AgentSession:
    provider = get_provider("file")
    session = provider.create_session(session_id="plugin-notes", title="Notes")
    provider.append_message(session["session_id"], {"role": "user", "content": "hi", "timestamp": 1})
    note = provider.append_custom_entry(session["session_id"], "test-note", {"text": "remember the hat"})
    provider.append_message(
        session["session_id"],
        {
            "role": "toolResult",
            "toolCallId": "call-1",
            "toolName": "test_tool",
            "content": [{"type": "text", "text": "done"}],
            "details": {"said": "forty-two"},
            "isError": False,
            "timestamp": 2,
        },
    )
    row = AgentSession.objects.get(session_id=session["session_id"])
    row.note_id = note["id"]  # type: ignore[attr-defined]
    return row


def test_a_plugin_adds_links_panels_markers_and_fields_to_the_session_pages(admin_client, notes_session):
    leaf = notes_session.leaf_entry_id
    with admin_with(NOTES):
        tree = admin_client.get(tree_url(notes_session)).content.decode()
        entry = admin_client.get(tree_url(notes_session, "tree_entry", notes_session.note_id)).content.decode()
        tool = admin_client.get(tree_url(notes_session, "tree_entry", leaf)).content.decode()
        change = admin_client.get(tree_url(notes_session, "change")).content.decode()

    assert f'id="notes-tree" href="/admin/sessiontree/agentsession/{notes_session.pk}/notes/{leaf}/"' in tree
    assert "Notes (tree, 3 loaded)" in tree and 'id="notes-panel-tree"' in tree
    assert 'class="marker marker-note">note<' in tree and "note text: REMEMBER THE HAT" in tree
    assert f"notes/{notes_session.note_id}/" in entry and 'id="notes-panel-entry"' in entry
    assert "<th>note text</th><td>REMEMBER THE HAT</td>" in entry
    assert "<caption>test_tool result</caption>" in tool and "<th>tool said</th><td>forty-two</td>" in tool
    assert (
        'id="notes-change"' in change and "Notes (change, 0 loaded)" in change and 'id="notes-panel-change"' in change
    )


def test_a_plugin_page_is_routed_under_the_session_and_checks_access(admin_client, client, notes_session):
    no_view = Client()
    no_view.force_login(staff("no-view"))
    with admin_with(NOTES):
        url = reverse("admin:sessiontree_agentsession_notes", args=[notes_session.pk, "abc123"])
        page = admin_client.get(url)
        forbidden = no_view.get(url)
        anonymous = client.get(url)

    assert url == f"/admin/sessiontree/agentsession/{notes_session.pk}/notes/abc123/"
    assert page.status_code == 200
    assert page.content.decode() == f"notes of plugin-notes at abc123; tree {tree_url(notes_session)}"
    assert forbidden.status_code == 403
    assert anonymous.status_code == 302 and "/admin/login/" in anonymous["Location"]


def test_a_failing_plugin_is_logged_and_the_page_shows_the_default(admin_client, notes_session, caplog):
    def broken(_: object) -> None:
        raise RuntimeError("plug-in bug")

    failing = SessionAdminPlugin(
        name="broken",
        links={"tree": broken},
        panels={"tree": broken},
        entry_markers=[broken],
        entry_renderers=[broken],
        custom_entry_renderers={"test-*": broken},
    )
    with admin_with(failing), caplog.at_level(logging.ERROR, logger="sessiontree.admin.plugins"):
        response = admin_client.get(tree_url(notes_session))
    assert response.status_code == 200
    page = response.content.decode()
    assert 'class="marker marker-custom">custom<' in page and "text: remember the hat" in page
    failed = {record.getMessage() for record in caplog.records}
    assert {
        f"Admin plug-in broken: its {what} failed; showing the page without it"
        for what in (
            "links",
            "panel",
            "entry marker",
            "entry renderer",
        )
    } <= failed


def test_page_names_belong_to_one_plugin_and_links_to_known_pages():
    with plugins.isolated(NOTES) as registry:
        with pytest.raises(ImproperlyConfigured, match="notes"):
            registry.register(SessionAdminPlugin("other", pages=[SessionPage("notes", "other/", notes_view)]))
        registry.register(SessionAdminPlugin("notes"))  # the same plug-in again: replaced
        assert registry.pages() == []
    with pytest.raises(ImproperlyConfigured, match="no session page 'list'"):
        SessionAdminPlugin("bad", links={"list": notes_links})  # type: ignore[dict-item]


def test_custom_entry_renderers_match_exact_names_first_then_the_longest_prefix():
    def renderer(name: str):
        return lambda data: [(name, "")]

    with plugins.isolated() as registry:
        plugins.register_custom_entry_renderer("x-*", renderer("x-"))
        plugins.register_custom_entry_renderer("x-y-", renderer("x-y-"))
        plugins.register_custom_entry_renderer("x-y-z", renderer("x-y-z"))
        found = {t: registry.custom_entry_renderer(t) for t in ("x-y-z", "x-y-w", "x-q", "other", None)}
    assert {t: (r(None)[0][0] if r else None) for t, r in found.items()} == {
        "x-y-z": "x-y-z",
        "x-y-w": "x-y-",
        "x-q": "x-",
        "other": None,
        None: None,
    }
