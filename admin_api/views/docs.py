"""The interactive reference of the management API (public, like its schema)."""

from django.http import HttpRequest, HttpResponse
from django.urls import reverse

from responses_api.views import docs_page


def docs(request: HttpRequest) -> HttpResponse:
    return docs_page(
        schema_url=reverse("admin_api:schema"), title="Switchyard management API reference"
    )
