"""A chat prompt's token blocks as a vLLM backend will cache them (the
precise mode of docs/operations/routing.md).

The prompt is rendered with the model's chat template, the way vLLM renders
it (jinja2, sandboxed, ``trim_blocks`` and ``lstrip_blocks``, the
messages' text parts joined by newlines), tokenized with the model's
``tokenizer.json`` (the ``tokenizers`` package; a local folder, nothing is
downloaded) without adding special tokens (the template has them), cut
into blocks of the backend's block size, and each block keyed by
``kv_events.chain``, the first with the organisation's ``cache_salt``.
Rendering and tokenizing here cost about 0.1 ms for a short prompt and
about 1 ms per thousand tokens (docs/operations/routing.md), in a worker
thread; asking the backend's ``/tokenize`` instead would cost a round trip
to a server busy generating on every request, and the same tokenizing
there.

A template that does not render, or a folder without a tokenizer, gives
no blocks: the backend is scored as holding none of the prompt.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jinja2 import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment
from tokenizers import Tokenizer

from responses_api.backends.kv_events import ROOT, chain
from responses_api.backends.kv_subscriber import index_for
from responses_api.backends.prefix_index import PromptBlocks
from responses_api.backends.scoring import Held
from responses_api.catalogue.catalog import Route

log = logging.getLogger(__name__)

# A prompt's first blocks only (as the approximate index does), and its
# first characters: past them a backend's score is long decided.
MAX_BLOCKS = 2048
MAX_CHARS = 1_000_000


@dataclass(frozen=True, slots=True)
class ModelFiles:
    tokenizer: Tokenizer
    template: Any
    special: dict[str, str]


def _raise(message: str) -> None:
    raise TemplateError(message)


@functools.lru_cache(maxsize=16)
def model_files(folder: str) -> ModelFiles | None:
    """The tokenizer and chat template of a model folder, loaded once."""
    path = Path(folder)
    try:
        tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        config = json.loads((path / "tokenizer_config.json").read_text())
        source = config.get("chat_template")
        template_file = path / "chat_template.jinja"
        if template_file.is_file():
            source = template_file.read_text()
        if not isinstance(source, str):
            return None
        environment = ImmutableSandboxedEnvironment(
            trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True
        )
        environment.globals["raise_exception"] = _raise
        template = environment.from_string(source)
    except (OSError, ValueError, TemplateError, Exception) as error:
        log.warning("No tokenizer or chat template in %s: %s", folder, error)
        return None
    special = {
        name: value
        for name in ("bos_token", "eos_token", "unk_token", "pad_token")
        if isinstance(value := config.get(name), str)
    }
    return ModelFiles(tokenizer, template, special)


def _message(message: Mapping[str, Any]) -> dict[str, Any]:
    content = message.get("content")
    if isinstance(content, list):
        parts = [p for p in content if isinstance(p, dict) and p.get("type") == "text"]
        return {**message, "content": "\n".join(str(p.get("text", "")) for p in parts)}
    return dict(message)


def prompt_token_ids(folder: str, body: Mapping[str, Any]) -> list[int] | None:
    """The chat body's prompt as token ids, or None if it cannot be rendered."""
    files = model_files(folder)
    if files is None:
        return None
    try:
        text = files.template.render(
            messages=[_message(m) for m in body.get("messages") or () if isinstance(m, dict)],
            tools=body.get("tools") or None,
            add_generation_prompt=True,
            **files.special,
        )
    except (TemplateError, TypeError, ValueError):
        return None
    # encode_batch lets go of the GIL while it works (encode does not): the
    # web process's event loop keeps running beside a long prompt's.
    (encoding,) = files.tokenizer.encode_batch([text[:MAX_CHARS]], add_special_tokens=False)
    return list(encoding.ids)


def block_keys(token_ids: list[int], block_size: int, salt: str | None) -> list[bytes]:
    """The keys of the prompt's whole blocks, chained from the first."""
    keys: list[bytes] = []
    parent = ROOT
    count = min(len(token_ids) // block_size, MAX_BLOCKS)
    for i in range(count):
        extra = [salt] if i == 0 and salt else None
        key = chain(parent, token_ids[i * block_size : (i + 1) * block_size], extra)
        if key is None:
            break
        keys.append(key)
        parent = key
    return keys


def held_by(routes: Sequence[Route], prompt: PromptBlocks | None) -> list[Held | None]:
    """For each candidate in precise mode, the prompt's leading blocks its
    events say it holds (None for the others). The salt counts only where
    it is sent (the ``vllm`` dialect, the only one precise mode takes)."""
    held: list[Held | None] = []
    keys_of: dict[tuple[str, int, str | None], list[bytes]] = {}
    for route in routes:
        backend = route.backend
        if prompt is None or not (backend.kv_events_endpoint and backend.tokenizer_path):
            held.append(None)
            continue
        index = index_for(backend.kv_events_endpoint)
        size = index.block_size
        if not size:
            # No block reported yet: nothing held, whatever the prompt.
            held.append(Held(0, 0, 0))
            continue
        salt = prompt.salt if backend.dialect == "vllm" else None
        cached = (backend.tokenizer_path, size, salt)
        keys = keys_of.get(cached)
        if keys is None:
            token_ids = prompt_token_ids(backend.tokenizer_path, prompt.body)
            keys = keys_of[cached] = block_keys(token_ids or [], size, salt)
        held.append(Held(index.holds(keys), len(keys), size))
    return held
