"""What the pgvector modules ask of the test database before they run."""

from __future__ import annotations

import os

import pytest

from responses_api.retrieval import pgvector


def require_pgvector() -> None:
    """Skip on a database without pgvector, or fail where the run says it
    must have it (``SWITCHYARD_TEST_PGVECTOR=required``: the run of
    ``tests/retrieval/test_pgvector_server.py``, against a PostgreSQL with it)."""
    pgvector.forget_detection()
    if pgvector.installed():
        return
    if os.environ.get("SWITCHYARD_TEST_PGVECTOR") == "required":
        pytest.fail("The test database has no pgvector (or not migration 0022's tables).")
    pytest.skip("The database has no pgvector; test_pgvector_server.py runs these on one.")
