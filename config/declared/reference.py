"""The configuration reference and platform/README.md's settings table,
written from the declarations (``scripts/settings_reference.py`` writes
them to disk, and ``--check`` compares)."""

from __future__ import annotations

from config.declared.environment import SECTIONS
from config.declared.spec import ALL, Derived, Setting

BEGIN = "<!-- settings:begin -->"
END = "<!-- settings:end -->"
GENERATED = (
    "<!-- Generated from config/declared/ by scripts/settings_reference.py: edit the "
    "declarations there, then run it. -->"
)

INTRODUCTION = """\
Every setting comes from an environment variable; with none set, Switchyard
runs in its embedded mode (SQLite, in-process cache, eager Celery). Each
secret marked *also `NAME_FILE`* may instead be given as `NAME_FILE`, the path
of a file holding it (Kubernetes secret volumes, systemd `LoadCredential=`,
Docker secrets). *Read by* names the processes of docs/operations/index.md, "The
processes": `web`, `worker` (Celery), `beat`, `usage` (`manage.py
write_usage`) and `migrate`, and other `manage.py` commands; *all* is every
one of them.

A variable named `SWITCHYARD_*` that is not listed here is logged as a
warning when a process starts, with the closest listed name: a misspelt
setting is otherwise ignored without a word."""


def cell(text: str) -> str:
    return text.replace("|", "\\|")


def default_shown(setting: Setting) -> str:
    if setting.shown_default:
        return setting.shown_default
    value = setting.default
    if isinstance(value, Derived):
        return value.shown
    if value is None or value == "":
        return "unset"
    if value == ():
        return "empty"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float) and value.is_integer():
        return f"`{int(value)}`"
    if isinstance(value, tuple):
        return "`" + ",".join(str(item) for item in value) + "`"
    return f"`{value}`"


def kind_shown(setting: Setting) -> str:
    kind: str = setting.kind
    if setting.choices:
        kind = " or ".join(f"`{choice}`" for choice in setting.choices)
    elif kind == "list":
        kind = "list (comma-separated)"
    if setting.secret:
        kind += ", secret"
        if setting.reader == "switchyard":
            kind += " (also `NAME_FILE`)"
    return kind


def processes_shown(setting: Setting) -> str:
    return "all" if set(setting.processes) == set(ALL) else ", ".join(setting.processes)


def reference() -> str:
    """``docs/reference/settings.md``."""
    parts = ["# Settings reference", GENERATED, INTRODUCTION]
    for title, settings in SECTIONS:
        rows = [
            "| variable | type | default | read by | description |",
            "| --- | --- | --- | --- | --- |",
        ]
        rows += [
            f"| `{s.name}` | {kind_shown(s)} | {cell(default_shown(s))} | "
            f"{processes_shown(s)} | {cell(s.description)} |"
            for s in settings
        ]
        parts += [f"## {title}", "\n".join(rows)]
    return "\n\n".join(parts) + "\n"


def platform_table() -> str:
    """The table of platform/README.md, "Settings": what operators set at
    deployment, and where; secrets first."""
    placed = [s for _, settings in SECTIONS for s in settings if s.placement]
    placed.sort(key=lambda s: not s.secret)
    rows = [
        BEGIN,
        GENERATED,
        "",
        "| variable | secret | default | read by | where it's set (k8s / machine) | meaning |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    rows += [
        f"| `{s.name}` | {'yes' if s.secret else 'no'} | {cell(default_shown(s))} | "
        f"{processes_shown(s)} | {s.placement} | {cell(s.description)} |"
        for s in placed
    ]
    return "\n".join([*rows, "", END])


def with_platform_table(guide: str) -> str:
    """``guide`` (platform/README.md) with the text between the markers
    replaced by :func:`platform_table`."""
    start, end = guide.index(BEGIN), guide.index(END) + len(END)
    return guide[:start] + platform_table() + guide[end:]
