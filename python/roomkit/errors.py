"""The one exception the SDK raises: an error answer of the server, or no usable answer."""
from typing import Any, Dict, Optional

#: Codes of failures where no usable answer came (``status`` is None for them).
CONNECTION_CODES = frozenset({"connection_failed", "timeout", "stream_interrupted"})


class RoomkitError(Exception):
    """A call failed: branch on ``code``, show ``message`` to people.

    ``code`` is the API's stable error code (the Error body's ``error``, e.g.
    ``instance_not_found``), or, when no answer came at all, ``connection_failed``,
    ``timeout`` or ``stream_interrupted`` (then ``status`` is None). ``request_id`` is
    the request's X-Request-Id, which the server's log carries too: quote it when
    reporting a problem.
    """

    def __init__(
        self,
        code: str,
        message: str,
        status: Optional[int] = None,
        details: Optional[Dict[str, Any]] = None,
        request_id: Optional[str] = None,
        command_id: Optional[str] = None,
        problem: Optional[str] = None,
        hint: Optional[Dict[str, Any]] = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        #: The HTTP status; 500 for an ``error`` event that ends a streamed command.
        self.status = status
        #: Structured context some codes carry, e.g. ``errors`` for ``validation_error``.
        self.details = details
        self.request_id = request_id
        #: For ``stream_interrupted``: the command's id, to follow it with ``room.command(id)``.
        self.command_id = command_id
        #: With a hint: what went wrong, without what to do about it.
        self.problem = problem
        #: What to do next as data (the server's hint ``code`` and the values it names), when the server says.
        self.hint = hint

    @property
    def is_connection_error(self) -> bool:
        """True when the server gave no usable answer (down, unreachable, too slow, stream broken)."""
        return self.code in CONNECTION_CODES

    def __str__(self) -> str:
        where = f" (request {self.request_id})" if self.request_id else ""
        return f"{self.code}: {self.message}{where}"

    def __repr__(self) -> str:
        return f"RoomkitError(code={self.code!r}, status={self.status!r}, message={self.message!r}, request_id={self.request_id!r})"
