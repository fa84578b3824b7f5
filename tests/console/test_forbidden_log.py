"""A 403 from ``PermissionDenied`` is logged as one line, without a traceback."""

from __future__ import annotations

import logging
import sys

import pytest
from django.urls import reverse

from config.logging import JsonFormatter, PermissionDeniedWithoutTraceback, TextFormatter

pytestmark = pytest.mark.django_db


def test_a_permission_denied_in_the_console_is_one_log_line(as_user, caplog):
    with caplog.at_level(logging.WARNING, logger="django.request"):
        response = as_user("dave").get(reverse("console:key_create"))
    assert response.status_code == 403
    (record,) = [r for r in caplog.records if r.name == "django.request"]
    assert record.getMessage().startswith("Forbidden (Permission denied): ")
    assert record.exc_info is None
    for formatter in (JsonFormatter(), TextFormatter()):
        line = formatter.format(record)
        assert "\n" not in line and "Traceback" not in line


def test_other_exceptions_keep_their_traceback():
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord("django.request", logging.ERROR, "", 0, "x", (), None)
        record.exc_info = sys.exc_info()
    assert PermissionDeniedWithoutTraceback().filter(record)
    assert record.exc_info is not None
