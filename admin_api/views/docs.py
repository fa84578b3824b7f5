"""The interactive reference of the management API (public, like its schema)."""

from django.http import HttpRequest, HttpResponse

from responses_api.views import docs_page


def docs(request: HttpRequest) -> HttpResponse:
    return docs_page(
        schema_url="/api/v1/admin/openapi.json", title="Switchyard management API reference"
    )
