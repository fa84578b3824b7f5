"""What a declaration says about one environment variable.

Every variable Switchyard reads is declared once, in a module of this
package, with its type, its default and who reads it; the settings read it
through :func:`config.declared.read`, and the configuration reference
(``docs/reference/settings.md``) and the settings table of
``platform/README.md`` are written from the same declarations
(``scripts/settings_reference.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# How a value is parsed (by django-environ, as the settings always have).
Kind = Literal["str", "int", "float", "bool", "list", "url"]

# Who reads a variable: Switchyard's own code, the OpenTelemetry SDK inside
# Switchyard's processes, the systemd units of platform/systemd, a client
# such as Codex on the user's machine, or the test suite and install scripts.
Reader = Literal["switchyard", "opentelemetry", "systemd", "client", "tests"]

# The processes of docs/operations/index.md, "The processes", and the others.
WEB = "web"
WORKER = "worker"
BEAT = "beat"
USAGE = "usage"
MIGRATE = "migrate"
COMMANDS = "manage.py commands"
ALL = (WEB, WORKER, BEAT, USAGE, MIGRATE, COMMANDS)
# The processes that call upstream backends: the web process, and the
# Celery worker for background responses and health checks.
UPSTREAM = (WEB, WORKER)

# Placements in platform/README.md's table: where an operator sets it on
# Kubernetes / on machines.
SECRET_FILE = "Secret / credential file"
SECRET_ENV = "Secret / `secrets.env` (or credential file)"
CONFIG = "ConfigMap / env file"


class Derived:
    """A default computed from other settings: the settings pass it to
    :func:`config.declared.read`, the reference shows ``shown``."""

    def __init__(self, shown: str) -> None:
        self.shown = shown

    def __repr__(self) -> str:
        return f"Derived({self.shown!r})"


@dataclass(frozen=True)
class Setting:
    """One environment variable.

    ``default`` is the value when the variable is unset (``None``: unset,
    ``Derived``: computed by the settings). A ``secret`` may instead be given
    as ``NAME_FILE``, the path of a file holding it, and is never shown.
    ``choices`` are the values accepted (after ``case`` folding); anything
    else stops the process naming the variable. ``placement`` puts the
    variable in platform/README.md's table, saying where operators set it.
    """

    name: str
    kind: Kind
    default: object
    description: str
    processes: tuple[str, ...]
    secret: bool = False
    choices: tuple[str, ...] = ()
    case: Literal["", "lower", "upper"] = ""
    reader: Reader = "switchyard"
    placement: str = ""
    shown_default: str = ""
