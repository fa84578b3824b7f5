"""``file_citation`` annotations, read from an answer's text: the rule
docs/api/file-search.md states."""

from __future__ import annotations

from responses_api.translate.citations import FileSource, file_citations

SOURCES = [
    FileSource("file-a", "refunds.md", "Refunds take 14 days."),
    FileSource("file-b", "travel.md", "Receipts are needed."),
    FileSource("file-a", "refunds.md", "Refunds go to the card."),
]


def cited(text: str) -> list[tuple[str, int]]:
    return [(a["file_id"], a["index"]) for a in file_citations(text, SOURCES)]


def test_a_marker_cites_its_result_s_file_at_the_marker_s_start():
    text = "Two weeks [1]. Keep receipts [2]."
    assert cited(text) == [("file-a", text.index("[1]")), ("file-b", text.index("[2]"))]
    [first, _] = file_citations(text, SOURCES)
    assert first == {
        "type": "file_citation",
        "file_id": "file-a",
        "filename": "refunds.md",
        "index": 10,
    }


def test_a_file_is_cited_once_at_one_index():
    text = "Refunds [1, 3] and [2][3]."
    assert cited(text) == [
        ("file-a", 8),
        ("file-b", text.index("[2]")),
        ("file-a", text.index("[3]")),
    ]


def test_a_number_that_is_no_result_is_left_alone():
    assert cited("Maybe [4] or [0], or [1, 9].") == []


def test_a_file_name_written_out_cites_it_at_its_end():
    text = "See travel.md for the rules."
    assert cited(text) == [("file-b", text.index("travel.md") + len("travel.md"))]


def test_nothing_found_nothing_cited():
    assert file_citations("Anything [1].", []) == []
