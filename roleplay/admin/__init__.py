"""The roleplay layer in the session admin: its pages, links and entry display,
plugged into ``sessiontree.admin`` (``sessiontree/admin/plugins.py``) by
``RoleplayConfig.ready()``; the session admin never imports roleplay.

- ``pages``: the state panel (``<session>/roleplay/``), the state diff
  (``roleplay/diff/``) and the actions (``roleplay/action/<name>/``), URL
  names ``admin:sessiontree_agentsession_roleplay``, ``…_roleplay_diff``,
  ``…_roleplay_action``;
- links: "Roleplay state" and "Roleplay diff" on the tree page, "Roleplay
  state at this entry" and "roleplay diff with the leaf" in the entry panel,
  "Roleplay state" on the change form; shown for a session that holds
  roleplay (``pages.holds_roleplay``: decided from what the page loaded);
- ``display``: the markers (``rp commit``, ``rp correction``…) and fields of
  the structured roleplay entries in the tree.
"""

from __future__ import annotations

from sessiontree.admin import plugins
from sessiontree.admin.plugins import PageContext, SessionAdminPlugin, SessionLink, SessionPage, session_page_url

from .display import custom_entry_renderers, roleplay_marker, turn_result_fields
from .pages import RoleplayPages, holds_roleplay

PLUGIN_NAME = "roleplay"


def tree_links(page: PageContext) -> list[SessionLink]:
    if not holds_roleplay(page.entries, page.session):
        return []
    return [
        SessionLink("Roleplay state", session_page_url("roleplay", page.session), element_id="roleplay-state"),
        SessionLink("Roleplay diff", session_page_url("roleplay_diff", page.session), element_id="roleplay-diff"),
    ]


def entry_links(page: PageContext) -> list[SessionLink]:
    if page.entry_id is None or not holds_roleplay(page.entries, page.session):
        return []
    links = [
        SessionLink(
            "Roleplay state at this entry",
            session_page_url("roleplay", page.session, query={"at": page.entry_id}),
            element_id="rp-state-at-entry",
            css_class="rp-state-link",
        )
    ]
    if page.leaf_entry_id and page.leaf_entry_id != page.entry_id:
        query = {"from": page.leaf_entry_id, "to": page.entry_id}
        links.append(
            SessionLink("roleplay diff with the leaf", session_page_url("roleplay_diff", page.session, query=query))
        )
    return links


def change_links(page: PageContext) -> list[SessionLink]:
    # The change form loads no entry: only a character named in the metadata shows the link.
    if not holds_roleplay(page.entries, page.session):
        return []
    return [SessionLink("Roleplay state", session_page_url("roleplay", page.session), element_id="roleplay-state")]


def admin_plugin() -> SessionAdminPlugin:
    return SessionAdminPlugin(
        name=PLUGIN_NAME,
        pages=[
            SessionPage("roleplay_diff", "roleplay/diff/", lambda model_admin: RoleplayPages(model_admin).diff_view),
            SessionPage(
                "roleplay_action",
                "roleplay/action/<str:action>/",
                lambda model_admin: RoleplayPages(model_admin).action_view,
            ),
            SessionPage("roleplay", "roleplay/", lambda model_admin: RoleplayPages(model_admin).state_view),
        ],
        links={"tree": tree_links, "entry": entry_links, "change": change_links},
        entry_markers=[roleplay_marker],
        entry_renderers=[turn_result_fields],
        custom_entry_renderers=custom_entry_renderers(),
    )


def register_admin_plugin() -> None:
    """Plug the roleplay pages, links and entry display into the session admin
    (``RoleplayConfig.ready()``; registering again replaces it)."""
    plugins.register(admin_plugin())
