"""``filters`` on file attributes: each comparison, and/or, and in a search."""

from __future__ import annotations

import pytest

from responses_api.retrieval.errors import InvalidParameter
from responses_api.retrieval.filters import filter_parse
from responses_api.retrieval.ingest import ingest_file
from responses_api.retrieval.search import vector_store_search

ATTRS = {"team": "hr", "year": 2025, "public": True, "date": "2025-03-01"}


@pytest.mark.parametrize(
    "filters, expected",
    [
        ({"type": "eq", "key": "team", "value": "hr"}, True),
        ({"type": "eq", "key": "team", "value": "it"}, False),
        ({"type": "ne", "key": "team", "value": "it"}, True),
        ({"type": "gt", "key": "year", "value": 2024}, True),
        ({"type": "gte", "key": "year", "value": 2025}, True),
        ({"type": "lt", "key": "year", "value": 2025}, False),
        ({"type": "lte", "key": "year", "value": 2025.0}, True),
        ({"type": "lt", "key": "date", "value": "2025-04-01"}, True),
        ({"type": "gt", "key": "team", "value": 3}, False),
        ({"type": "eq", "key": "public", "value": True}, True),
        ({"type": "eq", "key": "public", "value": 1}, False),
        ({"type": "in", "key": "team", "value": ["it", "hr"]}, True),
        ({"type": "nin", "key": "team", "value": ["it", "hr"]}, False),
        ({"type": "eq", "key": "missing", "value": "x"}, False),
        ({"type": "ne", "key": "missing", "value": "x"}, False),
        (
            {
                "type": "and",
                "filters": [
                    {"type": "eq", "key": "team", "value": "hr"},
                    {
                        "type": "or",
                        "filters": [
                            {"type": "lt", "key": "year", "value": 2000},
                            {"type": "eq", "key": "public", "value": True},
                        ],
                    },
                ],
            },
            True,
        ),
        ({"type": "or", "filters": []}, False),
        ({"type": "and", "filters": []}, True),
    ],
)
def test_each_comparison_and_compound(filters, expected):
    assert filter_parse(filters)(ATTRS) is expected


@pytest.mark.parametrize(
    "filters",
    [
        "team = hr",
        {"type": "eq", "key": "team"},
        {"type": "in", "key": "team", "value": "hr"},
        {"type": "eq", "key": "team", "value": {"nested": 1}},
        {"type": "and", "filters": {"type": "eq"}},
        {"type": "eq", "key": "team", "value": "hr", "extra": 1},
    ],
)
def test_malformed_filters_are_refused(filters):
    with pytest.raises(InvalidParameter):
        filter_parse(filters)


def test_filters_nested_too_deep_are_refused():
    deep = {"type": "eq", "key": "a", "value": 1}
    for _ in range(20):
        deep = {"type": "and", "filters": [deep]}
    with pytest.raises(InvalidParameter, match="nest"):
        filter_parse(deep)


def test_a_search_returns_only_the_files_its_filters_keep(people, acme_store, embed):
    org = people["acme"].id
    for n, team in enumerate(["hr", "it", "hr", "sales"]):
        ingest_file(
            org,
            acme_store.id,
            f"file-{n}",
            f"Policy number {n} about laptops.".encode(),
            f"{n}.txt",
            embed,
            attributes={"team": team, "n": n},
        )
    page = vector_store_search(
        organisation_id=org,
        store_id=acme_store.id,
        query="laptops policy",
        embed=embed,
        filters={"type": "eq", "key": "team", "value": "hr"},
    )
    assert sorted(r["file_id"] for r in page["data"]) == ["file-0", "file-2"]
    none = vector_store_search(
        organisation_id=org,
        store_id=acme_store.id,
        query="laptops",
        embed=embed,
        filters={"type": "gt", "key": "n", "value": 10},
    )
    assert none["data"] == []
