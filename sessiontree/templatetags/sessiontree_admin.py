"""Template filters of the session admin: one way to show a moment."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django import template
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

register = template.Library()

# Every time in the console reads the same: date, time to the second, zone.
MOMENT_FORMAT = "%Y-%m-%d %H:%M:%S %Z"


def parse_moment(value: Any) -> dt.datetime | None:
    """A datetime, or an ISO-8601 string as Pi writes them (``…Z``); else ``None``."""
    if isinstance(value, dt.datetime):
        moment = value
    elif isinstance(value, str) and value:
        try:
            moment = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    else:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=dt.UTC)


def moment_text(value: Any) -> str:
    """``2026-11-20 14:03:05 UTC``: in the site's time zone, with the zone's name."""
    moment = parse_moment(value)
    if moment is None:
        return "" if value in (None, "") else str(value)
    return timezone.localtime(moment).strftime(MOMENT_FORMAT)


@register.filter
def moment(value: Any) -> SafeString | str:
    """A ``<time>`` element showing ``moment_text`` (the exact ISO time as its ``datetime``)."""
    parsed = parse_moment(value)
    if parsed is None:
        return "—" if value in (None, "") else str(value)
    return format_html('<time datetime="{}">{}</time>', parsed.isoformat(), moment_text(parsed))
