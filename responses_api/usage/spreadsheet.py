"""Usage exports as cells a spreadsheet shows, never runs.

Every CSV export a person may open in a spreadsheet (``manage.py
usage_export``, and the console's and the management API's through
``usage/export.py``) writes its cells through :func:`csv_cell`.
"""

from __future__ import annotations

from typing import Any

# A spreadsheet reads a cell starting with one of these as a formula: a
# user agent, a model name or an error message from a request could then
# run one in whoever opens the export. OWASP's "CSV Injection" rule: prefix
# such a text cell with a quote. Numbers (a negative cost) are left alone.
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """``value`` as a CSV cell that no spreadsheet runs as a formula."""
    if isinstance(value, str) and value.startswith(_FORMULA_STARTS):
        return "'" + value
    return value
