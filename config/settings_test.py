"""Settings of the test suite (pytest-django loads it, see pyproject.toml).

The production settings, with DEBUG off as in production. Only the two values
production must provide get test-only defaults, set in the environment so that
the ``manage.py`` child processes some tests start read the same ones. A value
already in the environment wins.
"""

import os

os.environ.setdefault("DJANGO_SECRET_KEY", "test-only-insecure-key-not-for-any-deployment")
os.environ.setdefault("DJANGO_ALLOWED_HOSTS", "testserver,localhost,127.0.0.1")

from config.settings import *  # noqa: F403
