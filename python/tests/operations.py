"""Every operation of the server's /openapi.json, mapped to the SDK method that calls
it, or to the reason the SDK leaves it out. test_openapi.py fails when the server has
an operation that is in neither table: a new route needs a method (and a row here).

Each row's call runs against the real server with harmless arguments (ids that exist
nowhere, a room without an instance), so an API error is an expected answer; what the
test checks is that the method sent that very operation."""
from typing import Callable, Dict, NamedTuple

from roomkit import CodeContext, Context, Roomkit

NOWHERE = "00000000-0000-4000-8000-000000000000"


class Row(NamedTuple):
    method: str
    call: Callable[[Roomkit], object]


def _room(rk: Roomkit):  # type: ignore[no-untyped-def]
    # The shared profile by name, in a room that never has an instance.
    return rk.room("py-sdk", "no-instance-here")


def _nowhere_context(rk: Roomkit) -> CodeContext:
    # A context that exists nowhere, in the room without an instance.
    return CodeContext(_room(rk), Context(context_id=NOWHERE, language="python", cwd="/home/user", created_at="2026-01-01T00:00:00Z"))


OPERATIONS: Dict[str, Row] = {
    "GET /healthz": Row("Roomkit.health", lambda rk: rk.health()),
    "GET /api/usage": Row("Roomkit.usage", lambda rk: rk.usage()),
    "GET /api/audit": Row("Roomkit.audit", lambda rk: rk.audit(limit=1)),
    "GET /vm/{instance_id}/file/{path}": Row("Roomkit.read_public", lambda rk: rk.read_public(f"/vm/{NOWHERE}/file/etc/hostname")),
    "GET /api/keys": Row("Keys.list", lambda rk: rk.keys.list()),
    "POST /api/keys": Row("Keys.create", lambda rk: rk.keys.create(env="no-such-env")),
    "DELETE /api/keys/{key_id}": Row("Keys.revoke", lambda rk: rk.keys.revoke(NOWHERE)),
    "GET /api/profiles": Row("Profiles.list", lambda rk: rk.profiles.list()),
    "POST /api/profiles": Row("Profiles.create", lambda rk: rk.profiles.create("py-sdk")),
    "GET /api/profiles/{profile_id}": Row("Profiles.get", lambda rk: rk.profiles.get(NOWHERE)),
    "PATCH /api/profiles/{profile_id}": Row("Profiles.update", lambda rk: rk.profiles.update(NOWHERE, vcpus=1)),
    "DELETE /api/profiles/{profile_id}": Row("Profiles.delete", lambda rk: rk.profiles.delete(NOWHERE)),
    "GET /api/instances": Row("Instances.list", lambda rk: rk.instances.list(limit=1)),
    "POST /api/profile/{profile_id}/room/{room_id}": Row("Room.create", lambda rk: rk.room(NOWHERE, "x").create()),
    "GET /api/profile/{profile_id}/room/{room_id}": Row("Room.get", lambda rk: _room(rk).get()),
    "DELETE /api/profile/{profile_id}/room/{room_id}": Row("Room.delete", lambda rk: _room(rk).delete()),
    "POST /api/profile/{profile_id}/room/{room_id}/pause": Row("Room.pause", lambda rk: _room(rk).pause()),
    "POST /api/profile/{profile_id}/room/{room_id}/resume": Row("Room.resume", lambda rk: _room(rk).resume()),
    "POST /api/profile/{profile_id}/room/{room_id}/keepalive": Row("Room.keep_alive", lambda rk: _room(rk).keep_alive(60)),
    "PUT /api/profile/{profile_id}/room/{room_id}/network": Row("Room.set_network", lambda rk: _room(rk).set_network("none")),
    "POST /api/profile/{profile_id}/room/{room_id}/snapshots": Row("Room.snapshot", lambda rk: _room(rk).snapshot("x")),
    "POST /api/profile/{profile_id}/room/{room_id}/fork": Row("Room.fork", lambda rk: _room(rk).fork(["no-instance-either"])),
    "GET /api/snapshots": Row("Snapshots.list", lambda rk: rk.snapshots.list(limit=1)),
    "GET /api/snapshots/{snapshot_id}": Row("Snapshots.get", lambda rk: rk.snapshots.get(NOWHERE)),
    "DELETE /api/snapshots/{snapshot_id}": Row("Snapshots.delete", lambda rk: rk.snapshots.delete(NOWHERE)),
    "POST /api/profile/{profile_id}/room/{room_id}/command": Row("Room.exec", lambda rk: _room(rk).exec("true")),
    "GET /api/profile/{profile_id}/room/{room_id}/commands": Row("Room.commands", lambda rk: _room(rk).commands()),
    "GET /api/profile/{profile_id}/room/{room_id}/commands/{command_id}": Row("CommandHandle.status", lambda rk: _room(rk).command(NOWHERE).status()),
    "POST /api/profile/{profile_id}/room/{room_id}/commands/{command_id}/kill": Row("CommandHandle.kill", lambda rk: _room(rk).command(NOWHERE).kill()),
    "POST /api/profile/{profile_id}/room/{room_id}/commands/{command_id}/revert": Row("CommandHandle.revert", lambda rk: _room(rk).command(NOWHERE).revert()),
    "POST /api/profile/{profile_id}/room/{room_id}/commands/{command_id}/stdin": Row("Room.send_stdin", lambda rk: _room(rk).send_stdin(NOWHERE, "x")),
    "GET /api/profile/{profile_id}/room/{room_id}/file/{path}": Row("Room.read_file", lambda rk: _room(rk).read_file("a")),
    "PUT /api/profile/{profile_id}/room/{room_id}/file/{path}": Row("Room.write_file", lambda rk: _room(rk).write_file("a", "x")),
    "DELETE /api/profile/{profile_id}/room/{room_id}/file/{path}": Row("Room.delete_file", lambda rk: _room(rk).delete_file("a")),
    "GET /api/profile/{profile_id}/room/{room_id}/files": Row("Room.list", lambda rk: _room(rk).list()),
    "GET /api/profile/{profile_id}/room/{room_id}/tools": Row("Tools.schema", lambda rk: _room(rk).tools.schema("openai")),
    "POST /api/profile/{profile_id}/room/{room_id}/tools/call": Row("Tools.call", lambda rk: _room(rk).tools.call("run_command", {"command": "true"})),
    "POST /api/profile/{profile_id}/room/{room_id}/ports/{port}/url": Row("Ports.url", lambda rk: _room(rk).ports.url(8000)),
    "POST /api/profile/{profile_id}/room/{room_id}/contexts": Row("Contexts.create", lambda rk: _room(rk).contexts.create()),
    "GET /api/profile/{profile_id}/room/{room_id}/contexts": Row("Contexts.list", lambda rk: _room(rk).contexts.list()),
    "GET /api/profile/{profile_id}/room/{room_id}/contexts/{context_id}": Row("Contexts.get", lambda rk: _room(rk).contexts.get(NOWHERE)),
    "DELETE /api/profile/{profile_id}/room/{room_id}/contexts/{context_id}": Row("CodeContext.delete", lambda rk: _nowhere_context(rk).delete()),
    "POST /api/profile/{profile_id}/room/{room_id}/contexts/{context_id}/restart": Row("CodeContext.restart", lambda rk: _nowhere_context(rk).restart()),
    "POST /api/profile/{profile_id}/room/{room_id}/contexts/{context_id}/interrupt": Row("CodeContext.interrupt", lambda rk: _nowhere_context(rk).interrupt()),
    "POST /api/profile/{profile_id}/room/{room_id}/contexts/{context_id}/run": Row("CodeContext.run", lambda rk: _nowhere_context(rk).run("1")),
    **{
        f"{verb} /api/profile/{{profile_id}}/room/{{room_id}}/ports/{{port}}/{{path}}": Row("Ports.request", lambda rk, verb=verb: _room(rk).ports.request(8000, "/", method=verb))
        for verb in ("GET", "POST", "PUT", "PATCH", "DELETE")
    },
}

