import logging

from django.apps import AppConfig
from django.conf import settings

log = logging.getLogger("switchyard.settings")


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = "Organisations and API keys"

    def ready(self) -> None:
        # The settings found SWITCHYARD_* variables no setting is declared
        # for (config/declared/): most likely misspelt, and otherwise
        # silently ignored. Said once per process, once logging is set up.
        for line in getattr(settings, "SWITCHYARD_UNKNOWN_VARIABLES", ()):
            log.warning(line)
