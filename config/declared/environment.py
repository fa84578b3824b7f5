"""Every environment variable Switchyard reads, declared once, and the one
way the settings read them.

:func:`read` parses a variable by its declared type (with django-environ,
as the settings always have), applies its declared choices, and takes a
secret from ``NAME_FILE`` when that is set; a name without a declaration is
a ``LookupError``, so a setting cannot be added without one.
``tests/ops/test_declared.py`` also scans the product's code for
environment reads outside :func:`read`, and checks that the generated
reference (``scripts/settings_reference.py``) is the committed one.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import environ
from django.core.exceptions import ImproperlyConfigured

from config.declared import (
    elsewhere,
    embeddings,
    files,
    gateway,
    process,
    retrieval,
    routing,
    sign_in,
    stores,
    tools,
)
from config.declared.spec import Derived, Setting

# The reference's sections, in its order: what Switchyard's processes
# read, then what others read.
SECTIONS: tuple[tuple[str, tuple[Setting, ...]], ...] = (
    (process.TITLE, process.SETTINGS),
    (stores.TITLE, stores.SETTINGS),
    (gateway.TITLE, gateway.SETTINGS),
    (routing.TITLE, routing.SETTINGS),
    (tools.TITLE, tools.SETTINGS),
    (embeddings.TITLE, embeddings.SETTINGS),
    (files.TITLE, files.SETTINGS),
    (retrieval.TITLE, retrieval.SETTINGS),
    (sign_in.TITLE, sign_in.SETTINGS),
    ("Read by the OpenTelemetry SDK", process.OPENTELEMETRY),
    ("Read by the systemd units", elsewhere.SYSTEMD),
    ("Read by clients", elsewhere.CLIENTS),
    ("Read by the tests and install scripts", elsewhere.TESTS),
)
DECLARED: dict[str, Setting] = {s.name: s for _, group in SECTIONS for s in group}

PREFIX = "SWITCHYARD_"
_UNSET: Any = object()
_env = environ.Env()


def declaration(name: str) -> Setting:
    try:
        return DECLARED[name]
    except KeyError:
        raise LookupError(
            f"{name} has no declaration in config/declared/: declare it (name, type, default, "
            "description, processes) before reading it."
        ) from None


def given(name: str) -> str:
    """The text of ``name`` as given (a secret's ``NAME_FILE`` contents
    first), empty when unset."""
    setting = declaration(name)
    if setting.secret:
        path = _env.str(f"{name}_FILE", default="")
        if path:
            try:
                return Path(path).read_text().strip()
            except OSError as exc:
                raise ImproperlyConfigured(f"{name}_FILE={path} cannot be read: {exc}") from exc
    return str(_env.str(name, default=""))


def read(name: str, default: Any = _UNSET) -> Any:
    """The value of ``name``, parsed as declared; when unset, the declared
    default, or ``default`` for one the settings derive (``Derived``).
    An empty secret counts as unset."""
    setting = declaration(name)
    if default is _UNSET:
        if isinstance(setting.default, Derived):
            raise TypeError(f"{name}'s default is derived: pass it to read().")
        default = list(setting.default) if isinstance(setting.default, tuple) else setting.default
    if setting.secret:
        return given(name) or default
    value = getattr(_env, "str" if setting.kind == "url" else setting.kind)(name, default=default)
    if setting.case and isinstance(value, str):
        value = value.lower() if setting.case == "lower" else value.upper()
    if setting.choices and value not in setting.choices:
        allowed = " or ".join(repr(choice) for choice in setting.choices)
        raise ImproperlyConfigured(f"{name} must be {allowed}, not {value!r}.")
    return value


def unknown_variables(environment: Mapping[str, str]) -> list[str]:
    """One warning line per ``SWITCHYARD_*`` variable of ``environment``
    that no declaration names (a secret's ``NAME_FILE`` is its own),
    naming the closest declared one: a misspelt setting is otherwise
    silently ignored. Names only: a value may be a secret."""
    known = set(DECLARED) | {f"{s.name}_FILE" for s in DECLARED.values() if s.secret}
    # Compared without the prefix, which every candidate would share:
    # SWITCHYARD_REDIS_URL is then closest to REDIS_URL.
    bare = {name.removeprefix(PREFIX): name for name in DECLARED}
    lines = []
    for name in sorted(environment):
        if not name.startswith(PREFIX) or name in known:
            continue
        close = difflib.get_close_matches(name.removeprefix(PREFIX), bare, n=1, cutoff=0.6)
        hint = f"; did you mean {bare[close[0]]}?" if close else ""
        lines.append(
            f"{name} is set but is not a Switchyard setting, so it is ignored{hint} "
            "(docs/reference/settings.md lists them all)"
        )
    return lines
