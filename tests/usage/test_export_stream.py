"""Under daphne the console's CSV export streams: the first rows arrive
while the rest are still being read, from a cursor, not once Django has
read the whole export into a list (what it does with a sync iterator)."""

from __future__ import annotations

import time

import httpx
import pytest
from django.test import Client

from responses_api.usage import writer as usage
from responses_api.usage.export import CHUNK
from tests.usage.test_durability import a_row

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

# Several chunks of the cursor's, so that the export is read in pieces.
ROWS = 3 * CHUNK


def test_the_csv_export_streams_through_daphne(people, api_server):
    now = time.time()
    rows = [a_row(people["acme"].id, created_at=now - i) for i in range(ROWS)]
    for start in range(0, len(rows), 5000):
        assert usage.write_rows(rows[start : start + 5000]) == []
    usage.write_rows([a_row(people["globex"].id)])
    client = Client()
    client.force_login(people["alice"])
    cookies = {"sessionid": client.cookies["sessionid"].value}
    url = api_server.url + "/console/usage/export.csv"
    with httpx.stream("GET", url, cookies=cookies, timeout=30) as response:
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/csv"
        assert "content-length" not in response.headers  # streamed, not buffered
        pieces = response.iter_bytes()
        head = next(pieces)
        while head.count(b"\n") < 2:
            head += next(pieces)
        header, newest = head.split(b"\n")[:2]
        assert header.startswith(b"request_id,created_at")
        assert newest.startswith(rows[0]["request_id"].encode())
        body = head + b"".join(pieces)
    lines = body.decode().splitlines()
    assert len(lines) == ROWS + 1  # Globex's row is not in Acme's export
    assert lines[-1].startswith(rows[-1]["request_id"])
