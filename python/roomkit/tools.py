"""A room's tools for a model: the schema to give the model's API, and ``call`` to run
the tool calls the model makes."""
from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional, Union

from .models import ToolCallResult, ToolSet

if TYPE_CHECKING:
    from .room import Room

TOOLS = "/api/profile/{profile_id}/room/{room_id}/tools"


class Tools:
    def __init__(self, room: "Room") -> None:
        self._room = room

    def schema(self, format: str = "roomkit") -> ToolSet:
        """The room's tools in ``format``: ``openai`` (Chat Completions ``tools``),
        ``anthropic`` (Messages API ``tools``), ``mcp`` (MCP Tool objects) or ``roomkit``
        (everything, with the endpoint each tool maps to). ``.tools`` goes to the model as it is."""
        answer = self._room._transport.json("GET", TOOLS, params=self._room._params(), query={"format": format})
        return ToolSet.from_dict(answer)

    def call(self, name: str, arguments: Union[Mapping[str, Any], str, None] = None, *, call_id: Optional[str] = None) -> ToolCallResult:
        """Runs a tool the way the model asked for it: ``arguments`` as an object, or as
        the JSON text OpenAI's tool calls carry. A failing command or a missing file is a
        result with ``is_error`` set, for the model to act on; an unknown tool or
        arguments that do not fit its schema raise RoomkitError (``unknown_tool``,
        ``invalid_arguments``). With ``call_id`` (the id the model gave the call) the
        server runs it once per id, so it is retried on connection errors and 502-504;
        without, it is not retried: a tool may not be safe to run twice."""
        body: Dict[str, Any] = {"name": name, "arguments": {} if arguments is None else arguments if isinstance(arguments, str) else dict(arguments)}
        if call_id is not None:
            body["call_id"] = call_id
        answer = self._room._transport.json("POST", f"{TOOLS}/call", params=self._room._params(), body=body, idempotent=call_id is not None)
        return ToolCallResult.from_dict(answer)


