"""The embeddings endpoint: how much one request may ask, and how much of a
backend's answer is read."""

from __future__ import annotations

from config.declared.spec import UPSTREAM, WEB, Setting

TITLE = "Embeddings"

SETTINGS = (
    Setting(
        "SWITCHYARD_EMBEDDINGS_MAX_INPUTS",
        "int",
        2048,
        "The most inputs (strings or token lists) one POST /v1/embeddings may send; more is a "
        "400 naming `input`.",
        (WEB,),
    ),
    Setting(
        "SWITCHYARD_EMBEDDINGS_MAX_CHARACTERS",
        "int",
        1_000_000,
        "The most characters (token ids count one each) the inputs of one embeddings request "
        "may hold together; more is a 400 naming `input`.",
        (WEB,),
    ),
    Setting(
        "SWITCHYARD_EMBEDDINGS_MAX_ANSWER_BYTES",
        "int",
        64 * 1024 * 1024,
        "The most of a backend's embeddings answer that is read, in bytes; a longer answer is a "
        "502, its connection dropped.",
        UPSTREAM,
    ),
)
