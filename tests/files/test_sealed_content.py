"""A file's content at rest: sealed in frames bound to the organisation, the
file and each frame's place, so that altered, reordered, cut or moved
content does not open."""

from __future__ import annotations

import io

import pytest

from responses_api.files.storage import FRAME, ContentBroken, content_open, content_save

CONTENT = bytes(range(256)) * (FRAME // 256) * 2 + b"tail"  # three frames


@pytest.fixture(autouse=True)
def _files_dir(tmp_path, settings):
    settings.SWITCHYARD_FILES_STORAGE = "local"
    settings.SWITCHYARD_FILES_DIR = str(tmp_path)


def saved(tmp_path, organisation_id: int = 1, file_id: str = "file-a"):
    name = content_save(organisation_id=organisation_id, file_id=file_id, plain=io.BytesIO(CONTENT))
    return name, tmp_path / name


def frames(raw: bytes) -> list[bytes]:
    out, offset = [], 0
    while offset < len(raw):
        size = int.from_bytes(raw[offset : offset + 4], "big")
        out.append(raw[offset : offset + 4 + size])
        offset += 4 + size
    return out


def test_content_comes_back_and_is_not_stored_plain(tmp_path):
    name, path = saved(tmp_path)
    assert content_open(organisation_id=1, file_id="file-a", name=name) == CONTENT
    raw = path.read_bytes()
    assert CONTENT[:64] not in raw and len(frames(raw)) == 3


def test_another_organisation_or_file_cannot_open_it(tmp_path):
    name, _ = saved(tmp_path)
    with pytest.raises(ContentBroken):
        content_open(organisation_id=2, file_id="file-a", name=name)
    with pytest.raises(ContentBroken):
        content_open(organisation_id=1, file_id="file-b", name=name)


@pytest.mark.parametrize("harm", ["flip", "reorder", "cut", "truncate"])
def test_altered_content_does_not_open(tmp_path, harm):
    name, path = saved(tmp_path)
    raw = path.read_bytes()
    parts = frames(raw)
    harmed = {
        "flip": raw[:100] + bytes([raw[100] ^ 1]) + raw[101:],
        "reorder": parts[1] + parts[0] + parts[2],
        "cut": b"".join(parts[:2]),  # the last frame dropped
        "truncate": raw[:-10],
    }[harm]
    path.write_bytes(harmed)
    with pytest.raises(ContentBroken):
        content_open(organisation_id=1, file_id="file-a", name=name)
