"""A file's content is read and sent one frame at a time: memory stays at
one frame whatever the file's size, the bytes come back whole, and content
that stops opening part way never reaches the client as a whole file."""

from __future__ import annotations

import io

import httpx
import pytest

from responses_api.files import storage
from responses_api.files.storage import FRAME, ContentBroken, content_frames, content_save
from tests.files.test_sealed_content import frames

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

# Five full frames and a short one: several MiB.
BIG = bytes(range(251)) * (5 * FRAME // 251 + 1)
SEALED_FRAME = FRAME + 4 + 64  # a frame's length prefix and seal overhead, generously


class Counted(io.FileIO):
    """A stored file that records how far it was read."""

    high = 0

    def read(self, size: int = -1) -> bytes:
        data = super().read(size)
        Counted.high = max(Counted.high, self.tell())
        return data


@pytest.fixture
def local(tmp_path, settings):
    settings.SWITCHYARD_FILES_STORAGE = "local"
    settings.SWITCHYARD_FILES_DIR = str(tmp_path)
    return tmp_path


def test_frames_are_read_one_at_a_time(local, monkeypatch):
    name = content_save(organisation_id=1, file_id="file-big", plain=io.BytesIO(BIG))
    opened = storage.files_storage()
    monkeypatch.setattr(opened, "open", lambda name, mode="rb": Counted(local / name, "r"))
    Counted.high = 0
    reader = content_frames(organisation_id=1, file_id="file-big", name=name)
    first = next(reader)
    assert first == BIG[:FRAME]
    # One frame and the next one's length read, not the file.
    assert Counted.high <= SEALED_FRAME + 4 < len(BIG)
    second = next(reader)
    assert second == BIG[FRAME : 2 * FRAME] and Counted.high <= 2 * SEALED_FRAME + 4
    rest = list(reader)
    assert first + second + b"".join(rest) == BIG
    assert all(len(frame) <= FRAME for frame in rest) and len(rest) == 4


def test_a_bad_frame_part_way_stops_the_reader_after_the_good_ones(local):
    name = content_save(organisation_id=1, file_id="file-big", plain=io.BytesIO(BIG))
    path = local / name
    parts = frames(path.read_bytes())
    third = bytearray(parts[2])
    third[100] ^= 1
    path.write_bytes(b"".join([*parts[:2], bytes(third), *parts[3:]]))
    reader = content_frames(organisation_id=1, file_id="file-big", name=name)
    assert next(reader) + next(reader) == BIG[: 2 * FRAME]
    with pytest.raises(ContentBroken):
        next(reader)


def _stored(files_dir, settings, organisation, content: bytes):
    from responses_api.files.service import file_create

    settings.SWITCHYARD_FILES_STORAGE = "local"
    settings.SWITCHYARD_FILES_DIR = str(files_dir)
    return file_create(
        organisation_id=organisation.pk,
        filename="big.bin",
        purpose="user_data",
        content=io.BytesIO(content),
        size=len(content),
    )


def test_a_file_of_several_frames_downloads_whole(files_server, files_dir, tenants, settings):
    record = _stored(files_dir, settings, tenants[0].organisation, BIG)
    url = f"{files_server.url}/v1/files/{record.id}/content"
    headers = {"Authorization": f"Bearer {tenants[0].key}"}
    with httpx.stream("GET", url, headers=headers, timeout=30) as response:
        assert response.status_code == 200
        assert response.headers["content-length"] == str(len(BIG))
        assert response.headers["content-type"] == "application/octet-stream"
        body = b"".join(response.iter_bytes())
    assert body == BIG
    # Another organisation's key finds nothing.
    other = httpx.get(url, headers={"Authorization": f"Bearer {tenants[1].key}"}, timeout=30)
    assert other.status_code == 404


def test_content_that_does_not_open_is_an_error_not_a_200(
    files_server, files_dir, tenants, settings
):
    record = _stored(files_dir, settings, tenants[0].organisation, BIG)
    path = files_dir / record.storage_name
    raw = path.read_bytes()
    path.write_bytes(raw[:50] + bytes([raw[50] ^ 1]) + raw[51:])  # the first frame
    url = f"{files_server.url}/v1/files/{record.id}/content"
    headers = {"Authorization": f"Bearer {tenants[0].key}"}
    response = httpx.get(url, headers=headers, timeout=30)
    assert response.status_code == 500
    assert response.json()["error"]["type"] == "server_error"


def test_a_frame_failing_part_way_cuts_the_body_short(files_server, files_dir, tenants, settings):
    record = _stored(files_dir, settings, tenants[0].organisation, BIG)
    path = files_dir / record.storage_name
    parts = frames(path.read_bytes())
    path.write_bytes(b"".join(parts[:3]))  # the file cut after its third frame
    url = f"{files_server.url}/v1/files/{record.id}/content"
    # A client that closes the connection after the response, as most do
    # for a download: the body cannot be taken for the whole file.
    headers = {"Authorization": f"Bearer {tenants[0].key}", "Connection": "close"}
    received = bytearray()
    with (
        pytest.raises(httpx.RemoteProtocolError),
        httpx.stream("GET", url, headers=headers, timeout=30) as response,
    ):
        assert response.status_code == 200
        for chunk in response.iter_bytes():
            received.extend(chunk)
    assert len(received) < len(BIG)
    assert bytes(received) == BIG[: len(received)]  # what came is true content
