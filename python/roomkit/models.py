"""What the API answers, as dataclasses. Field names are the API's (snake_case JSON);
tests/test_openapi.py fails when a class lacks a field that the server's schema has.
Fields the server adds later are kept in ``.raw``, the answer as it came.
Over 400 lines on purpose: the classes nest into one another (an instance holds its state
history, a command result its files), and one module keeps that tree readable in one place."""
import base64
import dataclasses
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Type, TypeVar, Union, get_args, get_origin, get_type_hints

T = TypeVar("T")


class Model:
    """Base of every answer: ``raw`` is the JSON object the class was made from."""

    @property
    def raw(self) -> Dict[str, Any]:
        return self.__dict__.get("_raw", {})

    @classmethod
    def from_dict(cls: Type[T], data: Dict[str, Any]) -> T:
        return _from_dict(cls, data)


_HINTS: Dict[type, Dict[str, Any]] = {}


def _from_dict(cls: Any, data: Dict[str, Any]) -> Any:
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = get_type_hints(cls)
    values = {f.name: _decode(hints[f.name], data.get(f.name)) for f in dataclasses.fields(cls)}
    obj = cls(**values)
    obj.__dict__["_raw"] = data
    return obj


def _decode(tp: Any, value: Any) -> Any:
    if value is None:
        return None
    origin = get_origin(tp)
    if origin is Union:
        options = [a for a in get_args(tp) if a is not type(None)]
        return _decode(options[0], value) if len(options) == 1 else value
    if origin in (list, List) and isinstance(value, list):
        (item,) = get_args(tp) or (Any,)
        return [_decode(item, v) for v in value]
    if origin in (dict, Dict) and isinstance(value, dict):
        args = get_args(tp)
        return {k: _decode(args[1] if args else Any, v) for k, v in value.items()}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp) and isinstance(value, dict):
        return _from_dict(tp, value)
    return value


# Instances

@dataclass
class StateChange(Model):
    """One step of an instance's life: the state it reached and when."""
    state: str
    at: str
    #: Why it got to this state, in words.
    reason: Optional[str]
    #: Why it got here: on stopping, stopped, failed (`deleted`, `idle`, `lifetime`, `retention`, ...),
    #: pausing and paused (`paused`, `idle`, `memory_pressure`, `resume_failed`), resuming and ready (`resumed`, `auto_resumed`, `claimed`;
    #: `memory_lost` when a resume could not restore the memory its pause kept and booted it over its files).
    reason_code: Optional[str]
    #: The API key whose request caused this step (a delete).
    key_id: Optional[str]


@dataclass
class Resources(Model):
    memory_mb: int
    vcpus: int
    disk_mb: int


@dataclass
class InstancePause(Model):
    """What a paused instance's pause kept, and when it is removed."""
    paused_at: str
    #: Whether its memory and processes come back at resume; False: only its files were kept.
    memory_kept: bool
    #: When it is removed unless resumed first (the profile's paused_retention_s); None: never.
    remove_after: Optional[str]


@dataclass
class Instance(Model):
    """An isolated machine in a room of a profile."""
    instance_id: str
    profile_id: str
    room_id: str
    #: active, network_allocated, ftap_created, image_generated, vm_started, vm_booted, ready,
    #: pausing, paused, resuming, stopping, stopped, failed
    state: str
    state_history: List[StateChange]
    failure_reason: Optional[str]
    #: What provisioning is doing when a step takes long, e.g. building the image.
    progress: Optional[str]
    runtime: str
    resources: Resources
    #: While it is paused (or resuming); None otherwise.
    pause: Optional[InstancePause]
    claimed_at: Optional[str]
    #: The names of the variables its create set (``env``); their values are never answered.
    env_names: List[str]
    #: Its labels (its create's ``metadata``).
    metadata: Dict[str, str]
    #: Its create's ``timeout_s``; None when it has none.
    timeout_s: Optional[int]
    #: When its deadline passes (``timeout_s``, moved by ``keep_alive()``); None when it has none.
    expires_at: Optional[str]
    #: The snapshot it started from (``create(snapshot_id=...)`` or a fork); None: its profile's image.
    snapshot_id: Optional[str]
    created_at: str
    updated_at: str


