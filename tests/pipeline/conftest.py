# The ASGI-boundary fixtures of the consumer's tests: the rows handed to the
# usage sink, and a catalogue forgotten between tests.
from tests.api.test_consumer import _fresh_catalogue, rows  # noqa: F401
