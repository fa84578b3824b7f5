"""Uploads a client gets wrong, or sends to do harm: each is a 4xx in the
error envelope with an X-Request-Id, and leaves exactly one usage row. A
body past the cap is refused while it arrives, never buffered whole."""

from __future__ import annotations

import io
import re
import socket
import time
import uuid

import httpx
import openai
import pytest

from tests.conftest import usage_rows, wait_rows
from tests.files.conftest import MAX_BYTES

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

BOUNDARY = "sy-test-boundary"


def part(name: str, value: bytes, filename: str | None = None) -> bytes:
    disposition = f'form-data; name="{name}"'
    if filename is not None:
        disposition += f'; filename="{filename}"'
    return f"--{BOUNDARY}\r\nContent-Disposition: {disposition}\r\n\r\n".encode() + value + b"\r\n"


def multipart(*parts: bytes) -> bytes:
    return b"".join(parts) + f"--{BOUNDARY}--\r\n".encode()


def post(server, key: str, body: bytes, content_type: str | None = None, **headers: str):
    response = httpx.post(
        server.url + "/v1/files",
        content=body,
        headers={
            "authorization": f"Bearer {key}",
            "content-type": content_type or f"multipart/form-data; boundary={BOUNDARY}",
            **headers,
        },
        timeout=30,
    )
    uuid.UUID(response.headers["x-request-id"])
    return response


def refused(response: httpx.Response, status: int, param: str | None) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["param"] == param
    return error


def one_row(tenant, status: int) -> None:
    rows = wait_rows(1, organisation=tenant.organisation)
    time.sleep(0.3)
    rows = usage_rows(organisation=tenant.organisation)
    assert [(r.endpoint[:6], r.status) for r in rows] == [("/files", status)]


FILE = part("file", b"data\n", "a.txt")
PURPOSE = part("purpose", b"user_data")


@pytest.mark.parametrize(
    ("body", "param", "needle"),
    [
        (multipart(PURPOSE), "file", "Missing required parameter: 'file'"),
        (multipart(FILE), "purpose", "Missing required parameter: 'purpose'"),
        (multipart(FILE, part("purpose", b"fine-tune")), "purpose", "Invalid value for purpose"),
        (multipart(part("file", b"", "empty.txt"), PURPOSE), "file", "empty"),
        (multipart(FILE, PURPOSE, part("model", b"x")), "model", "Unknown parameter"),
        (multipart(FILE, FILE, PURPOSE), "file", "twice"),
        (multipart(part("file", b"no filename"), PURPOSE), "file", "filename"),
        (FILE + PURPOSE, None, "closing boundary"),  # cut short
        (b"\x00\xffnot multipart at all", None, "malformed"),
        (
            multipart(FILE, PURPOSE, part("expires_after[anchor]", b"now")),
            "expires_after[anchor]",
            "anchor",
        ),
    ],
    ids=[
        "no-file",
        "no-purpose",
        "bad-purpose",
        "zero-bytes",
        "unknown-field",
        "two-files",
        "file-without-filename",
        "truncated",
        "garbage",
        "bad-anchor",
    ],
)
def test_a_malformed_upload_is_a_400_naming_the_field(files_server, tenants, body, param, needle):
    response = post(files_server, tenants[0].key, body)
    error = refused(response, 400, param)
    assert needle in error["message"]
    one_row(tenants[0], 400)


def test_an_upload_that_is_not_multipart_is_a_400(files_server, tenants):
    response = post(files_server, tenants[0].key, b'{"purpose": "user_data"}', "application/json")
    assert "multipart/form-data" in refused(response, 400, None)["message"]
    one_row(tenants[0], 400)


def test_a_compressed_upload_is_a_400(files_server, tenants):
    body = multipart(FILE, PURPOSE)
    response = post(files_server, tenants[0].key, body, **{"content-encoding": "gzip"})
    refused(response, 400, None)
    one_row(tenants[0], 400)


def test_a_filename_with_folders_and_nul_is_kept_as_its_last_part(acme, tenants):
    for given, kept in [
        ("../../etc/passwd", "passwd"),
        ("..\\..\\windows\\win.ini", "win.ini"),
        ("/", "file"),
    ]:
        created = acme.files.create(file=(given, io.BytesIO(b"x")), purpose="user_data")
        assert created.filename == kept
        assert acme.files.content(created.id).content == b"x"


def test_nul_and_control_characters_are_taken_out_of_a_filename(files_server, tenants):
    body = multipart(part("file", b"x", "ev\x00il\x1f\x7f.txt"), PURPOSE)
    response = post(files_server, tenants[0].key, body)
    assert response.status_code == 200, response.text
    assert response.json()["filename"] == "evil.txt"


def read_answer(sock: socket.socket, received: bytes = b"") -> str:
    """An HTTP answer's head and body (by its Content-Length), as text."""
    while b"\r\n\r\n" not in received:
        received += sock.recv(65536)
    head, _, body = received.partition(b"\r\n\r\n")
    found = re.search(rb"(?i)content-length: (\d+)", head)
    assert found is not None, head
    length = int(found.group(1))
    while len(body) < length:
        body += sock.recv(65536)
    return (head + b"\r\n\r\n" + body).decode("latin-1")


