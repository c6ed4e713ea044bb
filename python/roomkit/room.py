"""A room of a profile and its instance: create it, snapshot and fork it, run commands
in it, move files in and out, hand its tools to a model, delete it. The room is addressed by (profile,
room) as the API does; a profile given by name is resolved on first use."""
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, Mapping, List, Optional, Sequence, Union

from .commands import CommandHandle, CommandStream, stdin_fields
from .contexts import Contexts
from ._transport import new_idempotency_key
from .errors import RoomkitError
from .models import (
    CommandPage,
    CommandResult,
    CommandStatus,
    DirectoryListing,
    FileContent,
    FileDeleted,
    FileWritten,
    ForkResult,
    Instance,
    PortResponse,
    PortUrl,
    Snapshot,
    StdinWritten,
)
from .tools import Tools

if TYPE_CHECKING:
    from .client import Roomkit

ROOM = "/api/profile/{profile_id}/room/{room_id}"
_ENDED = ("failed", "lost", "stopping", "stopped")


class Room:
    def __init__(self, client: "Roomkit", profile: str, room_id: str) -> None:
        self._client = client
        self._transport = client._transport
        self.profile = profile
        self.room_id = room_id
        #: The room's tools for a model: ``schema(format)`` and ``call(name, arguments)``.
        self.tools = Tools(self)
        #: Programs on ports of the room's instance: ``request(port, path)`` and ``url(port)``.
        self.ports = Ports(self)
        #: Code contexts of the room's instance: ``create()``, ``list()``, ``get(id)``.
        self.contexts = Contexts(self)

    def __repr__(self) -> str:
        return f"Room(profile={self.profile!r}, room_id={self.room_id!r})"

    def profile_id(self) -> str:
        """The profile's id, resolving a name once per client."""
        return self._client.resolve_profile_id(self.profile)

    def _params(self, **more: Any) -> Dict[str, Any]:
        return {"profile_id": self.profile_id(), "room_id": self.room_id, **more}

    # The instance

    def create(
        self,
        *,
        wait: bool = True,
        on_progress: Optional[Callable[[Instance], None]] = None,
        poll_interval_s: Optional[float] = None,
        env: Optional[Dict[str, str]] = None,
        metadata: Optional[Dict[str, str]] = None,
        timeout_s: Optional[int] = None,
        snapshot_id: Optional[str] = None,
        network: Optional[Dict[str, Any]] = None,
        idempotency_key: Optional[str] = None,
    ) -> Instance:
        """Creates the room's instance, or returns the live one it already has.

        ``env`` is given to every command and terminal of the instance (its values are
        never answered back: the instance shows ``env_names``), ``metadata`` labels it
        (``instances.list(metadata=...)`` filters by them), ``timeout_s`` pauses or stops it
        that long after its start unless ``keep_alive()`` moves the deadline. A live
        instance made with other options raises RoomkitError ``instance_options_conflict``.
        ``snapshot_id`` starts it from a snapshot of the organization (``room.snapshot()``)
        instead of the profile's image; a room whose live instance started otherwise
        raises RoomkitError ``room_occupied``. ``network`` is the instance's own egress policy
        over the profile's (``{"egress": "allowlist", "allow": ["pypi.org"]}``). ``wait=False`` answers at once, still provisioning. With ``on_progress`` the SDK
        creates without waiting and polls, calling it with the instance at the start and
        whenever its state or progress text changes. Safe to retry (a room has one live
        instance, and each try carries one Idempotency-Key: ``idempotency_key``, or one of
        its own), so connection errors and 502-504 are retried. A start failure raises
        RoomkitError ``instance_start_failed``.
        """
        params = self._params()
        key = idempotency_key or new_idempotency_key()
        asked: Dict[str, Any] = {}
        if env is not None:
            asked["env"] = env
        if metadata is not None:
            asked["metadata"] = metadata
        if timeout_s is not None:
            asked["timeout_s"] = timeout_s
        if snapshot_id is not None:
            asked["snapshot_id"] = snapshot_id
        if network is not None:
            asked["network"] = network

        def send(wait_for_ready: bool) -> Instance:
            answer = self._transport.json("POST", ROOM, params=params, body={"wait": wait_for_ready, **asked}, idempotency_key=key)
            return Instance.from_dict(answer)

        if on_progress is None:
            return send(wait)
        instance = send(False)
        on_progress(instance)
        interval = self._client.poll_interval_s if poll_interval_s is None else poll_interval_s
        while wait and instance.state != "ready":
            if instance.state in _ENDED:
                raise _start_failure(instance)
            time.sleep(interval)
            following = Instance.from_dict(self._transport.json("GET", ROOM, params=params))
            changed = (following.instance_id, following.state, following.progress) != (instance.instance_id, instance.state, instance.progress)
            instance = following
            if changed:
                on_progress(instance)
        return instance

    def get(self) -> Instance:
        """The room's instance: the live one, or the last one if it failed."""
        return Instance.from_dict(self._transport.json("GET", ROOM, params=self._params()))

    def delete(self) -> Instance:
        """Stops and removes the instance; answers with its final state. Not retried."""
        return Instance.from_dict(self._transport.json("DELETE", ROOM, params=self._params()))

    def pause(self, memory: Optional[bool] = None) -> Instance:
        """Pauses the instance and answers once it is paused: its machine stops, its files
        stay and, unless ``memory=False``, its memory and running processes too
        (``pause.memory_kept`` says whether they were; established TCP connections are
        dropped either way). Any later request, or ``resume()``, brings it back. Pausing a
        paused instance answers it as it is, so this is retried like a read."""
        body = {} if memory is None else {"memory": memory}
        return Instance.from_dict(self._transport.json("POST", f"{ROOM}/pause", params=self._params(), body=body, idempotent=True))

    def keep_alive(self, timeout_s: Optional[int] = None) -> Instance:
        """Moves the instance's deadline to now + ``timeout_s`` (default: its create's) and
        counts as activity for its idle limit; the instance answers with ``expires_at``.
        Retried like a read."""
        body = {} if timeout_s is None else {"timeout_s": timeout_s}
        return Instance.from_dict(self._transport.json("POST", f"{ROOM}/keepalive", params=self._params(), body=body, idempotent=True))

    def set_network(self, egress: str, allow: Optional[List[str]] = None, deny: Optional[List[str]] = None) -> Dict[str, Any]:
        """Replaces the instance's egress policy while it runs (a paused one gets it at its
        resume); connections through the egress proxy are ended. Answers the policy now in
        force. A PUT, so retried like a read."""
        body: Dict[str, Any] = {"egress": egress}
        if allow is not None:
            body["allow"] = allow
        if deny is not None:
            body["deny"] = deny
        return dict(self._transport.json("PUT", f"{ROOM}/network", params=self._params(), body=body, idempotent=True))

    def resume(self) -> Instance:
        """Resumes a paused instance and answers once it is ready; a ready one is answered
        as it is, so this is retried like a read."""
        return Instance.from_dict(self._transport.json("POST", f"{ROOM}/resume", params=self._params(), idempotent=True))

    def snapshot(self, name: Optional[str] = None, *, memory: Optional[bool] = None, idempotency_key: Optional[str] = None) -> Snapshot:
        """Saves the instance's files, and its memory and processes unless ``memory`` is
        False (ready or paused; it stays as it was), as a snapshot the organization owns,
        and answers once it is ``ready`` (``memory_kept`` says whether memory was saved).
        It outlives the instance: ``create(snapshot_id=...)`` starts instances from it in
        any room, running its processes when it kept them, and ``client.snapshots`` lists
        and deletes them. Retried with the same Idempotency-Key (``idempotency_key``, or
        one of its own), so a retry never takes a second snapshot."""
        body: Dict[str, Any] = {} if name is None else {"name": name}
        if memory is not None:
            body["memory"] = memory
        key = idempotency_key or new_idempotency_key()
        return Snapshot.from_dict(self._transport.json("POST", f"{ROOM}/snapshots", params=self._params(), body=body, idempotency_key=key))

    def fork(
        self, rooms: Sequence[str], *, keep_snapshot: bool = False, memory: Optional[bool] = None, idempotency_key: Optional[str] = None
    ) -> ForkResult:
        """Starts a copy of the instance in each of ``rooms`` (same profile, none with a
        live instance) in one call, and answers once every copy is ready or failed: one
        instance per room in that order, a failed one with its ``failure_reason``. Each
        copy goes on running the instance's processes from its memory, at its own address,
        unless ``memory`` is False (files only); the source goes on running. A
        refusal (``room_occupied``, a quota) starts none. The snapshot the copies come from
        is deleted afterwards unless ``keep_snapshot`` (then it is the answer's
        ``snapshot``). Retried with the same Idempotency-Key (``idempotency_key``, or one
        of its own): a retry answers the first fork's result."""
        if isinstance(rooms, str):
            raise TypeError('rooms is a list of room ids, e.g. ["copy-1", "copy-2"]')
        body: Dict[str, Any] = {"rooms": list(rooms)}
        if keep_snapshot:
            body["keep_snapshot"] = True
        if memory is not None:
            body["memory"] = memory
        key = idempotency_key or new_idempotency_key()
        return ForkResult.from_dict(self._transport.json("POST", f"{ROOM}/fork", params=self._params(), body=body, idempotency_key=key))

    # Commands

    def exec(
        self,
        command: str,
        *,
        timeout_s: Optional[int] = None,
        idle_output_timeout_s: Optional[int] = None,
        cwd: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None,
        stdin: Union[str, bytes, None] = None,
        keep_undo: Optional[bool] = None,
        idempotency_key: Optional[str] = None,
    ) -> CommandResult:
        """Runs a shell command and answers when it ends. A failing command is a result
        with a non-zero exit_code, not an exception. ``idle_output_timeout_s`` ends it
        (``end_reason`` ``no_output``) once it prints nothing for that long. ``stdin`` (text or bytes) is its
        input. ``keep_undo`` keeps (True) or skips (False) its undo point for
        ``room.command(id).revert()`` (default: the profile's ``keep_undo``). Retried (a lost
        connection, 502, 503, 504) with the same Idempotency-Key on every try
        (``idempotency_key``, or one of its own), so the server runs it once."""
        body = _command_body(command, timeout_s, cwd, env, stdin, keep_undo, idle_output_timeout_s)
        key = idempotency_key or new_idempotency_key()
        return CommandResult.from_dict(self._transport.json("POST", f"{ROOM}/command", params=self._params(), body=body, idempotency_key=key))

    def exec_stream(
        self,
        command: str,
        *,
        timeout_s: Optional[int] = None,
        idle_output_timeout_s: Optional[int] = None,
        cwd: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None,
        stdin: Union[str, bytes, None] = None,
        keep_undo: Optional[bool] = None,
        kill_on_disconnect: Optional[bool] = None,
    ) -> CommandStream:
        """Runs a shell command and gives its output as it is printed: iterate over the
        returned stream for OutputChunks; then ``stream.result`` is the same
        CommandResult as ``exec`` answers (``stream.wait()`` reads to the end and returns
        it). If the connection breaks first, RoomkitError ``stream_interrupted`` carries
        the command's id: it runs on (unless ``kill_on_disconnect``), and
        ``room.command(id)`` follows it."""
        body = _command_body(command, timeout_s, cwd, env, stdin, keep_undo, idle_output_timeout_s)
        body["stream"] = True
        if kill_on_disconnect is not None:
            body["kill_on_disconnect"] = kill_on_disconnect
        template = f"{ROOM}/command"
        response = self._transport.send(
            "POST", template, params=self._params(), body=body, idempotent=False, headers={"Accept": "text/event-stream"}
        )
        return CommandStream(response)

    def exec_background(
        self,
        command: str,
        *,
        timeout_s: Optional[int] = None,
        idle_output_timeout_s: Optional[int] = None,
        cwd: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None,
        stdin: Union[str, bytes, None] = None,
        keep_undo: Optional[bool] = None,
        stdin_open: bool = False,
        idempotency_key: Optional[str] = None,
    ) -> CommandHandle:
        """Starts a command in the background and answers at once with a handle to follow
        it. No time limit applies unless ``timeout_s`` is given. ``stdin_open`` keeps its
        stdin open (after ``stdin``) for ``send_stdin`` (RoomkitError ``feature_unavailable``
        while the agent in the instance does not answer). Retried with the same
        Idempotency-Key, as ``exec`` is: it starts once."""
        body = _command_body(command, timeout_s, cwd, env, stdin, keep_undo, idle_output_timeout_s)
        body["background"] = True
        if stdin_open:
            body["stdin_open"] = True
        key = idempotency_key or new_idempotency_key()
        status = CommandStatus.from_dict(self._transport.json("POST", f"{ROOM}/command", params=self._params(), body=body, idempotency_key=key))
        return CommandHandle(self, status.command_id, status)

    def send_stdin(self, command_id: str, data: Union[str, bytes], *, close: bool = False) -> StdinWritten:
        """Writes input (text as UTF-8, or bytes) to a running command started with
        ``stdin_open``; ``close`` ends its input after. Not retried: a repeat would write it twice."""
        body: Dict[str, Any] = {}
        if isinstance(data, str):
            body["data"] = data
        else:
            fields = stdin_fields(data)
            body["data"], body["encoding"] = fields["stdin"], fields["stdin_encoding"]
        if close:
            body["close"] = True
        params = self._params(command_id=command_id)
        return StdinWritten.from_dict(self._transport.json("POST", f"{ROOM}/commands/{{command_id}}/stdin", params=params, body=body, idempotent=False))

    def close_stdin(self, command_id: str) -> StdinWritten:
        """Closes a running command's stdin: it reads end of input once it has read the rest."""
        params = self._params(command_id=command_id)
        return StdinWritten.from_dict(self._transport.json("POST", f"{ROOM}/commands/{{command_id}}/stdin", params=params, body={"close": True}, idempotent=False))

    def command(self, command_id: str) -> CommandHandle:
        """A handle on a command of this room by its id (from a result, a status or the history)."""
        return CommandHandle(self, command_id, None)

    def commands(self, *, limit: Optional[int] = None, cursor: Optional[str] = None) -> CommandPage:
        """The room's command history, newest first; pass ``next_cursor`` back as ``cursor``."""
        query = {"limit": limit, "cursor": cursor}
        return CommandPage.from_dict(self._transport.json("GET", f"{ROOM}/commands", params=self._params(), query=query))

    # Files: paths are absolute, or relative to the profile's home directory.

    def read_file(self, path: str) -> FileContent:
        """A file as JSON: text as it is, anything else base64 (``encoding`` says which;
        ``to_bytes()`` decodes either). At most the server's JSON read limit (50 MiB)."""
        return FileContent.from_dict(self._transport.json("GET", f"{ROOM}/file/{{path}}", params=self._params(path=path)))

    def read_bytes(self, path: str, *, start: Optional[int] = None, end: Optional[int] = None) -> bytes:
        """A file's bytes, of any size, through the authenticated raw read; ``start`` and
        ``end`` (inclusive byte offsets) ask for a range."""
        headers = {"Accept": "application/octet-stream"}
        if start is not None or end is not None:
            headers["Range"] = f"bytes={start or 0}-{'' if end is None else end}"
        response = self._transport.send("GET", f"{ROOM}/file/{{path}}", params=self._params(path=path), query={"raw": "1"}, headers=headers)
        with response:
            return response.read()  # type: ignore[no-any-return]

    def read_text(self, path: str, *, encoding: str = "utf-8", errors: str = "strict") -> str:
        """A file's bytes decoded as text (UTF-8 unless told otherwise)."""
        return self.read_bytes(path).decode(encoding, errors)

    def write_file(self, path: str, data: Union[str, bytes]) -> FileWritten:
        """Creates or replaces a file (and its parent directories). Text is written as UTF-8."""
        raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        return FileWritten.from_dict(self._transport.json("PUT", f"{ROOM}/file/{{path}}", params=self._params(path=path), raw_body=raw))

    def list(self, path: Optional[str] = None) -> DirectoryListing:
        """Lists a directory (default: the home directory)."""
        return DirectoryListing.from_dict(self._transport.json("GET", f"{ROOM}/files", params=self._params(), query={"path": path}))

    def delete_file(self, path: str) -> FileDeleted:
        """Deletes a file or link; directories are removed with a command."""
        return FileDeleted.from_dict(self._transport.json("DELETE", f"{ROOM}/file/{{path}}", params=self._params(path=path)))


