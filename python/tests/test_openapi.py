"""The SDK against the server's own description of its API: every operation of
/openapi.json has a method (operations.py says which, and the method really sends it),
and every answer's dataclass has every field of the server's schema for it."""
import dataclasses
import json
import typing
import unittest
import urllib.request
from typing import Any, Dict, List, Set, Tuple

import roomkit
from roomkit import RoomkitError

from .operations import LEFT_OUT, OPERATIONS
from .support import client, server, shared

METHODS = ("get", "put", "post", "delete", "patch")
#: Schemas the server names (their `title`) and the dataclass for each.
TITLED = {
    "ApiKey": roomkit.ApiKey,
    "AuditEvent": roomkit.AuditEvent,
    "AuditEgress": roomkit.AuditEgress,
    "AuditFilesChanged": roomkit.AuditFilesChanged,
    "AuditPage": roomkit.AuditPage,
    "CommandRecord": roomkit.CommandRecord,
    "CommandResult": roomkit.CommandResult,
    "CommandStatus": roomkit.CommandStatus,
    "Context": roomkit.Context,
    "ContextInterrupted": roomkit.ContextInterrupted,
    "ContextRunResult": roomkit.ContextRunResult,
    "DisplayResult": roomkit.DisplayResult,
    "ExecutionError": roomkit.ExecutionError,
    "CreatedApiKey": roomkit.CreatedApiKey,
    "FileChange": roomkit.FileChange,
    "FileContent": roomkit.FileContent,
    "FileWritten": roomkit.FileWritten,
    "ForkResult": roomkit.ForkResult,
    "Instance": roomkit.Instance,
    "PortUrl": roomkit.PortUrl,
    "Profile": roomkit.Profile,
    "RevertResult": roomkit.RevertResult,
    "Snapshot": roomkit.Snapshot,
    "StdinWritten": roomkit.StdinWritten,
    "ToolCallResult": roomkit.ToolCallResult,
    "ToolEndpoint": roomkit.ToolEndpoint,
    "ToolSet": roomkit.ToolSet,
    "Usage": roomkit.Usage,
}
#: Not answers the SDK returns: the Error body becomes RoomkitError; a ticket only opens a terminal;
#: request bodies; the list of contexts, returned as CodeContexts; chart data, kept as a dict (its
#: elements' shape follows its type); templates have no methods in this SDK yet (operations.py leaves
#: their routes out).
UNTITLED_OK = {"Error", "TerminalTicket", "PortUrlRequest"} | {"ContextCreate", "ContextRunRequest", "ContextList", "ChartData"} | {
    "Template", "TemplateBuild", "TemplateBuildStarted", "TemplateImage",
}
#: Answers without a title, by the operation and status that give them.
BY_ROUTE = {
    ("get", "/api/instances", "200"): roomkit.InstancePage,
    ("get", "/api/snapshots", "200"): roomkit.SnapshotPage,
    ("get", "/api/profile/{profile_id}/room/{room_id}/commands", "200"): roomkit.CommandPage,
    ("get", "/api/profile/{profile_id}/room/{room_id}/files", "200"): roomkit.DirectoryListing,
    ("delete", "/api/profile/{profile_id}/room/{room_id}/file/{path}", "200"): roomkit.FileDeleted,
    ("get", "/healthz", "200"): roomkit.Health,
}


def openapi() -> Dict[str, Any]:
    with urllib.request.urlopen(server()[0] + "/openapi.json") as response:
        return json.load(response)  # type: ignore[no-any-return]


def operations(doc: Dict[str, Any]) -> Set[str]:
    return {f"{m.upper()} {path}" for path, item in doc["paths"].items() for m in item if m in METHODS}


