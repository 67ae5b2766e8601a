"""Models and migrations agree: a model change without its migration fails the suite."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command


@pytest.mark.django_db
def test_no_model_change_is_missing_a_migration():
    out = StringIO()
    try:
        call_command("makemigrations", "--check", "--dry-run", stdout=out, stderr=out)
    except SystemExit as exc:  # makemigrations --check exits 1 when a migration is missing
        pytest.fail(f"models and migrations disagree (exit {exc.code}):\n{out.getvalue()}")
    assert "No changes detected" in out.getvalue()
