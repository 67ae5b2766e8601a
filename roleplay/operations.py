"""The roleplay layer's audited operations, registered with the session
audit (``sessiontree.services.operations``) when the app is ready."""

from __future__ import annotations

from enum import StrEnum


class RoleplayOperation(StrEnum):
    CORRECT_STATE = "roleplay_correct_state"
    AMEND_REVIEW = "roleplay_amend_review"
    ACCEPT_REVIEW = "roleplay_accept_review"
    REJECT_REVIEW = "roleplay_reject_review"
    CHECKPOINT = "roleplay_checkpoint"
    REPAIR_TURN = "roleplay_repair_turn"
    ARCHIVE = "roleplay_archive"