class EveryOperation(unittest.TestCase):
    def test_every_operation_of_the_server_has_an_sdk_method_or_a_reason(self) -> None:
        served = operations(openapi())
        missing = sorted(served - set(OPERATIONS) - set(LEFT_OUT))
        self.assertEqual(missing, [], "operations of /openapi.json without a method in the Python SDK: add one, and its row in python/tests/operations.py")
        stale = sorted((set(OPERATIONS) | set(LEFT_OUT)) - served)
        self.assertEqual(stale, [], "rows of python/tests/operations.py for operations the server no longer has")
        self.assertFalse(set(OPERATIONS) & set(LEFT_OUT))

    def test_each_method_named_exists_and_sends_its_operation(self) -> None:
        shared()  # the profile the calls name
        classes = {name: getattr(roomkit, name) for name in ("Roomkit", "Profiles", "Instances", "Snapshots", "Keys", "Room", "CommandHandle", "Tools", "Ports", "Contexts", "CodeContext")}
        for operation, row in OPERATIONS.items():
            with self.subTest(operation=operation):
                cls, method = row.method.split(".")
                self.assertTrue(callable(getattr(classes[cls], method, None)), f"{row.method} does not exist")
                rk = client(max_retries=0)
                sent: List[Tuple[str, str]] = []
                rk._transport.observers.append(lambda m, route: sent.append((m, route)))
                try:
                    row.call(rk)
                except RoomkitError as err:
                    self.assertFalse(err.is_connection_error, str(err))
                verb, path = operation.split(" ", 1)
                self.assertIn((verb, path), sent, f"{row.method} sent {sent}")


class EveryField(unittest.TestCase):
    def test_each_dataclass_has_exactly_the_fields_of_the_server_schema(self) -> None:
        doc = openapi()
        titled: Dict[str, Dict[str, Any]] = {}
        _collect_titled(doc, titled)
        self.assertEqual(sorted(set(titled) - set(TITLED) - UNTITLED_OK), [], "schemas the server names that have no dataclass")
        checked: List[str] = []
        for title, cls in TITLED.items():
            with self.subTest(schema=title):
                _compare(self, cls, titled[title], doc, title, checked)
        for (method, path, status), cls in BY_ROUTE.items():
            with self.subTest(route=f"{method} {path}"):
                schema = doc["paths"][path][method]["responses"][status]["content"]["application/json"]["schema"]
                _compare(self, cls, schema, doc, cls.__name__, checked)
        self.assertGreater(len(checked), 25)


def _collect_titled(node: Any, found: Dict[str, Dict[str, Any]]) -> None:
    if isinstance(node, dict):
        if isinstance(node.get("title"), str) and "properties" in node:
            found.setdefault(node["title"], node)
        for value in node.values():
            _collect_titled(value, found)
    elif isinstance(node, list):
        for value in node:
            _collect_titled(value, found)


def _resolve(schema: Dict[str, Any], doc: Dict[str, Any]) -> Dict[str, Any]:
    while "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        schema = doc["components"]["schemas"][name]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [_resolve(s, doc) for s in schema[key] if s.get("type") != "null"]
            if len(options) == 1:
                return options[0]
    return schema


def _compare(test: unittest.TestCase, cls: Any, schema: Dict[str, Any], doc: Dict[str, Any], where: str, checked: List[str]) -> None:
    schema = _resolve(schema, doc)
    fields = {f.name for f in dataclasses.fields(cls)}
    test.assertEqual(fields, set(schema.get("properties", {})), f"{where}: the dataclass {cls.__name__} and the server's schema differ")
    checked.append(where)
    hints = typing.get_type_hints(cls)
    for name in fields:
        inner, prop = _unwrap(hints[name], _resolve(schema["properties"][name], doc), doc)
        if inner is not None:
            _compare(test, inner, prop, doc, f"{where}.{name}", checked)


def _unwrap(tp: Any, prop: Dict[str, Any], doc: Dict[str, Any]) -> Tuple[Any, Dict[str, Any]]:
    """The dataclass inside a field's type (through Optional, List, Dict) and the schema it matches."""
    origin = typing.get_origin(tp)
    if origin is typing.Union:
        options = [a for a in typing.get_args(tp) if a is not type(None)]
        return _unwrap(options[0], prop, doc) if len(options) == 1 else (None, prop)
    if origin in (list, List):
        return _unwrap(typing.get_args(tp)[0], _resolve(prop.get("items", {}), doc), doc)
    if origin in (dict, Dict):
        extra = prop.get("additionalProperties")
        if isinstance(extra, dict):
            return _unwrap(typing.get_args(tp)[1], _resolve(extra, doc), doc)
        values = list(prop.get("properties", {}).values())
        # An object whose every property has one shape (the quotas) is a Dict of that shape.
        return _unwrap(typing.get_args(tp)[1], _resolve(values[0], doc), doc) if values else (None, prop)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return tp, prop
    return None, prop


if __name__ == "__main__":
    unittest.main()