@dataclass
class InstancePage(Model):
    instances: List[Instance]
    #: Pass back as ``cursor`` for the next page; None on the last.
    next_cursor: Optional[str]


# Snapshots

@dataclass
class Snapshot(Model):
    """An instance's files saved under an id the organization owns; it outlives the instance."""
    snapshot_id: str
    #: The name given when it was taken; None when none was.
    name: Optional[str]
    #: ``creating`` while its files are copied, then ``ready``.
    state: str
    #: The instance it was taken of, and that instance's profile and room.
    instance_id: str
    profile_id: str
    room_id: str
    #: The image its files sit on; an instance started from it runs on the same image.
    image: str
    #: Size of its writable layer: the disk size of an instance started from it.
    disk_mb: int
    #: Bytes of host disk it holds (the image is shared, not copied).
    disk_bytes: int
    #: Whether its memory and processes were saved too; False: its files only.
    memory_kept: bool
    created_at: str


@dataclass
class SnapshotPage(Model):
    snapshots: List[Snapshot]
    #: Pass back as ``cursor`` for the next page; None on the last.
    next_cursor: Optional[str]


@dataclass
class ForkResult(Model):
    """What a fork started: one instance per room asked, in that order (``ready``, or
    ``failed`` with its ``failure_reason``), and the snapshot they came from when kept."""
    instances: List[Instance]
    snapshot: Optional[Snapshot]


# Profiles and keys

@dataclass
class ProfileNetwork(Model):
    #: `internet`, `allowlist` or `none`.
    egress: str
    #: With `allowlist`: domains (`example.com`, `*.example.com`) and IPv4 ranges it may reach.
    allow: List[str]
    #: With `allowlist`: entries it never reaches, even when `allow` names them.
    deny: List[str]


@dataclass
class WarmPoolInstances(Model):
    ready: int
    starting: int


@dataclass
class Profile(Model):
    """A template of instances: image, packages, resources, user, limits, network."""
    profile_id: str
    name: str
    image: str
    packages: List[str]
    memory_mb: int
    vcpus: float
    disk_mb: int
    user: str
    home: str
    env: Dict[str, str]
    command_timeout_s: int
    #: A command's silence limit when it gives none, seconds; 0 for none.
    command_idle_output_timeout_s: int
    idle_timeout_s: int
    #: What an idle instance becomes: `pause` (files kept, resumed by the next request) or `stop`.
    idle_action: str
    #: How long a paused instance is kept before it is removed, seconds from its pause.
    paused_retention_s: int
    max_lifetime_s: int
    network: ProfileNetwork
    settings: Dict[str, Any]
    #: What the unauthenticated raw endpoint serves: `all`, `changed` or `off`.
    raw_files: str
    warm_pool: int
    #: Keep an undo point before each command, for ``CommandHandle.revert``.
    keep_undo: bool
    warm_pool_instances: WarmPoolInstances
    created_at: str
    updated_at: str


@dataclass
class ApiKey(Model):
    key_id: str
    name: Optional[str]
    #: The first characters of the key, to recognise it.
    prefix: str
    #: `live` or `test`.
    env: str
    created_at: str
    last_used_at: Optional[str]


@dataclass
class CreatedApiKey(Model):
    key_id: str
    name: Optional[str]
    prefix: str
    env: str
    created_at: str
    last_used_at: Optional[str]
    #: The key itself, shown only in this answer: store it now.
    api_key: str


# Commands

