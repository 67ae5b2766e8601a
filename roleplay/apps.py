from django.apps import AppConfig


class RoleplayConfig(AppConfig):
    name = "roleplay"
    verbose_name = "Roleplay"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from roleplay.admin import register_admin_plugin
        from roleplay.operations import RoleplayOperation
        from roleplay.schema import register_commit_key
        from roleplay.services.history import register_hooks
        from sessiontree.services.operations import register_operations

        register_operations(op.value for op in RoleplayOperation)
        # Every compaction of a roleplay branch gets its automatic checkpoint
        # (seed 003 §6.2), whoever called compact_session.
        register_hooks()
        # Entries carrying a commit are stored with its id as their key.
        register_commit_key()
        # The state panel, diff and actions, links and entry markers in the
        # session admin, which never imports roleplay itself.
        register_admin_plugin()
