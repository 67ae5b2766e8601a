"""The REST API (``/api/``): Django REST framework over the operations layer.

- ``views``: the viewsets. Every write parses its input with an input
  serializer, calls one function of ``sessiontree.services`` (``channel="api"``,
  the request's user as actor) and serializes the result; reads call a
  provider or a selector.
- ``access``: who sees and changes which session (the permission class and
  the visible-sessions queryset).
- ``serializers``: input and output shapes (entries stay Pi's camelCase
  dicts, session meta is snake_case).
- ``errors``: the one exception handler (``{"error": {"code", "message", "details"}}``).
- ``parsers``/``renderers``: strict JSON in (size and depth limits), JSON and
  Pi JSONL out.
- ``pagination``, ``filters``, ``schema`` (OpenAPI via drf-spectacular), ``urls``.

docs/api.md documents the contract; docs/openapi.yaml is the schema snapshot.
"""
