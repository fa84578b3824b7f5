"""The console's Files page in a real headless Chromium against a live
daphne: a file uploaded with the SDK is listed with its size, and deleting
it in the page deletes it for the API. Skipped without Chromium, as the
console's own browser tests are (tests/console/test_browser.py)."""

from __future__ import annotations

import io

import openai
import pytest

from tests.console.test_browser import page  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.live, pytest.mark.django_db(transaction=True)]


def test_a_file_is_listed_and_deleted_in_a_browser(page, files_server, acme):  # noqa: F811
    created = acme.files.create(
        file=("browser-report.csv", io.BytesIO(b"a,b\n" * 512)), purpose="user_data"
    )
    console = files_server.url + "/console/"
    page.goto(console)
    page.fill("input[name=username]", "alice@example.com")
    page.fill("input[name=password]", "alice-password-1")
    page.click("button[type=submit]")
    page.wait_for_url(console)
    page.click("nav >> text=Files")
    assert page.locator("h1").inner_text() == "Files"
    row = page.locator("tr", has_text="browser-report.csv")
    assert created.id in row.inner_text() and "2.0" in row.inner_text()
    assert "used" in page.content()
    row.locator("text=Delete").click()
    page.click("button:has-text('Delete file')")
    page.wait_for_url(files_server.url + "/console/files/")
    assert "File “browser-report.csv” deleted." in page.content()
    assert page.locator("tr", has_text="browser-report.csv").count() == 0
    with pytest.raises(openai.NotFoundError):
        acme.files.retrieve(created.id)
