from django.apps import AppConfig


class RoleplayConfig(AppConfig):
    name = "roleplay"
    verbose_name = "Roleplay"
    default_auto_field = "django.db.models.BigAutoField"