@dataclass
class FileChange(Model):
    """A regular file a command created, modified or deleted."""
    #: Absolute path in the instance (percent-escaped when ``path_encoding`` says so).
    path: str
    #: `created`, `modified` or `deleted`.
    status: str
    size: Optional[int]
    mime_type: Optional[str]
    #: Relative URL of the file's bytes, no key needed (see ``Roomkit.read_public``).
    public_url: Optional[str]
    path_encoding: Optional[str]


@dataclass
class CommandOutcome(Model):
    """The ``result`` of a CommandResult."""
    #: stdout and stderr interleaved as produced; the middle is cut beyond the output limit.
    output: str
    #: 128+n when killed by signal n; 124 when the time limit killed it.
    exit_code: int
    files_changed: List[FileChange]
    timed_out: bool
    output_truncated: bool
    output_bytes: int
    #: None from a runtime that cannot keep stdout and stderr apart.
    stdout: Optional[str]
    stderr: Optional[str]
    stdout_bytes: Optional[int]
    stderr_bytes: Optional[int]
    stdout_truncated: Optional[bool]
    stderr_truncated: Optional[bool]
    files_changed_total: int
    files_changed_truncated: bool
    files_changed_method: Optional[str]
    #: exited, signal, time_limit, no_output, killed, out_of_memory, disk_full, instance_stopped, service_stopped, error
    end_reason: str


@dataclass
class CommandResult(Model):
    """What a command that was waited for did. A failing command is a result, not an exception."""
    instance_id: str
    command: str
    #: `success` when exit_code is 0, else `error`.
    status: str
    result: CommandOutcome
    command_id: str
    started_at: str
    duration_ms: int

    @property
    def exit_code(self) -> int:
        return self.result.exit_code

    @property
    def output(self) -> str:
        return self.result.output


@dataclass
class CommandStatus(Model):
    """A command's state and its output from an offset (background commands, kill, history)."""
    command_id: str
    instance_id: str
    command: str
    #: running, exited, timed_out, killed, interrupted, error
    state: str
    background: bool
    exit_code: Optional[int]
    started_at: str
    finished_at: Optional[str]
    duration_ms: Optional[int]
    end_reason: Optional[str]
    #: Output from output_offset to next_offset (stdout and stderr interleaved).
    output: str
    output_offset: int
    #: Ask for this offset next to get only newer output.
    next_offset: int
    output_bytes: int
    output_available: bool
    stdout: Optional[str]
    stderr: Optional[str]
    stdout_bytes: Optional[int]
    stderr_bytes: Optional[int]
    stdout_truncated: Optional[bool]
    stderr_truncated: Optional[bool]
    stdin_open: bool
    timed_out: Optional[bool]
    files_changed: Optional[List[FileChange]]
    files_changed_total: Optional[int]
    files_changed_truncated: Optional[bool]
    #: Once it has ended, while kept: its CommandResult, the same shape ``exec`` answers with.
    result: Optional[CommandResult]

    @property
    def running(self) -> bool:
        return self.state == "running"


@dataclass
class CommandRecord(Model):
    """A command in a room's history."""
    command_id: str
    instance_id: str
    command: str
    state: str
    exit_code: Optional[int]
    output_bytes: Optional[int]
    #: How many files it changed (None while it runs).
    files_changed_total: Optional[int]
    started_at: str
    finished_at: Optional[str]
    duration_ms: Optional[int]
    end_reason: Optional[str]


@dataclass
class CommandPage(Model):
    commands: List[CommandRecord]
    next_cursor: Optional[str]


@dataclass
class CommandStarted(Model):
    command_id: str
    instance_id: str
    started_at: str


@dataclass
class OutputChunk(Model):
    """A piece of a streamed command's output."""
    data: str
    #: Byte offset of ``data`` in the command's whole output.
    offset: int
    #: `stdout`, `stderr`, or `output` when the instance cannot tell them apart.
    stream: Optional[str]


