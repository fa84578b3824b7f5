from django.apps import AppConfig


class AdminApiConfig(AppConfig):
    name = "admin_api"
    verbose_name = "Management API"
