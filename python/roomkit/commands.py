"""Following a command: a background command (or any command by id) through its
handle, and a streamed command as an iterator of its output."""
import base64
import json
import time
from http.client import HTTPException, HTTPResponse
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, Optional, Union

from ._hint_wording import sdk_message
from ._transport import read_events
from .errors import RoomkitError
from .models import CommandResult, CommandStarted, CommandStatus, OutputChunk, RevertResult, StdinWritten

if TYPE_CHECKING:
    from .room import Room

COMMAND = "/api/profile/{profile_id}/room/{room_id}/commands/{command_id}"


def stdin_fields(stdin: Union[str, bytes, None]) -> Dict[str, str]:
    """The request body's stdin fields for input given as text or bytes."""
    if stdin is None:
        return {}
    if isinstance(stdin, str):
        return {"stdin": stdin}
    return {"stdin": base64.b64encode(bytes(stdin)).decode("ascii"), "stdin_encoding": "base64"}


class CommandHandle:
    """A command started in the background, or any command of the room by its id."""

    def __init__(self, room: "Room", command_id: str, last: Optional[CommandStatus]) -> None:
        self.room = room
        self.command_id = command_id
        #: The status this handle last saw, if any.
        self.last = last

    def __repr__(self) -> str:
        return f"CommandHandle(command_id={self.command_id!r}, state={self.last.state if self.last else None!r})"

    def status(self, offset: int = 0) -> CommandStatus:
        """The command's state and its output from ``offset`` (bytes)."""
        params = self.room._params(command_id=self.command_id)
        self.last = CommandStatus.from_dict(self.room._transport.json("GET", COMMAND, params=params, query={"offset": offset}))
        return self.last

    def wait(
        self,
        *,
        on_output: Optional[Callable[[str, int], None]] = None,
        poll_interval_s: float = 0.5,
        offset: int = 0,
        timeout_s: Optional[float] = None,
    ) -> CommandResult:
        """Polls until the command ends, passing new output and its byte offset to
        ``on_output``, and answers with its CommandResult: the same shape ``exec``
        answers with (``exit_code`` and ``output`` read as before). Raises RoomkitError
        ``command_output_expired`` when the server no longer keeps the outcome (15
        minutes after the end, or a restart); ``wait_status()`` answers the final status
        then. ``timeout_s`` raises RoomkitError ``timeout`` when the command still runs
        after that long (it runs on)."""
        status = self.wait_status(on_output=on_output, poll_interval_s=poll_interval_s, offset=offset, timeout_s=timeout_s)
        if status.result is not None:
            return status.result
        raise RoomkitError(
            "command_output_expired",
            f"command {self.command_id} ended ({status.state}) but the server no longer keeps its result; its record is in room.commands()",
            status=410,
            command_id=self.command_id,
        )

    def wait_status(
        self,
        *,
        on_output: Optional[Callable[[str, int], None]] = None,
        poll_interval_s: float = 0.5,
        offset: int = 0,
        timeout_s: Optional[float] = None,
    ) -> CommandStatus:
        """Polls until the command ends, passing new output and its byte offset to
        ``on_output``, and answers with the final status, its ``output`` all of the
        output from ``offset`` that the server keeps. Output it no longer keeps is
        skipped (the offset jumps). ``timeout_s`` raises RoomkitError ``timeout`` when the
        command still runs after that long (it runs on)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        first = offset
        while True:
            status = self.status(offset)
            if status.output and on_output is not None:
                on_output(status.output, status.output_offset)
            if status.state != "running":
                # The last poll gave only the newest output: the final answer has it all.
                return status if offset == first else self.status(first)
            offset = status.next_offset
            if deadline is not None and time.monotonic() >= deadline:
                raise RoomkitError("timeout", f"command {self.command_id} still runs after {timeout_s} s", command_id=self.command_id)
            time.sleep(poll_interval_s)

    def kill(self, signal: str = "KILL") -> CommandStatus:
        """Sends a signal (KILL, TERM, INT or HUP) to every process of the command; KILL answers once it ended."""
        params = self.room._params(command_id=self.command_id)
        answer = self.room._transport.json("POST", f"{COMMAND}/kill", params=params, body={"signal": signal}, idempotent=False)
        self.last = CommandStatus.from_dict(answer)
        return self.last

    def revert(self, *, force: bool = False) -> RevertResult:
        """Puts back every file the command created, modified or deleted as it was before
        it (a command run with keep_undo), and answers with the files the revert changed.
        ``force`` reverts even when later commands changed some of the same files
        (RoomkitError ``revert_conflict`` otherwise, its ``details["files"]`` naming them).
        Not retried: a command is reverted once, so a repeat would answer ``no_undo_point``."""
        params = self.room._params(command_id=self.command_id)
        body = {"force": True} if force else {}
        return RevertResult.from_dict(self.room._transport.json("POST", f"{COMMAND}/revert", params=params, body=body, idempotent=False))

    def send_stdin(self, data: Union[str, bytes], *, close: bool = False) -> StdinWritten:
        """Writes input to the command's stdin (it was started with ``stdin_open``); ``close`` ends it after."""
        return self.room.send_stdin(self.command_id, data, close=close)

    def close_stdin(self) -> StdinWritten:
        """Closes the command's stdin."""
        return self.room.close_stdin(self.command_id)