@dataclass
class RevertResult(Model):
    """What a revert of one command put back."""
    #: The command whose changes were put back.
    command_id: str
    instance_id: str
    #: The files the revert created, modified or deleted, as a command's files_changed.
    files_changed: List[FileChange]
    files_changed_total: int
    files_changed_truncated: bool
    files_changed_method: Optional[str]
    #: Whether it was forced over later commands that changed the same files.
    forced: bool
    duration_ms: int


@dataclass
class StdinWritten(Model):
    command_id: str
    #: Bytes of this request's data written.
    bytes: int
    #: Bytes written to the command's stdin so far.
    total_bytes: int
    #: Whether its stdin is closed now.
    closed: bool


# Ports

@dataclass
class PortUrl(Model):
    """A signed URL of a port of an instance (``room.ports.url``)."""

    #: The URL to open: ``host_url`` when the server has a preview domain, else ``path_url``.
    url: str
    #: ``{base}/p/{token}/``: works on any host.
    path_url: str
    instance_id: str
    port: int
    expires_at: str
    #: ``{port}-{instance_id}.{domain}`` with the token once in the query; None without a preview domain.
    host_url: Optional[str] = None


@dataclass
class PortResponse:
    """A program's answer through ``room.ports.request``, as it came (any status)."""

    status: int
    headers: Dict[str, str]
    body: bytes

    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")


# Files

@dataclass
class FileContent(Model):
    file_path: str
    #: Text when ``encoding`` is `utf-8`, else base64.
    content: str
    instance_id: str
    encoding: str
    size: int
    mime_type: str
    path_encoding: Optional[str]

    def to_bytes(self) -> bytes:
        """The file's bytes, whichever encoding the server chose."""
        if self.encoding == "base64":
            return base64.b64decode(self.content)
        return self.content.encode("utf-8")


@dataclass
class FileWritten(Model):
    file_path: str
    instance_id: str
    #: `created` or `modified`.
    status: str
    size: int
    path_encoding: Optional[str]


@dataclass
class FileDeleted(Model):
    file_path: str
    instance_id: str
    status: str
    path_encoding: Optional[str]


@dataclass
class DirectoryEntry(Model):
    name: str
    #: `file`, `directory`, `symlink` or `other`.
    type: str
    size: int
    #: Permission bits, octal.
    mode: str
    mtime: str
    name_encoding: Optional[str]


@dataclass
class DirectoryListing(Model):
    path: str
    instance_id: str
    entries: List[DirectoryEntry]
    #: True when the directory had more entries than a listing holds.
    truncated: bool
    path_encoding: Optional[str]


# Tools

@dataclass
class ToolEndpoint(Model):
    method: str
    path: str
    query: Optional[List[str]]
    body: Optional[List[str]]


@dataclass
class ToolSet(Model):
    """A room's tools in one format, ready to hand to a model's API as ``tools``."""
    #: `roomkit`, `openai`, `anthropic` or `mcp`.
    format: str
    profile_id: str
    room_id: str
    call: Dict[str, str]
    tools: List[Dict[str, Any]]
    endpoints: Dict[str, ToolEndpoint]


@dataclass
class ToolCallResult(Model):
    """A tool's result worded for the model: hand ``content`` (or ``text``) and ``is_error`` back."""
    name: str
    #: `{"type": "text", "text"}` and `{"type": "image", "data", "mime_type"}` blocks, in order.
    content: List[Dict[str, Any]]
    is_error: bool
    #: The JSON the tool's endpoint answers (the Error body when is_error comes from an error).
    structured_content: Any

    @property
    def text(self) -> str:
        """The text blocks joined: what most model APIs take as a tool result's content."""
        return "\n".join(block["text"] for block in self.content if block.get("type") == "text")


# The organization and the service

@dataclass
class Quota(Model):
    limit: int
    used: int
    #: `default` or `organization`.
    source: str


@dataclass
class Usage(Model):
    organization_id: str
    #: instances, memory_mb, vcpus, disk_mb, concurrent_commands, commands_per_minute, snapshots
    quotas: Dict[str, Quota]
    #: Host memory its running instances use now, measured (not a quota); None where no runtime runs.
    memory_in_use_mb: Optional[int] = None


