"""Variables named ``SWITCHYARD_*`` that Switchyard's processes do not read:
declared so that the reference lists them and start-up does not take them
for misspellings."""

from __future__ import annotations

from config.declared.spec import Setting

SYSTEMD = (
    Setting(
        "SWITCHYARD_WEB_BIND",
        "str",
        "127.0.0.1",
        "The address `switchyard-web@.service` listens on: the host's private address when "
        "nginx runs on another machine.",
        ("systemd unit switchyard-web@",),
        reader="systemd",
        placement="env file (machines)",
    ),
)

CLIENTS = (
    Setting(
        "SWITCHYARD_API_KEY",
        "str",
        None,
        "The API key Codex sends, in the files `manage.py codex_config` and the console "
        "generate; set on the machine that runs Codex, never in Switchyard's environment.",
        ("Codex",),
        secret=True,
        reader="client",
    ),
)

TESTS = (
    Setting(
        "SWITCHYARD_CACHE_DIR",
        "str",
        None,
        "Where the install scripts put llama-server, vLLM and Codex, and where the tests look "
        "for them.",
        ("tests", "scripts/"),
        reader="tests",
        shown_default="`~/.cache/switchyard`",
    ),
    Setting(
        "SWITCHYARD_CODEX_BIN",
        "str",
        None,
        "A Codex binary for the end-to-end tests, instead of the one in the cache.",
        ("tests",),
        reader="tests",
    ),
    Setting(
        "SWITCHYARD_TEST_MODEL",
        "str",
        None,
        "The GGUF model the llama.cpp tests serve.",
        ("tests",),
        reader="tests",
        shown_default="`shared/models/stories260K.gguf`",
    ),
    Setting(
        "SWITCHYARD_TEST_VLLM_MODEL",
        "str",
        None,
        "The model the vLLM tests serve.",
        ("tests",),
        reader="tests",
        shown_default="`shared/models/stories260K-hf`",
    ),
)
