from typing import Any

from django.apps import AppConfig


class ResponsesApiConfig(AppConfig):
    name = "responses_api"
    verbose_name = "Responses API"

    def ready(self) -> None:
        # accounts may not import the API, so the API listens for the changes
        # that its per-process caches of keys and organisations must see.
        from accounts.signals import api_key_changed, organisation_settings_changed

        api_key_changed.connect(_forget_key, dispatch_uid="responses_api.forget_key")
        organisation_settings_changed.connect(
            _forget_organisation, dispatch_uid="responses_api.forget_organisation"
        )
        organisation_settings_changed.connect(
            _forget_stored, dispatch_uid="responses_api.forget_stored"
        )
        # However a file goes (the Files API, the console, the purge of
        # expired files), it leaves the vector stores it was in.
        from django.db.models.signals import post_delete

        from responses_api.models import FileRecord

        post_delete.connect(
            _detach_file, sender=FileRecord, dispatch_uid="responses_api.detach_file"
        )
        # And its content leaves the storage, once the deletion is committed:
        # an organisation's deletion cascades to its rows, never to storage.
        post_delete.connect(
            _forget_content, sender=FileRecord, dispatch_uid="responses_api.forget_content"
        )


def _forget_key(*, key_hash: str, **_: Any) -> None:
    from responses_api.access.auth import forget_key

    forget_key(key_hash)


def _forget_organisation(*, organisation_id: int, **_: Any) -> None:
    from accounts.models import ApiKey
    from responses_api.access.auth import forget_key
    from responses_api.catalogue import catalog

    keys = ApiKey.objects.filter(organisation_id=organisation_id)
    for key_hash in keys.values_list("key_hash", flat=True):
        forget_key(key_hash)
    catalog.forget(organisation_id)


def _forget_stored(*, organisation_id: int, **_: Any) -> None:
    # Turning the retention policy to ``none`` deletes what is stored, once
    # the change is committed (in batches, outside the settings' transaction).
    from django.db import transaction

    from responses_api.store.conversations import conversations_forget_if_none
    from responses_api.store.responses import responses_forget_if_none

    def forget() -> None:
        responses_forget_if_none(organisation_id=organisation_id)
        conversations_forget_if_none(organisation_id=organisation_id)

    transaction.on_commit(forget)


def _detach_file(*, instance: Any, **_: Any) -> None:
    from responses_api.retrieval.stores import file_detach

    file_detach(organisation_id=instance.organisation_id, file_id=instance.id)


def _forget_content(*, instance: Any, **_: Any) -> None:
    from responses_api.files.service import content_forget

    content_forget(file_id=instance.id, name=instance.storage_name)
