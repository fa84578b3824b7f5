"""The retention purge: raw rows past each organisation's
``usage_retention_days`` go, in bounded batches; roll-ups stay 400 days."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from responses_api.models import UsageDaily, UsageHourly, UsageLog
from responses_api.tasks import purge_usage
from responses_api.usage import writer as usage
from responses_api.usage.retention import usage_purge
from tests.usage.test_durability import a_row

pytestmark = pytest.mark.django_db


def _rows(org, ages_days):
    now = timezone.now()
    rows = [
        a_row(org.id, created_at=(now - timedelta(days=age, minutes=1)).timestamp())
        for age in ages_days
    ]
    assert usage.write_rows(rows) == []
    return rows


def test_the_purge_deletes_exactly_the_rows_past_retention_and_keeps_the_rollups(people):
    acme, globex = people["acme"], people["globex"]
    acme.usage_retention_days = 30
    acme.save()
    globex.usage_retention_days = 7
    globex.save()
    acme_rows = _rows(acme, [0, 1, 29, 30, 31, 90, 90, 90])
    globex_rows = _rows(globex, [0, 6, 7, 8, 29])
    cells_before = UsageHourly.objects.count(), UsageDaily.objects.count()

    purged = usage_purge(batch=2)  # several batches per organisation

    assert purged.rows == 5 + 3
    kept = {str(r) for r in UsageLog.objects.values_list("request_id", flat=True)}
    # A row exactly N days and a minute old is past an N-day retention.
    assert kept == {acme_rows[i]["request_id"] for i in (0, 1, 2)} | {
        globex_rows[i]["request_id"] for i in (0, 1)
    }
    assert (UsageHourly.objects.count(), UsageDaily.objects.count()) == cells_before
    month = UsageDaily.objects.filter(organisation=acme)
    assert sum(c.requests for c in month) == len(acme_rows)


def test_rollups_older_than_400_days_are_purged(people):
    acme = people["acme"]
    acme.usage_retention_days = 1000
    acme.save()
    _rows(acme, [398, 402])
    assert UsageHourly.objects.count() == 2
    purged = usage_purge()
    assert purged.rows == 0 and purged.cells == 2  # one hourly, one daily
    assert UsageLog.objects.count() == 2
    assert UsageHourly.objects.get().requests == 1


def test_the_purge_is_scheduled_for_celery_beat_and_runs_as_a_task(people):
    assert settings.CELERY_BEAT_SCHEDULE["usage-purge"]["task"] == "responses_api.tasks.purge_usage"
    _rows(people["acme"], [200])
    assert purge_usage() == {"rows": 1, "cells": 0}
