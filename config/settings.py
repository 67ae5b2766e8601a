"""Django settings, every value from the environment.

``DEBUG`` is off unless ``DJANGO_DEBUG=1`` (``make run`` sets it). With
``DEBUG`` off the process refuses to start (``ImproperlyConfigured``) unless
``DJANGO_SECRET_KEY`` and ``DJANGO_ALLOWED_HOSTS`` are set; the HTTPS settings
that ``manage.py check --deploy`` asks for come from ``DJANGO_SECURE_*``
variables (README.md, "Production").

The database comes from the environment: ``DATABASE_URL`` (any URL that
dj-database-url understands, e.g. ``mysql://root@127.0.0.1:3306/test``) or,
when unset, a SQLite file under ``var/``. MySQL/MariaDB connections always use
utf8mb4 so that every Unicode message survives.
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("SESSIONTREE_VAR_DIR", BASE_DIR / "var"))

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_flag(name: str, default: bool) -> bool:
    """A yes/no variable; anything but 1/0 (true/false, yes/no, on/off) is refused, not read as no."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a yes/no value: set it to 1 or 0")


def env_list(name: str) -> list[str]:
    """A comma-separated variable as a list; unset or blank gives an empty list."""
    return [item.strip() for item in os.environ.get(name, "").split(",") if item.strip()]


