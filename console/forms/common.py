"""What the console's forms share: the bridge from a service's errors back to
the form, and the base of the forms whose fields come from a model."""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator


class DateTimeLocalInput(forms.DateTimeInput):
    input_type = "datetime-local"

    def __init__(self, **kwargs):
        super().__init__(format="%Y-%m-%dT%H:%M", **kwargs)


def set_choices(form: forms.BaseForm, name: str, choices: list[tuple[str, str]]) -> None:
    field = form.fields[name]
    assert isinstance(field, forms.ChoiceField)
    field.choices = choices


def at_least_one(form: forms.BaseForm, *names: str) -> None:
    for name in names:
        field = form.fields[name]
        field.validators.append(MinValueValidator(1, "At least 1."))
        field.widget.attrs["min"] = 1


def errors_onto(form: forms.BaseForm, error: ValidationError) -> None:
    """A service's error on the form: on its field when the form has one."""
    if not hasattr(error, "error_dict"):
        form.add_error(None, error)
        return
    for field, errors in error.error_dict.items():
        form.add_error(field if field in form.fields else None, errors)


class ServiceForm(forms.ModelForm):
    """Fields and initial values come from the model, but the form never
    touches the instance: the service validates, compares and writes."""

    def _post_clean(self) -> None:
        pass

    def save(self, commit: bool = True) -> Any:
        raise NotImplementedError("Call the service that owns this record.")