def test_a_declared_2_gb_upload_is_refused_unread(files_server, tenants):
    """Content-Length past the cap: 413 before any byte of the body is read."""
    address = ("127.0.0.1", files_server.port)
    with socket.create_connection(address, timeout=10) as sock:
        started = time.monotonic()
        sock.sendall(
            (
                "POST /v1/files HTTP/1.1\r\nHost: test\r\n"
                f"Authorization: Bearer {tenants[0].key}\r\n"
                f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\n"
                f"Content-Length: {2 * 1024**3}\r\n\r\n"
            ).encode()
        )
        head = read_answer(sock)
        assert time.monotonic() - started < 5
        assert sock.recv(65536) == b""  # and the connection is closed
    assert head.startswith("HTTP/1.1 413"), head
    assert "file_too_large" in head and "x-request-id" in head.lower()
    one_row(tenants[0], 413)


def test_a_streamed_2_gb_upload_is_refused_as_soon_as_it_passes_the_cap(files_server, tenants):
    """A chunked body of 2 GB (no length given): the answer comes once the
    cap is passed, while the client is still sending."""
    chunk = b"a" * 65536
    sent = 0
    address = ("127.0.0.1", files_server.port)
    with socket.create_connection(address, timeout=10) as sock:
        started = time.monotonic()
        sock.sendall(
            (
                "POST /v1/files HTTP/1.1\r\nHost: test\r\n"
                f"Authorization: Bearer {tenants[0].key}\r\n"
                f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\n"
                "Transfer-Encoding: chunked\r\n\r\n"
            ).encode()
        )
        head = part("file", b"", "big.bin")[:-2]
        sock.sendall(b"%x\r\n%s\r\n" % (len(head), head))
        sock.setblocking(False)
        answer = b""
        frame = b"%x\r\n%s\r\n" % (len(chunk), chunk)
        pending = memoryview(frame)
        while sent < 2 * 1024**3 and time.monotonic() - started < 20:
            try:
                answer += sock.recv(65536)
                break
            except BlockingIOError:
                pass
            try:
                # Partial writes continue where they stopped: the chunked
                # framing stays whole.
                pending = pending[sock.send(pending) :]
            except BlockingIOError:
                time.sleep(0.01)
            except (BrokenPipeError, ConnectionResetError):
                break
            if not pending:
                sent += len(chunk)
                pending = memoryview(frame)
        sock.setblocking(True)
        sock.settimeout(5)
        text = read_answer(sock, answer)
    assert text.startswith("HTTP/1.1 413"), text
    # Refused while it arrives: what was sent is what the socket buffers took
    # while the answer was made, far from the 2 GB.
    assert sent < 256 * 1024 * 1024
    one_row(tenants[0], 413)


def test_an_upload_over_the_organisations_quota_is_a_413(acme, tenants):
    from accounts.audit import CLI
    from accounts.models import AuditEntry
    from accounts.services.organisations import organisation_settings_update

    organisation_settings_update(
        organisation=tenants[0].organisation, actor=CLI, data={"file_quota_bytes": 1000}
    )
    assert AuditEntry.objects.filter(action="organisation.settings").exists()
    first = acme.files.create(file=("a.txt", io.BytesIO(b"x" * 600)), purpose="user_data")
    with pytest.raises(openai.APIStatusError) as over:
        acme.files.create(file=("b.txt", io.BytesIO(b"x" * 600)), purpose="user_data")
    assert over.value.status_code == 413
    assert over.value.body["code"] == "file_quota_exceeded"
    assert "400 bytes left" in over.value.body["message"]
    acme.files.delete(first.id)
    assert acme.files.create(file=("b.txt", io.BytesIO(b"x" * 600)), purpose="user_data").id


def test_a_file_over_the_per_file_cap_is_a_413(acme):
    with pytest.raises(openai.APIStatusError) as over:
        acme.files.create(file=("big.bin", io.BytesIO(b"x" * (MAX_BYTES + 1))), purpose="user_data")
    assert over.value.status_code == 413 and over.value.body["code"] == "file_too_large"


@pytest.mark.parametrize(
    ("path", "status", "param"),
    [
        ("/v1/files/file-%00x", 404, "file_id"),
        ("/v1/files/file-%00x/content", 404, "file_id"),
        ("/v1/files/" + "f" * 5000, 404, "file_id"),
        ("/v1/files?after=file-%00", 400, "after"),
        ("/v1/files?purpose=%00", 400, "purpose"),
        ("/v1/files?order=sideways", 400, "order"),
    ],
)
def test_hostile_ids_and_queries_are_4xx(files_server, tenants, path, status, param):
    response = httpx.get(
        files_server.url + path, headers={"authorization": f"Bearer {tenants[0].key}"}
    )
    uuid.UUID(response.headers["x-request-id"])
    refused(response, status, param)
    one_row(tenants[0], status)