class CommandStream:
    """A command's output as it is printed. Iterate for OutputChunks; once the iteration
    ends, ``result`` is the CommandResult. Use it in a ``with`` block, or call
    ``close()``, to let go of the connection early."""

    def __init__(self, response: HTTPResponse) -> None:
        self._response = response
        self._url = response.geturl()
        self._request_id = response.headers.get("x-request-id")
        self._events = read_events(response)
        #: The ``started`` event: the command's id, instance and start time.
        self.started: Optional[CommandStarted] = None
        #: The CommandResult, once the stream reached it.
        self.result: Optional[CommandResult] = None
        content_type = response.headers.get("content-type") or ""
        if not content_type.startswith("text/event-stream"):
            response.close()
            raise RoomkitError(
                "unexpected_response",
                f"POST {self._url} answered {content_type or 'no content type'} instead of an event stream; the server may be older than this SDK",
                status=response.status,
                request_id=self._request_id,
            )

    @property
    def command_id(self) -> Optional[str]:
        return self.started.command_id if self.started else None

    def __iter__(self) -> Iterator[OutputChunk]:
        try:
            for event, data in self._events:
                if event == "started":
                    self.started = CommandStarted.from_dict(json.loads(data))
                elif event == "output":
                    piece: Dict[str, Any] = json.loads(data)
                    piece.setdefault("stream", "output")
                    yield OutputChunk.from_dict(piece)
                elif event == "result":
                    self.result = CommandResult.from_dict(json.loads(data))
                    self.close()
                    return
                elif event == "error":
                    error = json.loads(data)
                    self.close()
                    raise RoomkitError(
                        error.get("error", "internal_error"),
                        sdk_message(error.get("message", data), error.get("problem"), error.get("hint")),
                        status=500,
                        details=error.get("details"),
                        request_id=error.get("request_id") or self._request_id,
                        command_id=self.command_id,
                        problem=error.get("problem") if isinstance(error.get("problem"), str) else None,
                        hint=error.get("hint") if isinstance(error.get("hint"), dict) else None,
                    )
        except (OSError, HTTPException, ValueError) as err:
            self.close()
            raise self._interrupted(err) from err
        self.close()
        if self.result is None:
            raise self._interrupted(None)

    def wait(self, on_output: Optional[Callable[[OutputChunk], None]] = None) -> CommandResult:
        """Reads the rest of the stream (passing each chunk to ``on_output``) and returns the result."""
        if self.result is None:
            for chunk in self:
                if on_output is not None:
                    on_output(chunk)
        assert self.result is not None
        return self.result

    def close(self) -> None:
        self._response.close()

    def __enter__(self) -> "CommandStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _interrupted(self, cause: Optional[BaseException]) -> RoomkitError:
        running = f"; the command ({self.command_id}) may still be running" if self.command_id else ""
        why = f": {cause}" if cause else ""
        return RoomkitError(
            "stream_interrupted",
            f"the stream of the command ended before its result{running}{why}",
            request_id=self._request_id,
            command_id=self.command_id,
        )
