from django.apps import AppConfig


class SessionTreeConfig(AppConfig):
    name = "sessiontree"
    verbose_name = "Session trees"
    default_auto_field = "django.db.models.BigAutoField"
