"""What the retrieval functions raise for the API to answer: a parameter
the caller got wrong (400 naming it), an object the caller's
organisation does not have (404, the same for another organisation's),
and a file that cannot be read (its ``last_error``)."""

from __future__ import annotations

from django.conf import settings


class InvalidParameter(ValueError):
    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


class NotFound(LookupError):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ParseError(Exception):
    """A file whose text cannot be had: ``code`` is OpenAI's
    ``last_error.code`` (``invalid_file`` or ``unsupported_file``)."""

    def __init__(self, message: str, code: str = "invalid_file") -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def check_size(chars: int) -> None:
    limit = settings.SWITCHYARD_RETRIEVAL_MAX_TEXT_CHARS
    if chars > limit:
        raise ParseError(f"The file's text is longer than the {limit:,} characters allowed.")
