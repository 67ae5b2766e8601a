"""Automatic moderation classifiers (``moderate_sessions``).

``SESSIONTREE_MODERATION_CLASSIFIERS`` names the classifiers to run, in
order: a built-in name (``pii``: offline patterns and checksums;
``openai_moderation``: an OpenAI-compatible ``/v1/moderations`` endpoint) or
the dotted path of any class with a ``name`` and a ``classify(texts)``
method, as the providers' registry resolves its entries. An unknown name is
``ImproperlyConfigured``. Classifiers never run on the append path.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from .base import Classifier, ClassifierError, Finding

BUILT_IN: dict[str, str] = {
    "pii": "sessiontree.classifiers.pii.PIIClassifier",
    "openai_moderation": "sessiontree.classifiers.openai_moderation.OpenAIModerationClassifier",
}
DEFAULT_CLASSIFIERS = ("pii",)

__all__ = [
    "BUILT_IN",
    "Classifier",
    "ClassifierError",
    "Finding",
    "configured_names",
    "get_classifier",
    "get_classifiers",
]


def configured_names() -> list[str]:
    names: Any = getattr(settings, "SESSIONTREE_MODERATION_CLASSIFIERS", DEFAULT_CLASSIFIERS)
    if isinstance(names, str):
        names = [part.strip() for part in names.split(",") if part.strip()]
    if not isinstance(names, list | tuple) or not all(isinstance(name, str) for name in names):
        raise ImproperlyConfigured("SESSIONTREE_MODERATION_CLASSIFIERS must list classifier names or dotted paths")
    return list(names)


def get_classifier(name: str) -> Classifier:
    """The classifier ``name`` (a built-in name or a dotted path), built with its settings."""
    path = BUILT_IN.get(name, name)
    if "." not in path:
        known = ", ".join(sorted(BUILT_IN))
        raise ImproperlyConfigured(f"Unknown classifier {name!r}; built in: {known} (or give a dotted path)")
    try:
        cls = import_string(path)
    except ImportError as exc:
        raise ImproperlyConfigured(f"Classifier {name!r} cannot be imported ({exc})") from exc
    classifier = cls()
    if not isinstance(classifier, Classifier):
        raise ImproperlyConfigured(f"{path} is not a classifier (it needs a name and a classify(texts) method)")
    return classifier


def get_classifiers(names: list[str] | None = None) -> list[Classifier]:
    """The configured classifiers (or those ``names``), in order."""
    return [get_classifier(name) for name in (names if names is not None else configured_names())]
