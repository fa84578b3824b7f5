from django.apps import AppConfig


class AdminApiConfig(AppConfig):
    name = "admin_api"
    verbose_name = "Management API"

    def ready(self) -> None:
        # Registers the schema extensions (authentication, object fields).
        from admin_api import schema  # noqa: F401