@dataclass
class Health(Model):
    status: str
    version: str
    runtime: Dict[str, Any]


@dataclass
class AuditFilesChanged(Model):
    total: int
    created: Optional[int]
    modified: Optional[int]
    deleted: Optional[int]


@dataclass
class AuditEgress(Model):
    """What an egress decision was about (``egress.dns``, ``egress.connect``)."""

    name: Optional[str]
    address: Optional[str]
    port: Optional[int]
    #: The entry that decided (``allow example.com``), or why (``default``, ``ip_literal``, ...).
    rule: str
    #: How many such decisions the record stands for.
    count: int


@dataclass
class AuditEvent(Model):
    event_id: str
    at: str
    duration_ms: int
    request_id: str
    key_id: str
    client_address: str
    #: `api`, `tools`, `mcp`, `e2b` or `egress`.
    via: str
    method: str
    route: str
    action: str
    tool: Optional[str]
    profile_id: Optional[str]
    room_id: Optional[str]
    instance_id: Optional[str]
    command_id: Optional[str]
    command: Optional[str]
    exit_code: Optional[int]
    #: Why the command ended (``no_output``, ``time_limit``, …), when the request waited for it.
    end_reason: Optional[str]
    files_changed: Optional[AuditFilesChanged]
    file_path: Optional[str]
    signal: Optional[str]
    target_key_id: Optional[str]
    status: int
    decision: str
    error: Optional[str]
    egress: Optional[AuditEgress]


@dataclass
class AuditPage(Model):
    events: List[AuditEvent]
    next_cursor: Optional[str]


# Code contexts

@dataclass
class Context(Model):
    context_id: str
    #: ``python``, ``javascript`` or ``bash``.
    language: str
    #: Its working directory (absolute).
    cwd: str
    created_at: str


@dataclass
class ContextInterrupted(Model):
    context_id: str
    #: False when no run was running.
    interrupted: bool


@dataclass
class DisplayResult(Model):
    """One thing a run showed: its last expression's value (``is_main_result``), a
    ``display()`` call or a figure, in every form it has (``png`` and ``jpeg`` base64)."""
    is_main_result: bool
    text: Optional[str] = None
    html: Optional[str] = None
    markdown: Optional[str] = None
    svg: Optional[str] = None
    png: Optional[str] = None
    jpeg: Optional[str] = None
    latex: Optional[str] = None
    json: Any = None
    javascript: Optional[str] = None
    #: A matplotlib figure's data: ``type``, ``title``, ``x_label``, ``y_label``, ``x_unit``, ``y_unit``, scales and ticks, ``elements`` (their shape follows the type; the API reference has them).
    chart: Optional[Dict[str, Any]] = None
    #: Where the run wrote its image in the instance (also in the run's ``files_changed``).
    path: Optional[str] = None

    def image(self) -> Optional[bytes]:
        """The PNG or JPEG bytes, if it is an image."""
        data = self.png if self.png is not None else self.jpeg
        return None if data is None else base64.b64decode(data)


@dataclass
class ExecutionError(Model):
    #: The exception's class, e.g. ``ZeroDivisionError``; ``KeyboardInterrupt`` for an interrupted run.
    name: str
    value: str
    traceback: str


@dataclass
class ContextRunResult(Model):
    execution_count: int
    stdout: str
    stderr: str
    results: List[DisplayResult]
    #: The exception the code ended with; None when it ran through.
    error: Optional[ExecutionError]
    timed_out: bool
    interrupted: bool
    #: The interpreter was started again during the run: the context's state is lost.
    restarted: bool
    files_changed: List[FileChange]
    duration_ms: int

    @property
    def text(self) -> Optional[str]:
        """The text of the main result (the last expression's value), if any."""
        return next((r.text for r in self.results if r.is_main_result), None)
