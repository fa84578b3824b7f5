"""A request's web_search tool settings: OpenAI's fields, nulls as their
defaults, and a 400 naming the field for anything else."""

import pytest

from responses_api.catalogue.web_search import SearchSettings, search_settings
from responses_api.protocol.errors import ApiError


def test_nulls_and_absent_fields_take_the_defaults():
    tool = {
        "type": "web_search",
        "search_context_size": None,
        "filters": None,
        "user_location": None,
    }
    assert search_settings(tool, 0) == SearchSettings(results=5, snippet_chars=600)


def test_the_fields_shape_the_searches():
    tool = {
        "type": "web_search_2025_08_26",
        "search_context_size": "high",
        "filters": {"allowed_domains": ["https://www.Example.com/", "docs.python.org"]},
        "user_location": {"type": "approximate", "country": "de", "city": "Berlin"},
    }
    assert search_settings(tool, 2) == SearchSettings(
        results=8,
        snippet_chars=1200,
        page_chars=12000,
        allowed_domains=("example.com", "docs.python.org"),
        country="DE",
    )


@pytest.mark.parametrize(
    ("tool", "param"),
    [
        ({"search_context_size": "max"}, "tools[1].search_context_size"),
        ({"filters": ["a.com"]}, "tools[1].filters"),
        ({"filters": {"allowed_domains": "a.com"}}, "tools[1].filters.allowed_domains"),
        ({"filters": {"allowed_domains": ["a.com"] * 101}}, "tools[1].filters.allowed_domains"),
        ({"user_location": {"type": "exact"}}, "tools[1].user_location"),
        ({"user_location": {"country": "France"}}, "tools[1].user_location.country"),
    ],
)
def test_a_wrong_field_is_a_400_naming_it(tool, param):
    refused = search_settings({"type": "web_search", **tool}, 1)
    assert isinstance(refused, ApiError) and refused.status == 400
    assert refused.param == param
