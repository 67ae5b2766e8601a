from django.apps import AppConfig


class RoleplayConfig(AppConfig):
    name = "roleplay"
    verbose_name = "Roleplay"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Every compaction of a roleplay branch gets its automatic checkpoint
        # (seed 003 §6.2), whoever called compact_session.
        from roleplay.operations import RoleplayOperation
        from roleplay.services.history import register_hooks
        from sessiontree.services.operations import register_operations

        register_operations(op.value for op in RoleplayOperation)
        register_hooks()
