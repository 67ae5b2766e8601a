"""`ensure_admin`: the superuser `make run` prints the login of."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

pytestmark = pytest.mark.django_db


def ensure_admin(*args: str) -> str:
    out = StringIO()
    call_command("ensure_admin", *args, stdout=out)
    return out.getvalue()


def test_creates_a_superuser_with_the_default_password(monkeypatch):
    monkeypatch.delenv("ADMIN_PASSWORD", raising=False)

    output = ensure_admin()

    user = get_user_model().objects.get(username="admin")
    assert user.is_superuser and user.is_staff and user.check_password("admin")
    assert "http://127.0.0.1:8000/admin/" in output
    assert "Login: admin / admin (user created)" in output


def test_password_from_the_environment(monkeypatch):
    monkeypatch.setenv("ADMIN_PASSWORD", "s3cret")

    output = ensure_admin()

    assert get_user_model().objects.get(username="admin").check_password("s3cret")
    assert "admin / s3cret" in output


def test_an_existing_password_survives_unless_one_is_given(monkeypatch):
    monkeypatch.delenv("ADMIN_PASSWORD", raising=False)
    ensure_admin("--password", "changed-in-admin")

    output = ensure_admin()

    user = get_user_model().objects.get(username="admin")
    assert user.check_password("changed-in-admin")
    assert "unchanged" in output and "changed-in-admin" not in output
    assert get_user_model().objects.count() == 1

    ensure_admin("--password", "new")
    assert get_user_model().objects.get(username="admin").check_password("new")
