"""Writes to organisations, memberships, invitations and API keys, a module
per record kind.

The one write path for these records: the console, the REST API and the
management commands all call these functions, so every change is validated
the same way (by the checks of :mod:`accounts.validation`) and leaves an audit
entry. Bad input raises :class:`~django.core.exceptions.ValidationError` keyed
by field name; a rule about who may do what raises
:class:`~django.core.exceptions.PermissionDenied`.
"""
