"""Compressed request bodies (``Content-Encoding: gzip`` or ``zstd``).

A body is decompressed incrementally and never past the size cap plus one
byte, so the cap (``SWITCHYARD_MAX_BODY_BYTES``) bounds the *decoded* body
and a small "zip bomb" costs no more memory than an honest body at the cap.
"""

from __future__ import annotations

import io
import zlib

import zstandard

from responses_api.errors import ApiError, body_too_large, invalid

ACCEPTED = "gzip, zstd or identity"


def decode_body(body: bytes, encoding: bytes | None, *, cap: int) -> bytes:
    """The body as the client meant it, under ``cap`` bytes once decoded."""
    name = (encoding or b"").strip().lower()
    if name in (b"", b"identity"):
        return body
    if name in (b"gzip", b"x-gzip"):
        return _gunzip(body, cap)
    if name == b"zstd":
        return _unzstd(body, cap)
    raise ApiError(
        415,
        f"Content-Encoding '{name.decode('latin-1')}' is not supported: "
        f"send the body as {ACCEPTED}, with a single encoding.",
        code="unsupported_media_type",
    )


def _corrupt(name: str) -> ApiError:
    return invalid(f"The request body is not valid {name} data (Content-Encoding: {name}).")


def _gunzip(data: bytes, cap: int) -> bytes:
    out = bytearray()
    while data:  # one pass per gzip member (RFC 1952 allows several)
        stream = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        while True:
            try:
                # max_length >= 1 here: 0 would mean "no limit".
                out += stream.decompress(data, cap + 1 - len(out))
            except zlib.error:
                raise _corrupt("gzip") from None
            if len(out) > cap:
                raise body_too_large(cap)
            data = stream.unconsumed_tail
            if stream.eof or not data:
                break
        if not stream.eof:
            raise _corrupt("gzip")  # truncated
        data = stream.unused_data
    return bytes(out)


def _unzstd(data: bytes, cap: int) -> bytes:
    reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=True)
    out = bytearray()
    try:
        while chunk := reader.read(cap + 1 - len(out)):
            out += chunk
            if len(out) > cap:
                raise body_too_large(cap)
        # The reader ends quietly on a truncated frame: a frame that declares
        # its size (one-shot compressors write it) shows one.
        declared = zstandard.get_frame_parameters(data).content_size if data else 0
    except zstandard.ZstdError:
        raise _corrupt("zstd") from None
    if (data and not out) or (declared != zstandard.CONTENTSIZE_UNKNOWN and len(out) < declared):
        raise _corrupt("zstd")
    return bytes(out)
