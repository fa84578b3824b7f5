"""Celery tasks: each takes ids (or nothing) and calls one domain function.

The scheduled health check is ``console.tasks.check_backends``: it also
keeps the console's health history, which this app cannot write (apps
import only downward)."""

from celery import shared_task
from django.conf import settings


@shared_task
def drain_usage() -> int:
    """Safety net: writes usage rows no web process is draining."""
    if not settings.REDIS_URL:
        return 0
    from responses_api.usage.writer import drain_redis, redis_client

    return drain_redis(redis_client(), consumer="celery")


@shared_task
def purge_stored_responses() -> int:
    """Deletes expired stored responses, conversations, files and vector
    stores (past their ``expires_after``), in batches (reads ignore them already)."""
    from responses_api.files.service import files_purge
    from responses_api.retrieval.stores import vector_stores_purge
    from responses_api.store.conversations import conversations_purge
    from responses_api.store.responses import responses_purge

    purged = responses_purge() + conversations_purge() + files_purge()
    return purged + vector_stores_purge()


@shared_task
def purge_file_orphans() -> int:
    """Stored file content that no file row names any more (its deletion
    failed after the row went), daily: it lists the whole storage."""
    from responses_api.files.service import files_orphans_purge

    return files_orphans_purge()


@shared_task
def purge_usage() -> dict[str, int]:
    """Usage rows past each organisation's retention, roll-ups past 400 days."""
    from responses_api.usage.retention import usage_purge

    purged = usage_purge()
    return {"rows": purged.rows, "cells": purged.cells}


@shared_task
def run_background_response(organisation_id: int, response_id: str) -> None:
    """Runs one queued background response to its end."""
    from responses_api.background.run import run_to_end

    run_to_end(organisation_id, response_id)


@shared_task
def reap_background_responses() -> int:
    """Fails the background responses whose worker died (its lease ran out)."""
    from responses_api.background.run import sweep

    return sweep()


@shared_task
def ingest_vector_store_file(organisation_id: int, store_id: str, file_id: str) -> None:
    """Reads, chunks, embeds and indexes one file added to a vector store."""
    from responses_api.pipeline.vector_ingest import ingest_on_worker

    ingest_on_worker(organisation_id, store_id, file_id)
