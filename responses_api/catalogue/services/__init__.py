"""Writes to backends, models and deployments, a module per record kind.

The one write path for these records: the console, the REST API and the
management commands all call these functions, so every change is validated
the same way (by the checks of :mod:`accounts.validation`), leaves an audit
entry, and makes the API's catalogue cache forget the organisation at once.
Bad input raises :class:`~django.core.exceptions.ValidationError` keyed by
field name.
"""
