"""Incremental decoding of one string field of a JSON object being streamed.

A custom (freeform) tool is offered to chat backends as a function with one
string argument, ``{"input": "..."}``. The backend streams that
JSON in arbitrary pieces; the client expects ``response.custom_tool_call_input
.delta`` events carrying the *decoded* text as it is produced. This decoder
takes the raw argument pieces and returns the decoded text each piece adds,
holding back escapes (``\\n``, ``\\u00e9``, surrogate pairs) that are cut in two.

Pure, no I/O.
"""

from __future__ import annotations

import re

_SIMPLE_ESCAPES = {
    '"': '"',
    "\\": "\\",
    "/": "/",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
}
# The opening of the object up to the first character of the string value.
_OPENING = re.compile(r'\s*\{\s*"(?P<key>(?:[^"\\]|\\.)*)"\s*:\s*"', re.S)
_MAX_OPENING = 256


class StringFieldDecoder:
    """Decodes the value of ``key`` when it is the object's first member.

    States: ``opening`` (waiting for ``{"key": "``), ``string`` (decoding),
    ``closed`` (the closing quote was seen: :attr:`complete`), ``off`` (the
    arguments are shaped otherwise; nothing is streamed and the caller falls
    back to decoding the whole arguments at the end).
    """

    __slots__ = ("key", "state", "pending", "value", "high_surrogate")

    def __init__(self, key: str = "input") -> None:
        self.key = key
        self.state = "opening"
        self.pending = ""  # undecoded raw text
        self.value: list[str] = []
        self.high_surrogate: str | None = None

    @property
    def complete(self) -> bool:
        return self.state == "closed"

    @property
    def text(self) -> str:
        return "".join(self.value)

    def feed(self, piece: str) -> str:
        """Take the next raw piece; return the decoded text it completes."""
        if self.state in {"off", "closed"}:
            return ""
        self.pending += piece
        if self.state == "opening":
            match = _OPENING.match(self.pending)
            if match is None:
                stripped = self.pending.lstrip()
                if len(self.pending) > _MAX_OPENING or (
                    stripped and not _could_open(stripped, self.key)
                ):
                    self.state = "off"
                return ""
            if match.group("key") != self.key:
                self.state = "off"
                return ""
            self.pending = self.pending[match.end() :]
            self.state = "string"
        return self._decode()

    def _decode(self) -> str:
        out: list[str] = []
        raw = self.pending
        i = 0
        n = len(raw)
        while i < n:
            char = raw[i]
            if char == '"':
                self.state = "closed"
                i = n
                break
            if char != "\\":
                # Copy a run of plain characters at once.
                j = i
                while j < n and raw[j] not in '"\\':
                    j += 1
                self._emit(raw[i:j], out)
                i = j
                continue
            if i + 1 >= n:
                break  # a lone backslash: wait for the escaped character
            code = raw[i + 1]
            if code == "u":
                if i + 6 > n:
                    break  # \uXXXX cut short
                digits = raw[i + 2 : i + 6]
                try:
                    value = int(digits, 16)
                except ValueError:
                    self.state = "off"
                    return self._flush(out)
                self._emit_code_point(value, out)
                i += 6
                continue
            replacement = _SIMPLE_ESCAPES.get(code)
            if replacement is None:
                self.state = "off"
                return self._flush(out)
            self._emit(replacement, out)
            i += 2
        self.pending = raw[i:]
        return self._flush(out)

    def _emit(self, text: str, out: list[str]) -> None:
        if self.high_surrogate is not None and text:
            # An unpaired high surrogate: keep it as the replacement character.
            out.append("\ufffd")
            self.high_surrogate = None
        out.append(text)

    def _emit_code_point(self, value: int, out: list[str]) -> None:
        if 0xD800 <= value <= 0xDBFF:
            if self.high_surrogate is not None:
                out.append("\ufffd")
            self.high_surrogate = chr(value)
            return
        if 0xDC00 <= value <= 0xDFFF:
            if self.high_surrogate is None:
                out.append("\ufffd")
                return
            high = ord(self.high_surrogate)
            self.high_surrogate = None
            out.append(chr(0x10000 + ((high - 0xD800) << 10) + (value - 0xDC00)))
            return
        self._emit(chr(value), out)

    def _flush(self, out: list[str]) -> str:
        text = "".join(out)
        if text:
            self.value.append(text)
        return text


def _could_open(stripped: str, key: str) -> bool:
    """Whether ``stripped`` may still become ``{"key": "``."""
    if not stripped.startswith("{"):
        return False
    rest = stripped[1:].lstrip()
    if not rest:
        return True
    if not rest.startswith('"'):
        return False
    # The key so far must be a prefix of the expected key (or of its end quote).
    typed = rest[1:]
    expected = key + '"'
    return expected.startswith(typed[: len(expected)]) or typed.startswith(expected)