def env_seconds(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a whole number of seconds") from None
    if value < 0:
        raise ImproperlyConfigured(f"{name}={raw!r} must not be negative")
    return value


def proxy_ssl_header_from_env(name: str) -> tuple[str, str] | None:
    """``X-Forwarded-Proto,https`` as Django's ``("HTTP_X_FORWARDED_PROTO", "https")``."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    header, separator, value = (part.strip() for part in raw.partition(","))
    if not separator or not header or not value or "," in value:
        raise ImproperlyConfigured(
            f"{name}={raw!r} is not HEADER,VALUE: set it to the header your TLS-terminating proxy "
            "sets and the value it means HTTPS by, e.g. X-Forwarded-Proto,https"
        )
    meta_key = header.upper().replace("-", "_")
    if not meta_key.startswith("HTTP_"):
        meta_key = f"HTTP_{meta_key}"
    return meta_key, value


# Off unless asked for: a forgotten variable must not serve tracebacks and settings to the world.
DEBUG = env_flag("DJANGO_DEBUG", default=False)

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "").strip()
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS")
if DEBUG:
    SECRET_KEY = SECRET_KEY or "dev-only-insecure-key-change-me"
    ALLOWED_HOSTS = ALLOWED_HOSTS or ["127.0.0.1", "localhost"]
else:
    _missing = []
    if not SECRET_KEY:
        _missing.append(
            "DJANGO_SECRET_KEY is not set (set it to a long random value, e.g. the output of "
            "`python -c 'from django.core.management.utils import get_random_secret_key; "
            "print(get_random_secret_key())'`)"
        )
    if not ALLOWED_HOSTS:
        _missing.append(
            "DJANGO_ALLOWED_HOSTS is not set (set it to the host names this site is served under, "
            "comma-separated, e.g. sessions.example.com)"
        )
    if _missing:
        raise ImproperlyConfigured(
            "DEBUG is off (DJANGO_DEBUG is not 1), so the production settings are required: "
            + "; ".join(_missing)
            + ". For development on this machine set DJANGO_DEBUG=1 instead (`make run` does)."
        )

# --- HTTPS (README.md, "Production") -----------------------------------------
# Cookies travel over HTTPS only unless DEBUG is on; DJANGO_SECURE_COOKIES=0 is
# for a plain-HTTP deployment on a network you trust.
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env_flag("DJANGO_SECURE_COOKIES", default=not DEBUG)
# Off by default: the proxy in front may redirect already, and tests and
# `make run` speak plain HTTP. `check --deploy` warns while it is off.
SECURE_SSL_REDIRECT = env_flag("DJANGO_SECURE_SSL_REDIRECT", default=False)
SECURE_HSTS_SECONDS = env_seconds("DJANGO_SECURE_HSTS_SECONDS", default=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_flag("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", default=False)
SECURE_HSTS_PRELOAD = env_flag("DJANGO_SECURE_HSTS_PRELOAD", default=False)
# Only behind a proxy that sets this header on every request and strips it from clients.
SECURE_PROXY_SSL_HEADER = proxy_ssl_header_from_env("DJANGO_SECURE_PROXY_SSL_HEADER")
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_filters",
    "mptt",
    "sessiontree",
    "roleplay",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Django's own (its deploy check looks for this very path). Nothing of the
    # session is read for an API request with a token: it only costs a lazy object.
    "django.contrib.sessions.middleware.SessionMiddleware",
    # Django's, without the slash redirect under /api/ (a redirected POST becomes a GET).
    "sessiontree.api.middleware.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    # Django's authentication and messages middleware, passed by an API request
    # with a token (sessiontree/api/middleware.py): neither serves it.
    "sessiontree.api.middleware.AuthenticationMiddleware",
    "sessiontree.api.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # A storage failure on a page outside the API: 503/409 with Retry-After, not a 500.
    "sessiontree.api.middleware.StorageErrorMiddleware",
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


# Django's backends with typed failures and read retries (sessiontree/providers/db_errors.py).
ENGINES = {
    "django.db.backends.mysql": "sessiontree.providers.backends.mysql",
    "django.db.backends.sqlite3": "sessiontree.providers.backends.sqlite3",
}
_SESSION_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SESSION_VALUE = re.compile(r"-?[0-9]+(\.[0-9]+)?|[A-Za-z_][A-Za-z0-9_,-]*|'[^'\\]*'")


def session_variables_from_env(name: str = "SESSIONTREE_DB_SESSION_VARIABLES") -> dict[str, str]:
    """``wsrep_sync_wait=1,innodb_lock_wait_timeout=20`` as ``{name: value}``:
    MySQL/MariaDB session variables every new connection sets (Galera's
    read-your-writes: ``wsrep_sync_wait=1``; docs/scale-out.md). A name must
    be an identifier; a value a number, a word or a quoted string."""
    raw = os.environ.get(name, "").strip()
    found: dict[str, str] = {}
    for item in (part.strip() for part in raw.split(";" if ";" in raw else ",")):
        if not item:
            continue
        variable, separator, value = (piece.strip() for piece in item.partition("="))
        if not separator or not _SESSION_VARIABLE.fullmatch(variable) or not _SESSION_VALUE.fullmatch(value):
            raise ImproperlyConfigured(
                f"{name}: {item!r} is not NAME=VALUE (a variable name, and a number, a word or a 'quoted' value)"
            )
        found[variable] = value
    return found


def init_command(base: str, variables: dict[str, str]) -> str:
    """``base`` (a ``SET …`` of its own) followed by the session variables, one statement."""
    assignments = ", ".join(f"SESSION {variable} = {value}" for variable, value in variables.items())
    if not assignments:
        return base
    if not base:
        return f"SET {assignments}"
    if base.upper().startswith("SET ") and ";" not in base:
        return f"{base}, {assignments}"
    raise ImproperlyConfigured(
        f"SESSIONTREE_DB_SESSION_VARIABLES needs the database's init_command to be one SET statement, not {base!r}"
    )


def database_from_env() -> dict[str, Any]:
    url = os.environ.get("DATABASE_URL")
    if not url:
        return {
            "ENGINE": ENGINES["django.db.backends.sqlite3"],
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
    config: dict[str, Any] = dict(dj_database_url.parse(url, conn_max_age=int(os.environ.get("DB_CONN_MAX_AGE", "0"))))
    if config["ENGINE"] == "django.db.backends.mysql":
        options = config.setdefault("OPTIONS", {})
        options.setdefault("charset", "utf8mb4")
        options.setdefault("init_command", "SET sql_mode='STRICT_TRANS_TABLES'")
        options["init_command"] = init_command(options["init_command"], SESSIONTREE_DB_SESSION_VARIABLES)
        options.setdefault("isolation_level", "read committed")
        config.setdefault("TEST", {})
        config["TEST"].setdefault("CHARSET", "utf8mb4")
        config["TEST"].setdefault("COLLATION", "utf8mb4_bin")
    if os.environ.get("TEST_DATABASE_NAME"):
        config.setdefault("TEST", {})["NAME"] = os.environ["TEST_DATABASE_NAME"]
    config["ENGINE"] = ENGINES.get(config["ENGINE"], config["ENGINE"])
    return config


# MySQL/MariaDB session variables set on every new connection (docs/scale-out.md):
# on Galera, wsrep_sync_wait=1 makes a read wait until the node has applied
# every write the cluster committed before it (read-your-writes on any node).
SESSIONTREE_DB_SESSION_VARIABLES = session_variables_from_env()
# How long a read outside a transaction, or a write whose connection failed
# before its COMMIT, keeps connecting again (a restarting Galera node answers
# 1047 for a second or two); then the caller gets 503 storage_unavailable.
_db_retry = os.environ.get("SESSIONTREE_DB_RETRY_SECONDS", "3").strip() or "3"
try:
    SESSIONTREE_DB_RETRY_SECONDS = float(_db_retry)
except ValueError:
    raise ImproperlyConfigured(f"SESSIONTREE_DB_RETRY_SECONDS={_db_retry!r} is not a number of seconds") from None
if not 0 <= SESSIONTREE_DB_RETRY_SECONDS <= 300:
    raise ImproperlyConfigured(f"SESSIONTREE_DB_RETRY_SECONDS={_db_retry!r} must be between 0 and 300 seconds")


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
# Where `sync_sessions --mode import` copies Pi files when --provider is not given.
SESSIONTREE_SYNC_IMPORT_PROVIDER = os.environ.get("SESSIONTREE_SYNC_IMPORT_PROVIDER", "mysql")
# The provider registry: kind → class. A kind not listed here is ImproperlyConfigured.
SESSIONTREE_PROVIDERS = {
    "file": "sessiontree.providers.file_provider.FileSessionTreeProvider",
    "mysql": "sessiontree.providers.mysql_provider.MySQLSessionTreeProvider",
}
# Limits every provider applies before writing an entry (the defaults are what
# MariaDB stores with its own defaults; see sessiontree/core/entries.py).
SESSIONTREE_MAX_ENTRY_BYTES = int(os.environ.get("SESSIONTREE_MAX_ENTRY_BYTES", str(6 * 1024 * 1024)))
SESSIONTREE_MAX_ENTRY_DEPTH = int(os.environ.get("SESSIONTREE_MAX_ENTRY_DEPTH", "30"))
# Session metadata (operator data beside the tree): at most this many bytes as JSON.
SESSIONTREE_MAX_METADATA_BYTES = int(os.environ.get("SESSIONTREE_MAX_METADATA_BYTES", str(64 * 1024)))
# Seconds a client is told to wait (Retry-After) when the storage is unavailable (503).
SESSIONTREE_RETRY_AFTER_SECONDS = int(os.environ.get("SESSIONTREE_RETRY_AFTER_SECONDS", "2"))
# "always" fsyncs every appended line; "never" leaves it to the OS.
SESSIONTREE_FSYNC = os.environ.get("SESSIONTREE_FSYNC", "never")
# What one process keeps of `file` sessions (see docs/architecture.md, "Memory of a
# worker"): the skeletons of at most this many sessions, with at most this many
# entries in all (the most recently used session is always kept), and decoded
# payloads up to this many bytes of their JSON lines.
SESSIONTREE_FILE_CACHE_SESSIONS = int(os.environ.get("SESSIONTREE_FILE_CACHE_SESSIONS", "16"))
SESSIONTREE_FILE_CACHE_ENTRIES = int(os.environ.get("SESSIONTREE_FILE_CACHE_ENTRIES", "2000000"))
SESSIONTREE_FILE_CACHE_BYTES = int(os.environ.get("SESSIONTREE_FILE_CACHE_BYTES", str(16 * 1024 * 1024)))
# The `file` provider's persisted index of each session file (beside it, in a hidden
# `.sessiontree-index/` folder): a new process opens a session from it instead of
# decoding every line ("0" turns it off; see docs/architecture.md).
SESSIONTREE_FILE_INDEX_SIDECAR = os.environ.get("SESSIONTREE_FILE_INDEX_SIDECAR", "1") not in (
    "0",
    "false",
    "no",
    "off",
)

# Summarizer back end: "extractive" (offline, deterministic, the default) or
# "openai" (any OpenAI-compatible chat-completions server).
SESSIONTREE_SUMMARIZER = os.environ.get("SESSIONTREE_SUMMARIZER", "extractive")
SESSIONTREE_OPENAI_BASE_URL = os.environ.get("SESSIONTREE_OPENAI_BASE_URL", "http://127.0.0.1:8080/v1")
SESSIONTREE_OPENAI_MODEL = os.environ.get("SESSIONTREE_OPENAI_MODEL", "gpt-4o-mini")
SESSIONTREE_OPENAI_API_KEY = os.environ.get("SESSIONTREE_OPENAI_API_KEY", "")
SESSIONTREE_OPENAI_TIMEOUT = float(os.environ.get("SESSIONTREE_OPENAI_TIMEOUT", "60"))

# Moderation (docs/moderation.md): flag categories, and the classifiers
# `moderate_sessions` runs (built-in names or dotted paths, comma-separated).
SESSIONTREE_MODERATION_CATEGORIES = [
    name.strip()
    for name in os.environ.get(
        "SESSIONTREE_MODERATION_CATEGORIES", "pii,harassment,hate,sexual,violence,self_harm,illegal,spam,other"
    ).split(",")
    if name.strip()
]
SESSIONTREE_MODERATION_CLASSIFIERS = [
    name.strip() for name in os.environ.get("SESSIONTREE_MODERATION_CLASSIFIERS", "pii").split(",") if name.strip()
]
SESSIONTREE_MODERATION_OPENAI_BASE_URL = os.environ.get(
    "SESSIONTREE_MODERATION_OPENAI_BASE_URL", SESSIONTREE_OPENAI_BASE_URL
)
SESSIONTREE_MODERATION_OPENAI_API_KEY = os.environ.get(
    "SESSIONTREE_MODERATION_OPENAI_API_KEY", SESSIONTREE_OPENAI_API_KEY
)
SESSIONTREE_MODERATION_OPENAI_MODEL = os.environ.get("SESSIONTREE_MODERATION_OPENAI_MODEL", "omni-moderation-latest")
SESSIONTREE_MODERATION_OPENAI_TIMEOUT = float(os.environ.get("SESSIONTREE_MODERATION_OPENAI_TIMEOUT", "30"))
SESSIONTREE_MODERATION_OPENAI_RETRIES = int(os.environ.get("SESSIONTREE_MODERATION_OPENAI_RETRIES", "3"))
# How long moderate_sessions looks again at index rows missing below its
# cursor (InnoDB commits ids out of order), in seconds.
SESSIONTREE_MODERATION_GAP_SECONDS = int(os.environ.get("SESSIONTREE_MODERATION_GAP_SECONDS", "3600"))
# Search (docs/moderation.md, "Search"): at most this many characters of an entry are indexed.
SESSIONTREE_SEARCH_MAX_TEXT = int(os.environ.get("SESSIONTREE_SEARCH_MAX_TEXT", "1000000"))
# On MySQL/MariaDB a search statement taking longer than this many milliseconds
# is stopped and answered search_too_broad (0: no limit).
SESSIONTREE_SEARCH_TIMEOUT_MS = float(os.environ.get("SESSIONTREE_SEARCH_TIMEOUT_MS", "5000"))

# Data protection (docs/data-protection.md): sessions idle longer than this many
# days are deleted by apply_retention, unless their agent says otherwise (unset: keep).
_retention = os.environ.get("SESSIONTREE_RETENTION_DAYS", "").strip()
SESSIONTREE_RETENTION_DAYS = int(_retention) if _retention.isdigit() else None
if _retention and (SESSIONTREE_RETENTION_DAYS is None or SESSIONTREE_RETENTION_DAYS < 1):
    raise ImproperlyConfigured(
        f"SESSIONTREE_RETENTION_DAYS={_retention!r} must be a whole number of days, 1 or more (unset: keep)"
    )

# Idempotency keys (docs/api.md, "Idempotency"): a retried write with the same
# Idempotency-Key header is answered from the first one for this many seconds;
# apply_retention purges older keys.
SESSIONTREE_IDEMPOTENCY_TTL_SECONDS = int(os.environ.get("SESSIONTREE_IDEMPOTENCY_TTL_SECONDS", str(24 * 60 * 60)))
if SESSIONTREE_IDEMPOTENCY_TTL_SECONDS < 60:
    raise ImproperlyConfigured(
        f"SESSIONTREE_IDEMPOTENCY_TTL_SECONDS={SESSIONTREE_IDEMPOTENCY_TTL_SECONDS} must be at least 60 seconds"
    )

# A request body may hold one entry of the largest size allowed, plus the
# JSON around it (and some escaping); the API's parser enforces this limit
# (413 request_too_large), the entry limit stays the providers' (413 entry_too_large).
DATA_UPLOAD_MAX_MEMORY_SIZE = SESSIONTREE_MAX_ENTRY_BYTES + 1024 * 1024

# The REST API (docs/api.md): tokens or the admin's session, strict JSON, one error shape.
REST_FRAMEWORK = {
    # Token first: an anonymous request is then a 401 with WWW-Authenticate: Token.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "sessiontree.api.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PARSER_CLASSES": ["sessiontree.api.parsers.JSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["sessiontree.api.renderers.JSONRenderer"],
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_SCHEMA_CLASS": "sessiontree.api.schema.SessionTreeAutoSchema",
    "EXCEPTION_HANDLER": "sessiontree.api.errors.exception_handler",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Session Tree API",
    "DESCRIPTION": (
        "Pi-compatible append-only session trees: sessions, entries, and tree operations "
        "(leaf moves, navigation with branch summaries, forks, compaction, labels), and the roleplay "
        "layer: a character's state at any entry with provenance, state diffs, reviews, corrections. "
        "Entries keep Pi's camelCase; session meta is snake_case. "
        'Every error is {"error": {"code", "message", "details"}}. See docs/api.md.'
    ),
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SCHEMA_PATH_PREFIX": "/api/",
    "COMPONENT_SPLIT_REQUEST": True,
    # Swagger UI from the drf-spectacular-sidecar package: served as our own
    # static files, no CDN (the UI works offline).
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Two choice sets share a field name ("status"): a session's and a roleplay review's.
    # Typed entries, headers, path patterns and links (sessiontree/api/schema.py), after
    # drf-spectacular's own enum pass so that the entry components keep their one-value enums.
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "sessiontree.api.schema.postprocess",
    ],
    "ENUM_NAME_OVERRIDES": {
        "StatusEnum": "sessiontree.api.serializers.SESSION_STATUSES",
        "ReviewStatusEnum": "roleplay.api.serializers.REVIEW_STATUSES",
        # A second "kind" enum (an erase's places) must not rename the first one.
        "KindEnum": "roleplay.api.serializers.PROVENANCE_KINDS",
        "EraseScopeEnum": "sessiontree.services.erasure.SCOPES",
        "ErasePlaceKindEnum": "sessiontree.services.erasure.KINDS",
    },
}

LOG_LEVEL = os.environ.get("LOG_LEVEL", "WARNING").strip().upper()
if not isinstance(logging.getLevelName(LOG_LEVEL), int):
    raise ImproperlyConfigured(f"LOG_LEVEL={LOG_LEVEL!r} is not a level: set DEBUG, INFO, WARNING, ERROR or CRITICAL")


class ClientErrorWithoutTraceback(logging.Filter):
    """Keeps a 4xx line but not its traceback: a 403 or 400 is the client's doing, not a bug to trace.

    Django attaches the exception to its "Forbidden (Permission denied)" and
    bad-request lines; a 5xx keeps its traceback.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        status_code = getattr(record, "status_code", None)
        if isinstance(status_code, int) and status_code < 500:
            record.exc_info = None
            record.exc_text = None
        return True


# One handler, on the root logger. Django's own "django" logger has a console
# handler of its own (active while DEBUG is on), so every django.request line
# printed twice; it now only propagates. Naming "django" resets its children,
# so runserver's request log ("django.server") is restated as Django defines
# it: its own handler and format, INFO, not propagating.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"client_error_without_traceback": {"()": ClientErrorWithoutTraceback}},
    "formatters": {
        "django.server": {"()": "django.utils.log.ServerFormatter", "format": "[{server_time}] {message}", "style": "{"}
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "filters": ["client_error_without_traceback"]},
        "django.server": {"class": "logging.StreamHandler", "formatter": "django.server"},
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        "django": {"handlers": [], "level": LOG_LEVEL, "propagate": True},
        "django.server": {"handlers": ["django.server"], "level": "INFO", "propagate": False},
    },
}