class Ports:
    """Ports of a room's instance: a server started in it (``python3 -m http.server 8000``
    in the background) is reached with ``request(8000, "/")``, or handed to a browser as
    ``url(8000).url``."""

    def __init__(self, room: Room) -> None:
        self._room = room

    def url(self, port: int, expires_in_s: Optional[int] = None) -> PortUrl:
        """A signed URL that reaches the port without an API key until it expires
        (default 1 hour). Anyone holding it reaches the port."""
        body = {} if expires_in_s is None else {"expires_in_s": expires_in_s}
        params = self._room._params(port=str(port))
        return PortUrl.from_dict(self._room._transport.json("POST", f"{ROOM}/ports/{{port}}/url", params=params, body=body))

    def request(
        self,
        port: int,
        path: str = "/",
        *,
        method: str = "GET",
        body: Optional[bytes] = None,
        headers: Optional[Mapping[str, str]] = None,
    ) -> PortResponse:
        """Sends a request to the port with the API key and returns the program's answer
        as it is, whatever its status. The service's own refusals come as its Error
        bodies (502 ``port_not_listening``, 504 ``port_timeout``, 404 ``instance_not_found``)."""
        transport = self._room._transport
        base = transport.url(f"{ROOM}/ports/{{port}}", self._room._params(port=str(port)))
        url = base + (path if path.startswith("/") else "/" + path)
        status, answer_headers, data = transport.pass_through(method.upper(), url, f"{ROOM}/ports/{{port}}/{{path}}", body, headers)
        return PortResponse(status=status, headers=answer_headers, body=data)


def _command_body(
    command: str,
    timeout_s: Optional[int],
    cwd: Optional[str],
    env: Optional[Mapping[str, str]],
    stdin: Union[str, bytes, None],
    keep_undo: Optional[bool],
    idle_output_timeout_s: Optional[int] = None,
) -> Dict[str, Any]:
    body: Dict[str, Any] = {"command": command}
    if timeout_s is not None:
        body["timeout_s"] = timeout_s
    if idle_output_timeout_s is not None:
        body["idle_output_timeout_s"] = idle_output_timeout_s
    if cwd is not None:
        body["cwd"] = cwd
    if env is not None:
        body["env"] = dict(env)
    body.update(stdin_fields(stdin))
    if keep_undo is not None:
        body["keep_undo"] = keep_undo
    return body


def _start_failure(instance: Instance) -> RoomkitError:
    if instance.failure_reason:
        reason = instance.failure_reason
    elif instance.state == "failed":
        reason = "no reason given"
    else:
        reason = f"it was deleted while starting ({instance.state})"
    return RoomkitError(
        "instance_start_failed",
        f"instance {instance.instance_id} failed to start: {reason}",
        status=500,
        details={"instance_id": instance.instance_id, "state_history": [s.raw for s in instance.state_history]},
    )
