"""Django settings.

The database comes from the environment: ``DATABASE_URL`` (any URL that
dj-database-url understands, e.g. ``mysql://root@127.0.0.1:3306/test``) or,
when unset, a SQLite file under ``var/``. MySQL/MariaDB connections always use
utf8mb4 so that every Unicode message survives.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("SESSIONTREE_VAR_DIR", BASE_DIR / "var"))

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "dev-only-insecure-key-change-me")
DEBUG = os.environ.get("DJANGO_DEBUG", "1") == "1"
ALLOWED_HOSTS = [h for h in os.environ.get("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost").split(",") if h]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "django_filters",
    "mptt",
    "sessiontree",
    "roleplay",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "config.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

WSGI_APPLICATION = "config.wsgi.application"


def database_from_env() -> dict:
    url = os.environ.get("DATABASE_URL")
    if not url:
        return {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": os.environ.get("SQLITE_PATH", str(VAR_DIR / "db.sqlite3")),
            # WAL lets readers run beside the writer and makes a commit cheap
            # (no fsync per transaction with synchronous=NORMAL; a power cut
            # may lose the last commits, never corrupt the file). IMMEDIATE
            # takes the write lock at BEGIN, so two writers queue instead of
            # deadlocking on a lock upgrade.
            "OPTIONS": {
                "timeout": 20,
                "transaction_mode": "IMMEDIATE",
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            },
            # A file, not Django's shared in-memory database: that one answers
            # "table is locked" at once instead of waiting, so tests with
            # concurrent writers could not run on it. One file per process.
            "TEST": {
                "NAME": os.environ.get("TEST_DATABASE_NAME")
                or os.path.join(tempfile.gettempdir(), f"sessiontree-test-{os.getpid()}.sqlite3")
            },
        }
    config = dj_database_url.parse(url, conn_max_age=int(os.environ.get("DB_CONN_MAX_AGE", "0")))
    if config["ENGINE"] == "django.db.backends.mysql":
        options = config.setdefault("OPTIONS", {})
        options.setdefault("charset", "utf8mb4")
        options.setdefault("init_command", "SET sql_mode='STRICT_TRANS_TABLES'")
        options.setdefault("isolation_level", "read committed")
        config.setdefault("TEST", {})
        config["TEST"].setdefault("CHARSET", "utf8mb4")
        config["TEST"].setdefault("COLLATION", "utf8mb4_bin")
    if os.environ.get("TEST_DATABASE_NAME"):
        config.setdefault("TEST", {})["NAME"] = os.environ["TEST_DATABASE_NAME"]
    return config


DATABASES = {"default": database_from_env()}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"

# --- session tree -----------------------------------------------------------
SESSIONTREE_FILE_ROOT = os.environ.get("SESSIONTREE_FILE_ROOT", str(VAR_DIR / "sessions"))
SESSIONTREE_DEFAULT_PROVIDER = os.environ.get("SESSIONTREE_DEFAULT_PROVIDER", "file")
# The provider registry: kind → class. A kind not listed here is ImproperlyConfigured.
SESSIONTREE_PROVIDERS = {
    "file": "sessiontree.providers.file_provider.FileSessionTreeProvider",
    "mysql": "sessiontree.providers.mysql_provider.MySQLSessionTreeProvider",
}
# Limits every provider applies before writing an entry (the defaults are what
# MariaDB stores with its own defaults; see sessiontree/core/entries.py).
SESSIONTREE_MAX_ENTRY_BYTES = int(os.environ.get("SESSIONTREE_MAX_ENTRY_BYTES", str(6 * 1024 * 1024)))
SESSIONTREE_MAX_ENTRY_DEPTH = int(os.environ.get("SESSIONTREE_MAX_ENTRY_DEPTH", "30"))
# "always" fsyncs every appended line; "never" leaves it to the OS.
SESSIONTREE_FSYNC = os.environ.get("SESSIONTREE_FSYNC", "never")

# Summarizer back end: "extractive" (offline, deterministic, the default) or
# "openai" (any OpenAI-compatible chat-completions server).
SESSIONTREE_SUMMARIZER = os.environ.get("SESSIONTREE_SUMMARIZER", "extractive")
SESSIONTREE_OPENAI_BASE_URL = os.environ.get("SESSIONTREE_OPENAI_BASE_URL", "http://127.0.0.1:8080/v1")
SESSIONTREE_OPENAI_MODEL = os.environ.get("SESSIONTREE_OPENAI_MODEL", "gpt-4o-mini")
SESSIONTREE_OPENAI_API_KEY = os.environ.get("SESSIONTREE_OPENAI_API_KEY", "")
SESSIONTREE_OPENAI_TIMEOUT = float(os.environ.get("SESSIONTREE_OPENAI_TIMEOUT", "60"))

REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.BasicAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAdminUser"],
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Session Tree API",
    "DESCRIPTION": "Pi-compatible append-only session trees and the roleplay layer.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "WARNING")},
}