_NO_TEMPLATES = "templates have no methods in this SDK yet; the REST API builds and serves them"

#: Operations the SDK leaves out on purpose, and why.
LEFT_OUT: Dict[str, str] = {
    "GET /api/profile/{profile_id}/room/{room_id}/terminal": "a WebSocket terminal for people at a keyboard; the standard library has no WebSocket client (use `roomkit shell` or the TypeScript SDK)",
    "POST /api/profile/{profile_id}/room/{room_id}/terminal/ticket": "a ticket only opens the WebSocket terminal, which this SDK leaves out",
    "POST /mcp": "the MCP endpoint is for MCP clients, which speak its protocol themselves",
    "GET /metrics": "Prometheus text for the operator's scraper, not an API call",
    "GET /p/{token}/{path}": "a signed URL is for browsers and whoever it is given to: Ports.url makes one, and any HTTP client fetches its path_url",
    "POST /api/templates": _NO_TEMPLATES,
    "GET /api/templates": _NO_TEMPLATES,
    "GET /api/templates/{name_or_id}": _NO_TEMPLATES,
    "GET /api/templates/{name_or_id}/builds/{build_id}/logs": _NO_TEMPLATES,
    "DELETE /api/templates/{name_or_id}": _NO_TEMPLATES,
    "GET /readyz": "readiness for load balancers; Roomkit.health says whether the service can create instances",
}
