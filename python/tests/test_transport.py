"""The transport without a roomkit server: the retry policy against a local server that
answers what a test tells it, connection failures, error bodies, and the event-stream parser."""
import io
import json
import socket
import threading
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import List, Optional

from roomkit import Roomkit, RoomkitError
from roomkit._transport import read_events

PROFILE_ID = "11111111-1111-4111-8111-111111111111"


class Flaky:
    """A server that answers the given statuses in turn (the last from then on), recording requests."""

    def __init__(self, statuses: List[int], code: str = "shutting_down", body: str = "") -> None:
        self.statuses, self.code, self.body = statuses, code, body
        self.requests: List[str] = []
        self.keys: List[Optional[str]] = []
        flaky = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def handle_any(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                self.rfile.read(length)
                flaky.requests.append(f"{self.command} {self.path}")
                flaky.keys.append(self.headers.get("idempotency-key"))
                status = flaky.statuses[min(len(flaky.requests) - 1, len(flaky.statuses) - 1)]
                if flaky.body:
                    payload = flaky.body.encode()
                elif status >= 400:
                    payload = json.dumps({"error": flaky.code, "message": "try again"}).encode()
                else:
                    payload = json.dumps(_plausible()).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("x-request-id", f"req-{len(flaky.requests)}")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = handle_any

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.client = Roomkit(url, "rk_test_x", max_retries=3, retry_delay_s=0.005)
        self.room = self.client.room(PROFILE_ID, "r")

    def __enter__(self) -> "Flaky":
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def _plausible() -> dict:
    return {
        "profiles": [], "instance_id": "i", "profile_id": PROFILE_ID, "room_id": "r", "state": "ready",
        "state_history": [], "resources": {"memory_mb": 1, "vcpus": 1, "disk_mb": 1},
        "file_path": "/f", "status": "created", "size": 1,
    }


class Retries(unittest.TestCase):
    def test_repeats_get_put_and_create_on_502_503_504_until_an_answer(self) -> None:
        with Flaky([503, 502, 504, 200]) as s:
            self.assertEqual(s.client.profiles.list(), [])
            self.assertEqual(len(s.requests), 4)
            s.requests.clear()
            s.statuses = [503, 200]
            self.assertEqual(s.room.create().state, "ready")
            self.assertEqual(s.requests, [f"POST /api/profile/{PROFILE_ID}/room/r"] * 2)
            s.requests.clear()
            self.assertEqual(s.room.write_file("f", "x").size, 1)
            self.assertEqual(len(s.requests), 2)

    def test_repeats_a_command_a_snapshot_a_fork_and_a_create_with_one_idempotency_key_on_every_try(self) -> None:
        with Flaky([503, 502, 200]) as s:
            calls = (lambda: s.room.exec("echo once"), lambda: s.room.exec_background("sleep 1"), s.room.snapshot,
                     lambda: s.room.fork(["copy"]), s.room.create)
            for call in calls:
                s.requests.clear()
                s.keys.clear()
                try:
                    call()
                except (TypeError, KeyError):
                    pass  # the plausible answer is not every model's shape; the tries are what is checked
                self.assertEqual(len(s.requests), 3)
                self.assertEqual(len(set(s.keys)), 1, s.keys)
                self.assertTrue(s.keys[0])
            # Each call has its own key, unless the caller gives one.
            s.keys.clear()
            s.requests.clear()
            s.statuses = [200]
            for _ in range(2):
                try:
                    s.room.exec("echo again")
                except (TypeError, KeyError):
                    pass
            self.assertNotEqual(s.keys[0], s.keys[1])
            s.keys.clear()
            try:
                s.room.exec("echo mine", idempotency_key="my-key")
            except (TypeError, KeyError):
                pass
            self.assertEqual(s.keys, ["my-key"])
        with Flaky([409, 200], code="idempotency_key_in_use") as busy:
            try:
                busy.room.exec("echo waits")
            except (TypeError, KeyError):
                pass
            self.assertEqual(len(busy.requests), 2)

    def test_never_repeats_a_delete_a_tool_call_a_stdin_write_or_a_permanent_503(self) -> None:
        with Flaky([503]) as s:
            for call in (s.room.delete, lambda: s.room.tools.call("run_command", {"command": "true"}), lambda: s.room.send_stdin("c", "x")):
                s.requests.clear()
                with self.assertRaises(RoomkitError) as caught:
                    call()
                self.assertEqual(caught.exception.code, "shutting_down")
                self.assertEqual(caught.exception.status, 503)
                self.assertEqual(caught.exception.request_id, "req-1")
                self.assertEqual(len(s.requests), 1)
        with Flaky([503], code="runtime_unavailable") as u:
            with self.assertRaises(RoomkitError) as caught:
                u.room.create()
            self.assertEqual(caught.exception.code, "runtime_unavailable")
            self.assertEqual(len(u.requests), 1)
        with Flaky([504]) as g:
            with self.assertRaises(RoomkitError) as caught:
                g.client.profiles.list()
            self.assertEqual(caught.exception.status, 504)
            self.assertEqual(len(g.requests), 4, "one try and three retries")

    def test_an_answer_without_the_error_body_is_unexpected_response(self) -> None:
        with Flaky([418], body="<html>teapot</html>") as s:
            with self.assertRaises(RoomkitError) as caught:
                s.client.usage()
            self.assertEqual(caught.exception.code, "unexpected_response")
            self.assertEqual(caught.exception.status, 418)
            self.assertIn("teapot", caught.exception.message)


class Hints(unittest.TestCase):
    def test_the_advice_an_error_carries_is_said_as_the_sdk_call(self) -> None:
        body = json.dumps({
            "error": "instance_not_found",
            "message": f'no instance in room "r"; create one with POST /api/profile/{PROFILE_ID}/room/r',
            "problem": 'no instance in room "r"',
            "hint": {"code": "create_instance", "profile_id": PROFILE_ID, "room_id": "r"},
        })
        with Flaky([404], body=body) as s:
            with self.assertRaises(RoomkitError) as caught:
                s.room.get()
            self.assertEqual(caught.exception.message, 'no instance in room "r"; create one with room.create()')
            self.assertEqual(caught.exception.problem, 'no instance in room "r"')
            self.assertEqual(caught.exception.hint, {"code": "create_instance", "profile_id": PROFILE_ID, "room_id": "r"})

    def test_every_hint_has_words_that_name_no_rest_call(self) -> None:
        from roomkit._hint_wording import _WORDS, sdk_message
        codes = ["create_instance", "create_new_instance", "recreate_failed_instance", "wait_until_ready", "poll_until",
                 "poll_state", "poll_and_retry", "delete_instance_first", "instance_options_differ", "delete_profile_instances",
                 "list_commands", "kill_a_command", "stdin_later", "stdin_in_file", "command_in_file", "env_in_file",
                 "enable_keep_undo", "fetch_raw_file", "read_with_key", "quota_fix", "show_quotas", "list_snapshots",
                 "snapshot_ready_later", "sign_port_url", "new_terminal_ticket"]
        self.assertEqual(sorted(_WORDS), sorted(codes))
        for code in codes:
            said = sdk_message("m; POST /api/x", "m", {"code": code, "until": "paused", "asked": "x", "path": "/a", "port": 8000})
            self.assertTrue(said.startswith("m") and "/api/" not in said and said != "m", f"{code}: {said}")
        self.assertEqual(sdk_message("m; POST /x", "m", {"code": "newer_hint"}), "m; POST /x")


class ConnectionFailures(unittest.TestCase):
    def test_nothing_listening_is_connection_failed_after_retrying_only_what_is_safe(self) -> None:
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()
        down = Roomkit(f"http://127.0.0.1:{port}", "rk_test_x", max_retries=2, retry_delay_s=0.005)
        tries: List[str] = []
        down._transport.observers.append(lambda method, route: tries.append(method))
        with self.assertRaises(RoomkitError) as caught:
            down.room(PROFILE_ID, "r").get()
        self.assertEqual(caught.exception.code, "connection_failed")
        self.assertIsNone(caught.exception.status)
        self.assertTrue(caught.exception.is_connection_error)
        self.assertIn(str(port), caught.exception.message)
        self.assertEqual(tries, ["GET"] * 3)
        tries.clear()
        with self.assertRaises(RoomkitError):
            down.room(PROFILE_ID, "r").exec("true")
        self.assertEqual(tries, ["POST"] * 3, "a command carries an Idempotency-Key: safe to retry")
        tries.clear()
        with self.assertRaises(RoomkitError):
            down.room(PROFILE_ID, "r").send_stdin("c", "x")
        self.assertEqual(tries, ["POST"])

    def test_a_silent_server_is_a_timeout(self) -> None:
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        try:
            slow = Roomkit(f"http://127.0.0.1:{listener.getsockname()[1]}", "rk_test_x", timeout_s=0.3, max_retries=0)
            with self.assertRaises(RoomkitError) as caught:
                slow.usage()
            self.assertEqual(caught.exception.code, "timeout")
        finally:
            listener.close()

    def test_a_base_url_that_is_not_http_is_refused_at_once(self) -> None:
        with self.assertRaises(ValueError):
            Roomkit("ftp://example", "k")


class FakeResponse(io.BytesIO):
    pass


class EventStreams(unittest.TestCase):
    def test_parses_events_with_any_line_ending_comments_and_multi_line_data(self) -> None:
        body = b": keepalive\n\nevent: output\ndata: {\"a\":1}\n\nevent: x\r\ndata: one\r\ndata: two\r\n\r\ndata: bare\n\n"
        self.assertEqual(
            list(read_events(FakeResponse(body))),  # type: ignore[arg-type]
            [("output", '{"a":1}'), ("x", "one\ntwo"), ("message", "bare")],
        )


if __name__ == "__main__":
    unittest.main()
