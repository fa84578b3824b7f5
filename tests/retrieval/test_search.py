"""Hybrid search over a store: what it finds, how it ranks, its options."""

from __future__ import annotations

import pytest

from responses_api.models import Chunk
from responses_api.retrieval.errors import InvalidParameter, NotFound
from responses_api.retrieval.ingest import ingest_file
from responses_api.retrieval.search import vector_store_search
from responses_api.runtime import secrets

DOCS = {
    "file-leave": ("leave.md", "Employees get twenty five days of annual leave each year."),
    "file-expenses": ("expenses.txt", "Expenses are reimbursed within thirty days of a claim."),
    "file-security": ("security.html", "<p>Badges must be worn visibly on site at all times.</p>"),
}


@pytest.fixture
def filled(people, acme_store, embed):
    org = people["acme"].id
    for file_id, (name, text) in DOCS.items():
        attributes = {"team": "hr" if file_id != "file-security" else "facilities"}
        attributes["year"] = 2024 if file_id == "file-leave" else 2026
        done = ingest_file(
            org, acme_store.id, file_id, text.encode(), name, embed, attributes=attributes
        )
        assert done.status == "completed", done.last_error
    return acme_store


def search(people, store, embed=None, **options):
    return vector_store_search(
        organisation_id=people["acme"].id, store_id=store.id, embed=embed, **options
    )


def test_the_file_about_the_query_comes_first_with_openai_s_result_shape(people, filled, embed):
    page = search(people, filled, embed, query="How many days of annual leave?")
    first = page["data"][0]
    assert first["file_id"] == "file-leave"
    assert first["filename"] == "leave.md"
    assert first["attributes"] == {"team": "hr", "year": 2024}
    assert first["content"] == [{"type": "text", "text": DOCS["file-leave"][1]}]
    assert 0 < first["score"] <= 1
    assert page["object"] == "vector_store.search_results.page"
    assert [r["score"] for r in page["data"]] == sorted(
        (r["score"] for r in page["data"]), reverse=True
    )


def test_a_chunk_first_in_both_rankings_scores_one(people, filled, embed):
    page = search(people, filled, embed, query="badges worn visibly on site")
    assert page["data"][0]["file_id"] == "file-security"
    assert page["data"][0]["score"] == 1.0


def test_keyword_search_alone_works_without_an_embedder(people, filled):
    page = search(people, filled, query="reimbursed")
    assert [r["file_id"] for r in page["data"]] == ["file-expenses"]


def test_plural_and_case_match_the_same_words(people, filled):
    page = search(people, filled, query="BADGE")
    assert [r["file_id"] for r in page["data"]] == ["file-security"]


def test_ranker_none_scores_by_cosine_similarity(people, filled, embed):
    page = search(
        people,
        filled,
        embed,
        query="Expenses are reimbursed within thirty days of a claim.",
        ranking_options={"ranker": "none"},
    )
    assert page["data"][0]["file_id"] == "file-expenses"
    assert page["data"][0]["score"] == pytest.approx(1.0, abs=1e-5)


def test_score_threshold_drops_weaker_results(people, filled, embed):
    everything = search(people, filled, embed, query="days", ranking_options={"ranker": "none"})
    assert len(everything["data"]) >= 2
    cut = everything["data"][0]["score"] - 1e-6
    kept = search(
        people,
        filled,
        embed,
        query="days",
        ranking_options={"ranker": "none", "score_threshold": cut},
    )
    assert [r["file_id"] for r in kept["data"]] == [everything["data"][0]["file_id"]]


def test_max_num_results_caps_the_page(people, filled, embed):
    assert (
        len(search(people, filled, embed, query="days leave badges", max_num_results=1)["data"])
        == 1
    )


def test_rewrite_query_reports_the_normalised_words(people, filled, embed):
    page = search(people, filled, embed, query="What are the Expenses rules?", rewrite_query=True)
    assert page["search_query"] == ["expense rule"]
    assert page["data"][0]["file_id"] == "file-expenses"


def test_a_list_query_is_searched_as_one(people, filled, embed):
    page = search(people, filled, embed, query=["annual", "leave"])
    assert page["data"][0]["file_id"] == "file-leave"


@pytest.mark.parametrize(
    "options, param",
    [
        ({"query": ""}, "query"),
        ({"query": "x", "max_num_results": 0}, "max_num_results"),
        ({"query": "x", "max_num_results": 51}, "max_num_results"),
        ({"query": "x", "ranking_options": {"ranker": "best"}}, "ranking_options.ranker"),
        (
            {"query": "x", "ranking_options": {"score_threshold": 2}},
            "ranking_options.score_threshold",
        ),
        ({"query": "x", "filters": {"type": "like", "key": "a", "value": 1}}, "filters.type"),
    ],
)
def test_bad_options_are_refused_naming_the_parameter(people, filled, options, param):
    with pytest.raises(InvalidParameter) as raised:
        search(people, filled, **options)
    assert raised.value.param == param


def test_chunk_text_is_encrypted_at_rest_and_terms_hold_no_word(people, filled):
    chunk = Chunk.objects.filter(store_id=filled.id).first()
    assert "leave" not in chunk.text and "Employee" not in chunk.text
    assert secrets.decrypt(chunk.text) in {text for _, text in DOCS.values()}
    assert set(chunk.terms.replace(" ", "")) <= set("abcdefghijklmnop")
    assert not any(word in chunk.terms for word in ("leave", "badge", "expense"))


def test_another_organisation_s_store_is_missing_to_search(people, filled, embed):
    with pytest.raises(NotFound) as raised:
        vector_store_search(
            organisation_id=people["globex"].id, store_id=filled.id, query="leave", embed=embed
        )
    with pytest.raises(NotFound) as missing:
        vector_store_search(organisation_id=people["globex"].id, store_id="vs_nope", query="leave")
    assert str(raised.value).replace(filled.id, "ID") == str(missing.value).replace("vs_nope", "ID")


def test_the_same_words_in_another_organisation_hash_differently(people, filled, embed):
    from responses_api.retrieval.terms import query_terms

    assert query_terms(people["acme"].id, "leave") != query_terms(people["globex"].id, "leave")


def test_asking_for_pgvector_on_a_database_without_it_searches_in_the_process(
    people, filled, embed, caplog
):
    """The migration left no pgvector tables (SQLite, or a PostgreSQL that
    does not offer the extension); the search still answers, from the
    process's index, and the logs say why."""
    from django.db import connection
    from django.test import override_settings

    from responses_api.retrieval import pgvector
    from responses_api.retrieval.vectors import indexes

    pgvector.forget_detection()
    if pgvector.installed():
        pytest.skip("The database has pgvector (tests/retrieval/test_pgvector.py covers it).")
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT to_regclass('responses_api_chunk_vector')")
            assert cursor.fetchone() == (None,)
    pgvector._warned.clear()
    with override_settings(SWITCHYARD_RETRIEVAL_VECTOR_BACKEND="pgvector"):
        page = search(people, filled, embed, query="How many days of annual leave?")
    assert page["data"][0]["file_id"] == "file-leave"
    assert filled.id in indexes.stores
    assert "SWITCHYARD_RETRIEVAL_VECTOR_BACKEND is pgvector" in caplog.text
