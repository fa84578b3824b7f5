"""Usage exports as cells a spreadsheet shows, never runs, and people read.

Every CSV export a person may open in a spreadsheet (``manage.py
usage_export``, and the console's and the management API's through
``usage/export.py``) writes its cells through :func:`csv_value`.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

from responses_api.usage.spend import money

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


def csv_value(column: str, value: Any) -> Any:
    """A usage row's ``column`` as its CSV cell: money in decimals (a zero
    cost is ``0.00``, never Python's ``0E-8``), timings in whole
    milliseconds, a rate to a tenth, flags as ``true``/``false``; the
    precise values stay in the JSON exports, read by programs."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Decimal):
        return money(value)
    if isinstance(value, float):
        if column.endswith("_ms"):
            return f"{value:.0f}"
        return f"{value:.1f}"
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, list):
        return csv_cell(" ".join(str(v) for v in value))
    return csv_cell(value)
