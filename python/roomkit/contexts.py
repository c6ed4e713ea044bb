"""Code contexts of a room's instance: live interpreters (Python, JavaScript) that keep
their variables from one run to the next, as a notebook's kernel does.
``room.contexts.create()`` makes one; ``context.run(code)`` runs a cell in it and
answers what it printed, showed (charts as PNG, tables as HTML) and raised."""
import json
from http.client import HTTPException
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional

from ._hint_wording import sdk_message
from ._transport import read_events
from .errors import RoomkitError
from .models import Context, ContextInterrupted, ContextRunResult, DisplayResult, ExecutionError

if TYPE_CHECKING:
    from .room import Room

CONTEXTS = "/api/profile/{profile_id}/room/{room_id}/contexts"
CONTEXT = CONTEXTS + "/{context_id}"


class Contexts:
    """The code contexts of one room's instance."""

    def __init__(self, room: "Room") -> None:
        self._room = room

    def create(self, language: str = "python", *, cwd: Optional[str] = None, env: Optional[Mapping[str, str]] = None) -> "CodeContext":
        """Starts an interpreter (``python``, ``javascript`` or ``bash``) in the room's ready
        instance, in ``cwd`` (default the home) with ``env`` over the instance's."""
        body: Dict[str, Any] = {"language": language}
        if cwd is not None:
            body["cwd"] = cwd
        if env is not None:
            body["env"] = dict(env)
        answer = self._room._transport.json("POST", CONTEXTS, params=self._room._params(), body=body, idempotent=False)
        return CodeContext(self._room, Context.from_dict(answer))

    def list(self) -> List["CodeContext"]:
        """The instance's contexts, oldest first."""
        answer = self._room._transport.json("GET", CONTEXTS, params=self._room._params())
        return [CodeContext(self._room, Context.from_dict(c)) for c in answer["contexts"]]

    def get(self, context_id: str) -> "CodeContext":
        """A context by id (RoomkitError ``context_not_found`` when there is none)."""
        answer = self._room._transport.json("GET", CONTEXT, params=self._room._params(context_id=context_id))
        return CodeContext(self._room, Context.from_dict(answer))


class CodeContext:
    """One code context: run code in it, interrupt a run, restart it, delete it."""

    def __init__(self, room: "Room", context: Context) -> None:
        self.room = room
        #: What the server said of it: ``context_id``, ``language``, ``cwd``, ``created_at``.
        self.context = context
        self.context_id = context.context_id
        self.language = context.language

    def __repr__(self) -> str:
        return f"CodeContext(context_id={self.context_id!r}, language={self.language!r})"

    def _params(self) -> Dict[str, Any]:
        return self.room._params(context_id=self.context_id)

    def run(
        self,
        code: str,
        *,
        env: Optional[Mapping[str, str]] = None,
        timeout_s: Optional[int] = None,
        on_stdout: Optional[Callable[[str], None]] = None,
        on_stderr: Optional[Callable[[str], None]] = None,
        on_result: Optional[Callable[[DisplayResult], None]] = None,
        on_error: Optional[Callable[[ExecutionError], None]] = None,
    ) -> ContextRunResult:
        """Runs code like a notebook cell and answers once it ended: ``stdout``,
        ``stderr``, ``results`` (the last expression's value, display() calls, figures
        as PNG with chart data), ``error`` (the context stays usable) and the image files
        it wrote. ``env`` is for this run only; at ``timeout_s`` (default the profile's
        command_timeout_s) the code is interrupted. With a callback the run is streamed
        and each piece reaches it as it comes. Never retried: a cell is not safe to run
        twice."""
        body: Dict[str, Any] = {"code": code}
        if env is not None:
            body["env"] = dict(env)
        if timeout_s is not None:
            body["timeout_s"] = timeout_s
        if on_stdout is None and on_stderr is None and on_result is None and on_error is None:
            return ContextRunResult.from_dict(self.room._transport.json("POST", f"{CONTEXT}/run", params=self._params(), body=body, idempotent=False))
        body["stream"] = True
        response = self.room._transport.send("POST", f"{CONTEXT}/run", params=self._params(), body=body, idempotent=False, headers={"Accept": "text/event-stream"})
        request_id = response.headers.get("x-request-id")
        with response:
            try:
                for event, data in read_events(response):
                    piece = json.loads(data)
                    if event == "stdout" and on_stdout is not None:
                        on_stdout(piece["text"])
                    elif event == "stderr" and on_stderr is not None:
                        on_stderr(piece["text"])
                    elif event == "result" and on_result is not None:
                        on_result(DisplayResult.from_dict(piece))
                    elif event == "end":
                        return ContextRunResult.from_dict(piece)
                    elif event == "error" and isinstance(piece.get("error"), str):
                        # An Error body: the run could not happen at all.
                        raise RoomkitError(
                            piece["error"],
                            sdk_message(piece.get("message", data), piece.get("problem"), piece.get("hint")),
                            status=500,
                            details=piece.get("details"),
                            request_id=piece.get("request_id") or request_id,
                        )
                    elif event == "error" and on_error is not None:
                        on_error(ExecutionError.from_dict(piece))
            except (OSError, HTTPException, ValueError) as err:
                raise self._interrupted(request_id, err) from err
        raise self._interrupted(request_id, None)

    def interrupt(self) -> ContextInterrupted:
        """Interrupts the run under way (Python: KeyboardInterrupt); ``interrupted`` is False when none was running."""
        return ContextInterrupted.from_dict(self.room._transport.json("POST", f"{CONTEXT}/interrupt", params=self._params(), body={}, idempotent=False))

    def restart(self) -> "CodeContext":
        """Ends the interpreter and starts a new one: every variable is gone."""
        answer = self.room._transport.json("POST", f"{CONTEXT}/restart", params=self._params(), idempotent=False)
        self.context = Context.from_dict(answer)
        return self

    def delete(self) -> None:
        """Ends the interpreter; the context then raises RoomkitError ``context_not_found``."""
        self.room._transport.json("DELETE", CONTEXT, params=self._params())

    def _interrupted(self, request_id: Optional[str], cause: Optional[BaseException]) -> RoomkitError:
        why = f": {cause}" if cause else ""
        return RoomkitError(
            "stream_interrupted",
            f"the stream of the run ended before its result; the context ({self.context_id}) may still be running it{why}",
            request_id=request_id,
        )
