"""The roleplay layer's REST face: ``/api/sessions/{session_id}/roleplay/…``
(docs/api.md, "Roleplay"). Thin views over ``roleplay.service``."""
