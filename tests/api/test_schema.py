"""The OpenAPI schema: served at /api/schema/, equal to the checked-in
snapshot (regenerate with ``make schema``), free of generator warnings; the
Swagger UI at /api/docs/ runs on local static files only."""

from __future__ import annotations

import io
import re
from pathlib import Path

import yaml
from django.conf import settings
from django.contrib.staticfiles import finders
from django.core.management import call_command
from rest_framework.test import APIClient

SNAPSHOT = Path(settings.BASE_DIR) / "docs" / "openapi.yaml"
REGENERATE = "the API changed: run `make schema` and commit docs/openapi.yaml"


def generated() -> str:
    out = io.StringIO()
    # --fail-on-warn: a schema warning is also a `check --deploy` warning.
    call_command("spectacular", "--validate", "--fail-on-warn", stdout=out)
    return out.getvalue()


def test_the_snapshot_is_the_generated_schema():
    assert generated() == SNAPSHOT.read_text(encoding="utf-8"), REGENERATE


def test_the_served_schema_is_the_snapshot(db):
    response = APIClient().get("/api/schema/")  # public: it describes the API, it holds no data
    assert response.status_code == 200
    assert yaml.safe_load(response.content) == yaml.safe_load(SNAPSHOT.read_text(encoding="utf-8"))
    as_json = APIClient().get("/api/schema/?format=json")
    assert as_json.status_code == 200 and as_json.json()["openapi"].startswith("3.")


def test_every_contract_path_is_in_the_schema():
    paths = set(yaml.safe_load(SNAPSHOT.read_text(encoding="utf-8"))["paths"])
    session = "/api/sessions/{session_id}/"
    expected = {
        "/api/sessions/",
        session,
        f"{session}entries/",
        f"{session}entries/{{entry_id}}/",
        f"{session}in-flight/",
    }
    expected |= {
        f"{session}{name}/"
        for name in (
            "archive",
            "restore",
            "switch-leaf",
            "reset-leaf",
            "navigate",
            "fork",
            "compact",
            "labels",
            "bulk-append",
        )
    }
    expected |= {f"{session}{name}/" for name in ("path", "context", "tree", "snapshot", "export")}
    roleplay = f"{session}roleplay/"
    expected |= {
        f"{roleplay}{name}/"
        for name in ("state", "diff", "context", "reviews", "corrections", "checkpoints", "repairs", "archive")
    }
    expected |= {f"{roleplay}reviews/{{review_id}}/{name}" for name in ("", "decide/", "amend/")}
    # DESIGN.md §10: moderation.
    entry = f"{session}entries/{{entry_id}}/"
    expected |= {f"{entry}{name}/" for name in ("flags", "hide", "unhide", "erase")}
    expected |= {"/api/flags/", "/api/flags/{flag_id}/resolve/", "/api/audit/", "/api/search/"}
    expected |= {f"{session}export/manifest/"}
    expected |= {f"{session}hold/", "/api/users/{username}/erase/", "/api/retention/"}
    assert paths == expected


def test_swagger_ui_needs_no_cdn(db):
    response = APIClient().get("/api/docs/")
    assert response.status_code == 200
    html = response.content.decode()
    assets = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert any(url.endswith("swagger-ui-bundle.js") for url in assets), html[:800]
    for url in assets:
        assert url.startswith("/static/"), f"{url} is not one of our static files"
        assert finders.find(url.removeprefix("/static/")), f"{url} is not among the static files"
    assert "://" not in html  # no asset, and no schema, from another host


def _blank_matches(schema: dict) -> bool:
    if schema.get("type") != "string" or schema.get("minLength", 0) > 0 or schema.get("maxLength", 1) < 0:
        return False
    pattern = schema.get("pattern")
    return pattern is None or re.search(pattern, "") is not None


def _ambiguous_one_ofs(node, where: str = "") -> list[str]:
    found: list[str] = []
    if isinstance(node, list):
        for index, item in enumerate(node):
            found += _ambiguous_one_ofs(item, f"{where}/{index}")
    elif isinstance(node, dict):
        branches = node.get("oneOf")
        if isinstance(branches, list) and sum(1 for b in branches if isinstance(b, dict) and _blank_matches(b)) > 1:
            found.append(where)
        for key, value in node.items():
            found += _ambiguous_one_ofs(value, f"{where}/{key}")
    return found


def test_no_one_of_lets_the_empty_string_match_twice():
    """A oneOf whose branches both accept "" makes a validator refuse the
    empty string the server accepts (Schemathesis found it: a compaction with
    ``"custom_instructions": ""`` answered 200 to a body the schema called
    invalid)."""
    assert _ambiguous_one_ofs(yaml.safe_load(generated())) == []
