"""Vector store fixtures: a store for Acme, and an embedder.

The embedder is a real one of its kind, a feature-hashing bag of words
(each normalised word adds to a dimension picked by its hash): texts that
share words are near, texts that share none are orthogonal, so the vector
ranking of a search can be predicted. It counts its calls."""

from __future__ import annotations

import hashlib
import io
import math

import pytest

from responses_api.retrieval.terms import words

DIMENSIONS = 64


class HashingEmbedder:
    def __init__(self, dimensions: int = DIMENSIONS) -> None:
        self.dimensions = dimensions
        self.calls = 0

    def vector(self, text: str) -> list[float]:
        vector = [0.0] * self.dimensions
        for word in words(text):
            digest = hashlib.blake2b(word.encode(), digest_size=4).digest()
            vector[int.from_bytes(digest, "big") % self.dimensions] += 1.0
        norm = math.sqrt(sum(v * v for v in vector)) or 1.0
        return [v / norm for v in vector]

    def __call__(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        return [self.vector(text) for text in texts]


@pytest.fixture
def embed() -> HashingEmbedder:
    return HashingEmbedder()


@pytest.fixture
def acme_store(people):
    from responses_api.retrieval.stores import vector_store_create

    return vector_store_create(organisation_id=people["acme"].id, name="Handbook")


@pytest.fixture(autouse=True)
def _fresh_indexes():
    """Each test starts with no cached vectors, and builds graphs inline."""
    from responses_api.retrieval.vectors import ANN_MIN, indexes

    indexes.stores.clear()
    indexes.background = False
    yield
    indexes.stores.clear()
    indexes.background, indexes.ann_min = True, ANN_MIN


def pdf_bytes(*pages: str) -> bytes:
    """A real PDF written by pypdf, one page per text, in Helvetica."""
    from pypdf import PdfWriter
    from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

    writer = PdfWriter()
    font = writer._add_object(
        DictionaryObject(
            {
                NameObject("/Type"): NameObject("/Font"),
                NameObject("/Subtype"): NameObject("/Type1"),
                NameObject("/BaseFont"): NameObject("/Helvetica"),
            }
        )
    )
    for text in pages:
        page = writer.add_blank_page(612, 792)
        page[NameObject("/Resources")] = DictionaryObject(
            {NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})}
        )
        stream = DecodedStreamObject()
        escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        stream.set_data(f"BT /F1 12 Tf 72 720 Td ({escaped}) Tj ET".encode("latin-1"))
        page[NameObject("/Contents")] = writer._add_object(stream)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()
