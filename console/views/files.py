"""Files: the organisation's uploaded files (the Files API), their use of
its quota, and deleting one."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from responses_api.files.selectors import file_get, file_quota, files_page, files_used_bytes
from responses_api.files.service import file_delete

# The newest files shown; the API lists them all.
SHOWN = 500


def file_list(request: HttpRequest, membership) -> HttpResponse:
    organisation = membership.organisation
    page = files_page(organisation_id=organisation.pk, limit=SHOWN)
    assert page is not None
    used = files_used_bytes(organisation_id=organisation.pk)
    quota = file_quota(organisation)
    context = {
        "files": page.files,
        "more": page.has_more,
        "shown": SHOWN,
        "used": used,
        "quota": quota,
        "percent": min(100, round(100 * used / quota)) if quota else 100,
    }
    return render(request, "console/files.html", context)


def _file(membership, file_id: str):
    found = file_get(organisation_id=membership.organisation_id, file_id=file_id)
    if found is None:  # another organisation's file too
        raise Http404("No such file.")
    return found


@require_http_methods(["GET", "POST"])
def file_remove(request: HttpRequest, membership, file_id: str) -> HttpResponse:
    found = _file(membership, file_id)
    if request.method == "POST":
        file_delete(organisation_id=membership.organisation_id, file_id=found.id)
        messages.success(request, f"File “{found.filename}” deleted.")
        return redirect("console:files")
    return render(request, "console/file_delete.html", {"file": found})
