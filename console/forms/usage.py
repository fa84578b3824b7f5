"""The filters of the usage and support pages: which requests to list."""

from __future__ import annotations

import uuid
from datetime import timedelta

from django import forms

from console.forms.common import DateTimeLocalInput, set_choices


def clean_request_id(value: str) -> str:
    """A request id filter: empty, or a UUID in its canonical form."""
    value = value.strip()
    if not value:
        return ""
    try:
        return str(uuid.UUID(value))
    except ValueError as exc:
        raise forms.ValidationError("A request id is a UUID.") from exc


# The fewest first characters of a request id the usage log searches by.
PREFIX_LENGTH = 8
_HEX = frozenset("0123456789abcdef")


def clean_request_id_or_prefix(value: str) -> str:
    """A request id filter that also takes the start of an id, as a log line
    or a message often carries it: a whole UUID in its canonical form, or
    its first hex digits (dashes dropped, at least ``PREFIX_LENGTH``)."""
    value = value.strip()
    try:
        return clean_request_id(value)
    except forms.ValidationError:
        digits = value.replace("-", "").lower()
        if len(digits) < PREFIX_LENGTH or len(digits) >= 32 or not set(digits) <= _HEX:
            raise forms.ValidationError(
                f"A request id is a UUID. Its first {PREFIX_LENGTH} characters or more find it too."
            ) from None
        return digits


STATUS_CHOICES = [
    ("", "Any status"),
    ("200", "200 OK"),
    ("4xx", "4xx client errors (not 499)"),
    ("429", "429 rate limited"),
    ("499", "499 client disconnected"),
    ("5xx", "5xx server errors"),
]
STREAM_CHOICES = [("", "Stream or not"), ("yes", "Streamed"), ("no", "Not streamed")]
RANGE_CHOICES = [
    ("", "Any time"),
    ("1h", "Last hour"),
    ("24h", "Last 24 hours"),
    ("7d", "Last 7 days"),
    ("30d", "Last 30 days"),
]
RANGES = {
    "1h": timedelta(hours=1),
    "24h": timedelta(hours=24),
    "7d": timedelta(days=7),
    "30d": timedelta(days=30),
}


class UsageFilterForm(forms.Form):
    request_id = forms.CharField(
        required=False,
        label="Request id",
        widget=forms.TextInput(attrs={"placeholder": "uuid, or its first 8 characters"}),
    )
    status = forms.ChoiceField(required=False, choices=STATUS_CHOICES)
    model = forms.ChoiceField(required=False)
    key = forms.ChoiceField(required=False, label="API key")
    backend = forms.ChoiceField(required=False)
    stream = forms.ChoiceField(required=False, choices=STREAM_CHOICES)
    range = forms.ChoiceField(required=False, choices=RANGE_CHOICES, label="Time")
    since = forms.DateTimeField(required=False, widget=DateTimeLocalInput(), label="From")
    until = forms.DateTimeField(required=False, widget=DateTimeLocalInput(), label="To")
    session = forms.CharField(
        required=False,
        max_length=128,
        label="Session",
        widget=forms.TextInput(attrs={"placeholder": "session id"}),
    )
    # Set by a trace's link to the requests about one response (its polls).
    endpoint = forms.CharField(required=False, max_length=100, widget=forms.HiddenInput)

    def __init__(self, *args, models: list[str], keys, backends, **kwargs):
        super().__init__(*args, **kwargs)
        set_choices(self, "model", [("", "Any model")] + [(m, m) for m in models])
        set_choices(
            self,
            "key",
            [("", "Any key")] + [(str(k.id), f"{k.name} ({k.prefix}…)") for k in keys],
        )
        set_choices(
            self, "backend", [("", "Any backend")] + [(str(b.id), b.name) for b in backends]
        )

    def clean_request_id(self) -> str:
        return clean_request_id_or_prefix(self.cleaned_data.get("request_id", ""))
