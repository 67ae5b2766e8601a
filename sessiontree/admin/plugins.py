"""Plug-ins of the session admin: what another app adds to a session's pages.

The session admin (``AgentSessionAdmin``) knows sessions, entries and trees,
and nothing of what an app makes of particular entries. An app that gives
some entries a meaning of its own (the roleplay layer) describes what it adds
in one ``SessionAdminPlugin`` and registers it from its ``AppConfig.ready()``,
so ``sessiontree`` never imports the app, and without the app the session
admin is simply without its additions:

    from sessiontree.admin import plugins

    plugins.register(
        plugins.SessionAdminPlugin(
            name="notes",
            pages=[plugins.SessionPage("notes", "notes/", lambda model_admin: NotesPage(model_admin).view)],
            links={"tree": lambda page: [plugins.SessionLink("Notes", notes_url(page.session))]},
            entry_markers=[note_marker],
            custom_entry_renderers={"my-notes-*": note_fields},
        )
    )

What a plug-in can add:

- **pages** (``SessionPage``): a view under the session's admin URLs,
  ``<pk>/<route>``, named ``admin:sessiontree_agentsession_<name>``, behind
  the admin's login (``admin_site.admin_view``). ``view(model_admin)``
  returns the view, called as ``view(request, object_id, **route kwargs)``;
  it gets the session with ``model_admin.session_for(request, object_id)``
  (404 unknown, 403 without the view permission) and the context the session
  templates extend with ``model_admin.page_context(request, row, title)``.
- **links** (``SessionLink``) and **panels** (HTML) on a session's pages:
  ``"tree"`` (buttons in the tree page's toolbar, panels under the tree),
  ``"entry"`` (links in the entry panel, panels at its end) and ``"change"``
  (object tools and panels on the change form). Each is a function of the
  page (``PageContext``) returning the links (possibly none), or the panel's
  HTML (``render_to_string``/``format_html``; ``None`` shows nothing).
- **entry markers**: ``marker(entry) -> str | None``, what kind of line an
  entry is, in the tree, the entry panel and the compare page (``None``: not
  the plug-in's entry). The first plug-in's marker wins; the entry's preview
  is then its fields.
- **entry renderers**: ``renderer(entry) -> fields | None``, readable
  ``(name, text)`` fields of any entry the plug-in understands (a tool
  result, say); and **custom-entry renderers** by ``customType`` (exact, or a
  prefix ending in ``-`` or ``*``): ``renderer(data) -> fields``.

Everything but pages is looked up per request, so it must be cheap: markers
and renderers run for every row the tree page shows, links and panels once
per page with the entries the page loaded anyway (``PageContext.entries``);
none should read storage. A plug-in never breaks a session's own pages: an
exception in one of its functions is logged and the page shows the default
display (no link, the entry's own marker and fields).

Registering under a name already registered replaces that plug-in (so
``ready()`` may run twice); two plug-ins may not route pages of the same
name (``ImproperlyConfigured``). Pages are routed when the admin builds its
URLs (at the first request), so register in ``ready()``. ``isolated()``
gives tests a registry of their own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.http import urlencode

from sessiontree.core.types import Entry

if TYPE_CHECKING:
    from sessiontree.models import AgentSession

    from .sessions import AgentSessionAdmin

logger = logging.getLogger(__name__)

Fields = list[tuple[str, str]]
PageName = Literal["tree", "entry", "change"]
PAGES: tuple[PageName, ...] = ("tree", "entry", "change")

EntryMarker = Callable[[Entry], str | None]
EntryRenderer = Callable[[Entry], Fields | None]
CustomEntryRenderer = Callable[[Any], Fields]


# Response header of the session's pages (the tree and its fragments, the
# entry panel, compare, confirmations, erase, search and the plug-ins' pages):
# no script but the admin's own files, no plug-in or object, images from here
# only (message images are served by the entry's image URL): a second fence
# behind the rendering's escaping.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self'; "
    "object-src 'none'; base-uri 'none'; frame-ancestors 'self'; form-action 'self'"
)


Response = TypeVar("Response", bound=HttpResponse)


def guarded_page(response: Response) -> Response:
    """``response`` with the session pages' Content-Security-Policy; a
    plug-in's page returns its response through this too."""
    response["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
    return response


@dataclass(frozen=True)
class PageContext:
    """The session page a link or panel is asked for."""

    page: PageName
    request: HttpRequest
    session: AgentSession
    entries: Sequence[Entry] = ()  # what the page loaded: the tree window's rows, the entry and its context steps
    entry_id: str | None = None  # the entry panel's entry
    leaf_entry_id: str | None = None  # the session's leaf as the page read it
    can_act: bool = False  # the user may moderate and the session is open


@dataclass(frozen=True)
class SessionLink:
    text: str
    href: str
    element_id: str | None = None
    css_class: str | None = None
    title: str | None = None


@dataclass(frozen=True)
class SessionPage:
    name: str  # URL name: admin:sessiontree_agentsession_<name>
    route: str  # after "<pk>/", e.g. "notes/" or "notes/<str:action>/"
    view: Callable[[AgentSessionAdmin], Callable[..., HttpResponse]]  # the view, for the session admin


Links = Callable[[PageContext], Sequence[SessionLink]]
Panel = Callable[[PageContext], str | None]


@dataclass(frozen=True)
class SessionAdminPlugin:
    name: str
    pages: Sequence[SessionPage] = ()
    links: Mapping[PageName, Links] = field(default_factory=dict)
    panels: Mapping[PageName, Panel] = field(default_factory=dict)
    entry_markers: Sequence[EntryMarker] = ()
    entry_renderers: Sequence[EntryRenderer] = ()
    custom_entry_renderers: Mapping[str, CustomEntryRenderer] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for where in (*self.links, *self.panels):
            if where not in PAGES:
                raise ImproperlyConfigured(f"Admin plug-in {self.name}: no session page {where!r} (one of {PAGES})")


class PluginRegistry:
    """The plug-ins of the session admin, in registration order."""

    def __init__(self) -> None:
        self._plugins: dict[str, SessionAdminPlugin] = {}

    def register(self, plugin: SessionAdminPlugin) -> None:
        routed = {
            page.name: other.name for other in self.plugins() if other.name != plugin.name for page in other.pages
        }
        for page in plugin.pages:
            if page.name in routed:
                raise ImproperlyConfigured(
                    f"Admin plug-in {plugin.name}: the page name {page.name!r} is plug-in {routed[page.name]}'s"
                )
        self._plugins[plugin.name] = plugin

    def unregister(self, name: str) -> None:
        self._plugins.pop(name, None)

    def plugins(self) -> list[SessionAdminPlugin]:
        return list(self._plugins.values())

    # --- what the session admin asks -----------------------------------------------------------

    def pages(self) -> list[SessionPage]:
        return [page for plugin in self.plugins() for page in plugin.pages]

    def links(self, page: PageContext) -> list[SessionLink]:
        found: list[SessionLink] = []
        for plugin in self.plugins():
            links = plugin.links.get(page.page)
            if links is not None:
                found += _guarded(plugin, "links", links, page, ())
        return found

    def panels(self, page: PageContext) -> list[str]:
        found: list[str] = []
        for plugin in self.plugins():
            panel = plugin.panels.get(page.page)
            if panel is not None:
                html = _guarded(plugin, "panel", panel, page, None)
                if html:
                    found.append(html)
        return found

    def marker(self, entry: Entry) -> str | None:
        for plugin in self.plugins():
            for marker in plugin.entry_markers:
                found = _guarded(plugin, "entry marker", marker, entry, None)
                if found is not None:
                    return found
        return None

    def entry_fields(self, entry: Entry) -> Fields | None:
        for plugin in self.plugins():
            for renderer in plugin.entry_renderers:
                found = _guarded(plugin, "entry renderer", renderer, entry, None)
                if found is not None:
                    return found
        return None

    def custom_entry_renderer(self, custom_type: Any) -> CustomEntryRenderer | None:
        """The renderer for ``custom_type``: an exact name first, else the longest prefix."""
        if not isinstance(custom_type, str):
            return None
        renderers: dict[str, CustomEntryRenderer] = {}
        for plugin in self.plugins():
            for key, renderer in plugin.custom_entry_renderers.items():
                renderers.setdefault(key.rstrip("*"), renderer)
        if custom_type in renderers:
            return renderers[custom_type]
        prefixes = [key for key in renderers if key.endswith("-") and custom_type.startswith(key)]
        return renderers[max(prefixes, key=len)] if prefixes else None


def session_page_url(name: str, session: AgentSession, *args: Any, query: Mapping[str, Any] | None = None) -> str:
    """The URL of the session page ``name`` of ``session`` (a plug-in's page, or
    one of the session admin's own: ``"tree"``, ``"tree_entry"``…), with
    ``query`` (values ``None`` or ``""`` left out)."""
    opts = session._meta
    url = reverse(f"admin:{opts.app_label}_{opts.model_name}_{name}", args=[session.pk, *args])
    shown = {key: value for key, value in (query or {}).items() if value not in (None, "")}
    return f"{url}?{urlencode(shown)}" if shown else url


def _guarded(plugin: SessionAdminPlugin, what: str, function: Callable[[Any], Any], argument: Any, default: Any) -> Any:
    try:
        return function(argument)
    except Exception:  # a plug-in's bug must not break the session's own page
        logger.exception("Admin plug-in %s: its %s failed; showing the page without it", plugin.name, what)
        return default


_registry = PluginRegistry()


def registry() -> PluginRegistry:
    """The registry the session admin reads (the one ``isolated()`` put in place, in a test)."""
    return _registry


def register(plugin: SessionAdminPlugin) -> None:
    _registry.register(plugin)


def unregister(name: str) -> None:
    _registry.unregister(name)


def register_custom_entry_renderer(custom_type: str, renderer: CustomEntryRenderer) -> None:
    """Show custom entries of ``custom_type`` (or of a prefix: ``"my-extension-*"``) with
    ``renderer(data) -> [(name, text), …]``: a plug-in of its own, named after the type."""
    register(SessionAdminPlugin(f"custom-entry:{custom_type}", custom_entry_renderers={custom_type: renderer}))


@contextmanager
def isolated(*plugins: SessionAdminPlugin) -> Iterator[PluginRegistry]:
    """A registry holding only ``plugins`` (none: the session admin on its own)
    for the duration of the block; the registered plug-ins come back after it.
    Pages are routed when the URLs are built: a test of pages builds them inside."""
    global _registry
    saved = _registry
    _registry = PluginRegistry()
    for plugin in plugins:
        _registry.register(plugin)
    try:
        yield _registry
    finally:
        _registry = saved
