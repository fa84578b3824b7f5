"""Compressed request bodies (``Content-Encoding: gzip`` or ``zstd``).

A body is decompressed incrementally and never past the size cap plus one
byte, so the cap (``SWITCHYARD_MAX_BODY_BYTES``) bounds the *decoded* body
and a small "zip bomb" costs no more memory than an honest body at the cap.
The work is bounded too: a gzip body holds at most ``MAX_GZIP_MEMBERS``
members, each read through a window of the input (no copy of the rest of
the body per member), and a body that would take more than a millisecond
is decoded off the event loop (:func:`decode`).
"""

from __future__ import annotations

import asyncio
import io
import zlib

import zstandard

from responses_api.protocol.errors import ApiError, body_too_large, invalid

ACCEPTED = "gzip, zstd or identity"

# RFC 1952 allows a body of several gzip members, and some clients write one
# per flush; thousands of them are an attack (each costs a decompressor and
# a pass through Python), not a client.
MAX_GZIP_MEMBERS = 64

# zlib copies the input left after a member's end into ``unused_data``: fed
# the whole body, every member would copy the rest of it (quadratic in the
# number of members); fed windows of this size, a member copies at most one.
_WINDOW = 64 * 1024

# Decoding costs time in proportion to its output (gzip; zstd is faster),
# and a body of empty deflate blocks costs input without output. A body under
# INLINE_BYTES is decoded on the event loop up to INLINE_OUTPUT bytes, a
# fraction of a millisecond; a bigger one, or one that decodes to more, is
# decoded in a worker thread, whose round trip costs the loop far less than
# the decoding would.
INLINE_BYTES = 32 * 1024
INLINE_OUTPUT = 256 * 1024


async def decode(body: bytes, encoding: bytes | None, *, cap: int) -> bytes:
    """:func:`decode_body`, off the event loop when decoding would hold up
    every other request of the process for more than a millisecond."""
    if encoding is None or encoding.strip().lower() in (b"", b"identity"):
        return body
    if len(body) < INLINE_BYTES:
        if cap <= INLINE_OUTPUT:
            return decode_body(body, encoding, cap=cap)
        try:
            return decode_body(body, encoding, cap=INLINE_OUTPUT)
        except ApiError as error:
            if error.status != 413:
                raise
    return await asyncio.to_thread(decode_body, body, encoding, cap=cap)


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
    view = memoryview(data)
    end = len(data)
    position = 0
    members = 0
    out = bytearray()
    while position < end:  # one pass per gzip member
        members += 1
        if members > MAX_GZIP_MEMBERS:
            raise invalid(
                f"The gzip request body has more than {MAX_GZIP_MEMBERS} members: "
                "compress it as one (Content-Encoding: gzip)."
            )
        stream = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        while not stream.eof:
            if position >= end:
                raise _corrupt("gzip")  # truncated
            window = view[position : position + _WINDOW]
            try:
                # max_length >= 1 here: 0 would mean "no limit".
                out += stream.decompress(window, cap + 1 - len(out))
            except zlib.error:
                raise _corrupt("gzip") from None
            if len(out) > cap:
                raise body_too_large(cap)
            # Output under the limit means zlib took all the input it could
            # use; what it did not take starts the next member.
            position += len(window) - len(stream.unconsumed_tail) - len(stream.unused_data)
    return bytes(out)


def _unzstd(data: bytes, cap: int) -> bytes:
    # The C decoder reads across frames itself, in linear time: a body of a
    # million one-byte frames (16 MiB) decodes in about 0.1 s, off the loop.
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
