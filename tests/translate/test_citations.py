"""Citations are read from the answer's text: bracketed numbers of this
response's results and their URLs written out, nothing else."""

from responses_api.translate.citations import Source, url_citations
from responses_api.translate.events import Closing, text_closed
from responses_api.translate.items import Item

SOURCES = [
    Source("https://a.example/one", "One"),
    Source("https://b.example/two", "Two"),
    Source("https://c.example/three", "Three"),
]


def spans(text: str) -> list[tuple[str, str]]:
    return [
        (text[c["start_index"] : c["end_index"]], c["url"]) for c in url_citations(text, SOURCES)
    ]


def test_a_number_in_brackets_cites_that_result():
    assert spans("It is so [2].") == [("[2]", "https://b.example/two")]


def test_several_numbers_in_one_marker_cite_each():
    assert spans("Both [1, 3] agree.") == [
        ("[1, 3]", "https://a.example/one"),
        ("[1, 3]", "https://c.example/three"),
    ]


def test_a_number_that_is_no_result_is_left_alone():
    assert spans("See [4] and [0] and [1][2].") == [
        ("[1]", "https://a.example/one"),
        ("[2]", "https://b.example/two"),
    ]


def test_a_result_s_url_written_out_is_cited_where_it_stands():
    text = "Read https://c.example/three and https://d.example/other."
    assert spans(text) == [("https://c.example/three", "https://c.example/three")]


def test_indexes_count_characters_not_bytes():
    text = "Éclair — café [1]"
    [citation] = url_citations(text, SOURCES)
    assert text[citation["start_index"] : citation["end_index"]] == "[1]"
    assert citation == {
        "type": "url_citation",
        "start_index": 14,
        "end_index": 17,
        "url": "https://a.example/one",
        "title": "One",
    }


def test_a_closing_answer_announces_its_citations_before_its_text_is_done():
    item = Item("message", 3, "msg_1", text=["It is so [2]."])
    closing = Closing(annotate=lambda text: url_citations(text, SOURCES))
    events = text_closed(item, "completed", closing)
    kinds = [event["type"] for event in events]
    assert kinds == [
        "response.output_text.annotation.added",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
    ]
    assert events[0]["annotation_index"] == 0 and events[0]["output_index"] == 3
    assert item.done_item["content"][0]["annotations"] == [events[0]["annotation"]]
