"""Each format a vector store reads gives its text."""

from __future__ import annotations

import json

import pytest

from responses_api.retrieval.errors import ParseError
from responses_api.retrieval.parsing import extract_text, file_format
from tests.retrieval.conftest import pdf_bytes


def test_plain_text_and_markdown_are_read_as_they_are():
    assert extract_text(b"Hello, world.\n", "a.txt") == "Hello, world."
    markdown = "# Title\n\nSome *emphasis* and a [link](https://example.com)."
    assert extract_text(markdown.encode(), "README.md") == markdown


def test_utf8_bom_and_utf16_are_decoded():
    assert extract_text("\ufeffcafé".encode(), "a.txt") == "café"
    assert extract_text("naïve text".encode("utf-16"), "a.txt") == "naïve text"


def test_csv_rows_keep_their_column_names():
    text = extract_text(b"name,colour\nApple,red\nPlum,purple\n", "fruit.csv")
    assert text.splitlines() == [
        "name, colour",
        "name: Apple | colour: red",
        "name: Plum | colour: purple",
    ]


def test_json_is_indented_with_its_keys():
    text = extract_text(json.dumps({"policy": {"leave_days": 25}}).encode(), "p.json")
    assert '"leave_days": 25' in text
    assert json.loads(text) == {"policy": {"leave_days": 25}}


def test_html_gives_the_visible_text_only():
    html = (
        b"<html><head><title>T</title><style>p{color:red}</style></head><body>"
        b"<h1>Refunds</h1><script>alert('x')</script><p>Within 30&nbsp;days.</p></body></html>"
    )
    assert extract_text(html, "page.html") == "Refunds\nWithin 30 days."


def test_pdf_text_is_extracted_page_by_page():
    text = extract_text(pdf_bytes("Quarterly revenue grew.", "Costs fell (slightly)."), "r.pdf")
    assert "Quarterly revenue grew." in text
    assert "Costs fell (slightly)." in text


def test_a_pdf_is_known_by_its_signature_whatever_its_name():
    assert file_format("notes.txt", pdf_bytes("x")) == "pdf"


def test_an_unknown_type_is_unsupported():
    with pytest.raises(ParseError) as raised:
        extract_text(b"MZ\x90\x00", "setup.exe")
    assert raised.value.code == "unsupported_file"


def test_a_file_without_text_fails():
    with pytest.raises(ParseError, match="no text"):
        extract_text(b"   \n\t ", "empty.txt")
