"""Fixtures of the Files API tests: a daphne process of its own, keeping
files in a folder of the test run, with a small per-file cap so that the
caps are reached quickly; Acme and Globex each with a key."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from openai import OpenAI

from tests.conftest import Proc, server_env, start_daphne

MAX_BYTES = 2 * 1024 * 1024


@pytest.fixture(scope="session")
def files_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("files")


@pytest.fixture(scope="session")
def files_server(django_db_setup, django_db_blocker, files_dir) -> Iterator[Proc]:
    proc = start_daphne(
        server_env(
            SWITCHYARD_FILES_DIR=str(files_dir),
            SWITCHYARD_FILES_MAX_BYTES=str(MAX_BYTES),
        )
    )
    yield proc
    proc.stop()


@pytest.fixture
def tenants(provision, simulator):
    return provision("acme", simulator.url), provision("globex", simulator.url)


def sdk(server: Proc, key: str, prefix: str = "/v1") -> OpenAI:
    return OpenAI(api_key=key, base_url=server.url + prefix, max_retries=0, timeout=30)


@pytest.fixture
def acme(files_server, tenants) -> OpenAI:
    return sdk(files_server, tenants[0].key)


@pytest.fixture
def globex(files_server, tenants) -> OpenAI:
    return sdk(files_server, tenants[1].key)
