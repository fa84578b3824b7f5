"""Every page names its icon, and ``/favicon.ico`` leads to it: no 404 in
the log of a page view."""

import pytest
from django.contrib.staticfiles import finders
from django.templatetags.static import static

ICON = static("console/favicon.svg")


@pytest.mark.django_db
@pytest.mark.parametrize("url", ["/console/login/", "/api/v1/docs/", "/api/v1/admin/docs/"])
def test_pages_name_the_icon(client, url):
    page = client.get(url, follow=True)
    assert page.status_code == 200
    assert f'<link rel="icon" href="{ICON}" type="image/svg+xml">' in page.content.decode()


def test_favicon_ico_leads_to_the_icon(client):
    answer = client.get("/favicon.ico")
    assert (answer.status_code, answer["Location"]) == (302, ICON)
    assert finders.find("console/favicon.svg")
