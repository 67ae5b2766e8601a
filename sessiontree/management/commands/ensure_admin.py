"""Make sure a superuser exists for the admin console (used by ``make run``).

The password comes from ``--password``, else the ``ADMIN_PASSWORD``
environment variable, else ``admin``. An existing user keeps its password
unless one is given explicitly, so a password changed in the admin survives
the next ``make run``.
"""

from __future__ import annotations

import os
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser

DEFAULT_PASSWORD = "admin"
LOGIN_URL = "http://127.0.0.1:8000/admin/"


class Command(BaseCommand):
    help = "Create the admin superuser if missing and print the login URL and credentials."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", default="admin")
        parser.add_argument("--password", default=None, help="Default: $ADMIN_PASSWORD, else 'admin'.")
        parser.add_argument("--url", default=LOGIN_URL, help=f"The console's address to print (default {LOGIN_URL}).")

    def handle(self, *args: Any, username: str, password: str | None, url: str = LOGIN_URL, **options: Any) -> None:
        explicit = password if password is not None else os.environ.get("ADMIN_PASSWORD") or None
        users = get_user_model().objects
        user = users.filter(username=username).first()
        if user is None:
            shown = explicit or DEFAULT_PASSWORD
            users.create_superuser(username=username, email=f"{username}@example.com", password=shown)
            state = "created"
        else:
            changed = ["is_staff", "is_superuser", "is_active"]
            user.is_staff = user.is_superuser = user.is_active = True
            if explicit:
                user.set_password(explicit)
                changed.append("password")
            user.save(update_fields=changed)
            if explicit:
                shown = explicit
            elif user.check_password(DEFAULT_PASSWORD):
                shown = DEFAULT_PASSWORD
            else:
                shown = "(its current password, unchanged)"
            state = "exists"
        self.stdout.write(f"Admin console: {url}")
        self.stdout.write(self.style.SUCCESS(f"Login: {username} / {shown} (user {state})"))
