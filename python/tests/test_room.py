"""A room's instance against a real server with a real gVisor instance (the shared one):
create, pause and resume, commands (plain, streamed, background, stdin, kill, revert,
history), files in and out, and the room's tools."""
import hashlib
import json
import time
import unittest

from roomkit import CommandHandle, CommandResult, Instance, OutputChunk, RevertResult, RoomkitError, ToolCallResult

from .support import PROFILE, UUID, shared


class Create(unittest.TestCase):
    def test_is_idempotent_by_name_and_by_id_and_follows_progress(self) -> None:
        rk, room, instance = shared()
        self.assertEqual(instance.state, "ready")
        self.assertEqual(instance.room_id, "main")
        self.assertEqual(instance.state_history[-1].state, "ready")
        self.assertEqual(room.profile_id(), instance.profile_id)
        seen = []
        again = room.create(on_progress=seen.append, poll_interval_s=0.05)
        self.assertEqual(again.instance_id, instance.instance_id)
        self.assertEqual([i.state for i in seen], ["ready"])
        self.assertEqual(rk.room(instance.profile_id, "main").get().instance_id, instance.instance_id)

    def test_a_room_without_an_instance_answers_instance_not_found(self) -> None:
        rk, _room, _instance = shared()
        for call in (rk.room(PROFILE, "empty-room").get, lambda: rk.room(PROFILE, "empty-room").exec("true"), rk.room(PROFILE, "empty-room").delete):
            with self.assertRaises(RoomkitError) as caught:
                call()
            self.assertEqual((caught.exception.code, caught.exception.status), ("instance_not_found", 404))
            self.assertRegex(caught.exception.request_id or "", UUID)


class CreateOptions(unittest.TestCase):
    def test_env_metadata_timeout_the_label_filter_and_keep_alive(self) -> None:
        rk, _room, _instance = shared()
        room = rk.room(PROFILE, "with-options")
        made = room.create(env={"TOKEN": "secret value"}, metadata={"app": "py test", "user": "u&1"}, timeout_s=600)
        try:
            self.assertEqual((made.env_names, made.metadata, made.timeout_s), (["TOKEN"], {"app": "py test", "user": "u&1"}, 600))
            self.assertNotIn("secret value", json.dumps(made.raw))
            self.assertEqual(room.exec('printf %s "$TOKEN"').output, "secret value")
            found = rk.instances.list(metadata={"user": "u&1", "app": "py test"})
            self.assertEqual([i.instance_id for i in found.instances], [made.instance_id])
            self.assertEqual(rk.instances.list(metadata={"user": "u&2"}).instances, [])
            kept = room.keep_alive(1200)
            assert kept.expires_at is not None and made.expires_at is not None
            self.assertGreater(kept.expires_at, made.expires_at)
            with self.assertRaises(RoomkitError) as conflict:
                room.create(timeout_s=60)
            self.assertEqual((conflict.exception.code, conflict.exception.status), ("instance_options_conflict", 409))
        finally:
            room.delete()


class PauseResume(unittest.TestCase):
    def test_pause_keeps_the_files_and_resume_brings_the_machine_back(self) -> None:
        _rk, room, instance = shared()
        room.write_file("kept.txt", "still here\n")
        paused = room.pause()
        self.assertIsInstance(paused, Instance)
        self.assertEqual((paused.instance_id, paused.state), (instance.instance_id, "paused"))
        assert paused.pause is not None
        self.assertIsInstance(paused.pause.memory_kept, bool)
        self.assertEqual([(s.state, s.reason_code) for s in paused.state_history[-2:]], [("pausing", "paused"), ("paused", "paused")])
        # A pause of a paused instance answers it as it is.
        self.assertEqual(room.pause().pause.paused_at, paused.pause.paused_at)  # type: ignore[union-attr]
        self.assertEqual(room.get().state, "paused")
        resumed = room.resume()
        self.assertEqual((resumed.instance_id, resumed.state, resumed.pause), (instance.instance_id, "ready", None))
        self.assertEqual(resumed.state_history[-1].reason_code, "resumed")
        self.assertEqual(room.resume().state, "ready")
        self.assertEqual(room.exec("cat kept.txt").output, "still here\n")
        # Files only when asked: the pause says its memory was not kept.
        files_only = room.pause(memory=False)
        self.assertIs(files_only.pause.memory_kept, False)  # type: ignore[union-attr]
        self.assertEqual(room.exec("cat kept.txt").output, "still here\n")


class Exec(unittest.TestCase):
    def test_answers_output_exit_code_and_streams_apart_and_a_failure_is_a_result(self) -> None:
        _rk, room, instance = shared()
        ok = room.exec("echo hello; echo oops >&2")
        self.assertIsInstance(ok, CommandResult)
        self.assertEqual((ok.status, ok.exit_code, ok.output), ("success", 0, "hello\noops\n"))
        self.assertEqual((ok.result.stdout, ok.result.stderr), ("hello\n", "oops\n"))
        self.assertEqual(ok.instance_id, instance.instance_id)
        self.assertRegex(ok.command_id, UUID)
        failed = room.exec("echo before; exit 3")
        self.assertEqual((failed.status, failed.exit_code, failed.output), ("error", 3, "before\n"))
        self.assertEqual(room.exec("no-such-program").exit_code, 127)

    def test_lists_changed_files_and_takes_cwd_env_and_stdin(self) -> None:
        _rk, room, instance = shared()
        made = room.exec("printf abc > made.txt")
        self.assertEqual([(c.path, c.status, c.size) for c in made.result.files_changed], [("/home/user/made.txt", "created", 3)])
        self.assertEqual(made.result.files_changed[0].public_url, f"/vm/{instance.instance_id}/file/home/user/made.txt")
        gone = room.exec("rm made.txt")
        self.assertEqual([(c.path, c.status) for c in gone.result.files_changed], [("/home/user/made.txt", "deleted")])
        self.assertEqual(room.exec('pwd; echo "$GREETING"', cwd="/tmp", env={"GREETING": "hi there"}).output, "/tmp\nhi there\n")
        self.assertEqual(room.exec("tr a-z A-Z", stdin="shout\n").output, "SHOUT\n")
        self.assertEqual(room.exec("od -An -tx1 | tr -d ' \\n'", stdin=b"\x00\xff\x10").output, "00ff10")

    def test_a_time_limit_kills_the_command(self) -> None:
        _rk, room, _instance = shared()
        late = room.exec("echo start; sleep 5", timeout_s=1)
        self.assertTrue(late.result.timed_out)
        self.assertEqual((late.exit_code, late.result.end_reason, late.output), (124, "time_limit", "start\n"))
        with self.assertRaises(RoomkitError) as caught:
            room.exec("true", timeout_s=0)
        self.assertEqual(caught.exception.code, "validation_error")

    def test_lists_the_room_history_newest_first(self) -> None:
        _rk, room, _instance = shared()
        marker = room.exec("echo history-marker")
        page = room.commands(limit=2)
        self.assertEqual(len(page.commands), 2)
        self.assertEqual((page.commands[0].command_id, page.commands[0].command), (marker.command_id, "echo history-marker"))
        self.assertIsNotNone(page.next_cursor)
        following = room.commands(limit=2, cursor=page.next_cursor)
        self.assertFalse({c.command_id for c in following.commands} & {c.command_id for c in page.commands})


class Revert(unittest.TestCase):
    def test_puts_back_what_one_command_created_modified_and_deleted(self) -> None:
        _rk, room, instance = shared()
        room.write_file("undo/edit.txt", "before\n")
        room.write_file("undo/gone.txt", "keep me\n")
        ran = room.exec("cd undo && echo after > edit.txt && echo new > made.txt && rm gone.txt")
        reverted = room.command(ran.command_id).revert()
        self.assertIsInstance(reverted, RevertResult)
        self.assertEqual((reverted.command_id, reverted.instance_id, reverted.forced), (ran.command_id, instance.instance_id, False))
        changes = [(c.path, c.status) for c in reverted.files_changed]
        self.assertEqual(changes, [("/home/user/undo/edit.txt", "modified"), ("/home/user/undo/gone.txt", "created"), ("/home/user/undo/made.txt", "deleted")])
        self.assertEqual(reverted.files_changed_total, 3)
        self.assertEqual(room.exec("cd undo && cat edit.txt gone.txt; ls").output, "before\nkeep me\nedit.txt\ngone.txt\n")
        with self.assertRaises(RoomkitError) as again:
            room.command(ran.command_id).revert()
        self.assertEqual((again.exception.code, again.exception.status), ("no_undo_point", 409))

    def test_a_conflict_names_the_files_until_forced_and_keep_undo_false_keeps_no_point(self) -> None:
        _rk, room, _instance = shared()
        first = room.exec("echo one > clash.txt")
        room.exec("echo two > clash.txt")
        with self.assertRaises(RoomkitError) as conflict:
            room.command(first.command_id).revert()
        self.assertEqual((conflict.exception.code, conflict.exception.status), ("revert_conflict", 409))
        self.assertEqual((conflict.exception.details or {}).get("files"), ["/home/user/clash.txt"])
        forced = room.command(first.command_id).revert(force=True)
        self.assertTrue(forced.forced)
        self.assertEqual([(c.path, c.status) for c in forced.files_changed], [("/home/user/clash.txt", "deleted")])
        with room.exec_stream("echo three > clash.txt", keep_undo=False) as stream:
            result = stream.wait()
        background = room.exec_background("echo four > clash.txt", keep_undo=False)
        background.wait(poll_interval_s=0.1, timeout_s=30)
        plain = room.exec("echo five > clash.txt", keep_undo=False)
        for command_id in (result.command_id, background.command_id, plain.command_id):
            with self.assertRaises(RoomkitError) as none:
                room.command(command_id).revert()
            self.assertEqual(none.exception.code, "no_undo_point")


class Streams(unittest.TestCase):
    def test_gives_output_as_it_is_printed_then_the_same_result_as_exec(self) -> None:
        _rk, room, _instance = shared()
        arrivals = []
        with room.exec_stream("for i in 1 2 3; do echo line$i; sleep 0.4; done; echo bad >&2; exit 5") as stream:
            for chunk in stream:
                self.assertIsInstance(chunk, OutputChunk)
                arrivals.append((chunk, time.monotonic()))
        result = stream.result
        assert result is not None
        self.assertEqual((result.exit_code, result.output), (5, "line1\nline2\nline3\nbad\n"))
        self.assertEqual(stream.command_id, result.command_id)
        self.assertEqual("".join(c.data for c, _ in arrivals), result.output)
        offset = 0
        for chunk, _ in arrivals:
            self.assertEqual(chunk.offset, offset)
            offset += len(chunk.data.encode())
        self.assertEqual(arrivals[-1][0].stream, "stderr")
        self.assertEqual(arrivals[0][0].stream, "stdout")
        # Live, not all at the end: the pieces arrived spread over the command's run.
        self.assertGreaterEqual(arrivals[-1][1] - arrivals[0][1], 0.8)

    def test_wait_reads_to_the_result_and_errors_before_the_start_are_raised_at_once(self) -> None:
        rk, room, _instance = shared()
        seen = []
        self.assertEqual(room.exec_stream("echo one; echo two").wait(seen.append).output, "one\ntwo\n")
        self.assertEqual("".join(c.data for c in seen), "one\ntwo\n")
        with self.assertRaises(RoomkitError) as caught:
            rk.room(PROFILE, "empty-room").exec_stream("true")
        self.assertEqual(caught.exception.code, "instance_not_found")


class Background(unittest.TestCase):
    def test_starts_at_once_and_is_followed_by_offset_to_its_end(self) -> None:
        _rk, room, _instance = shared()
        handle = room.exec_background("echo first; sleep 0.5; echo second; exit 4")
        self.assertIsInstance(handle, CommandHandle)
        self.assertRegex(handle.command_id, UUID)
        assert handle.last is not None
        self.assertEqual(handle.last.state, "running")
        pieces = []
        final = handle.wait(poll_interval_s=0.1, on_output=lambda data, offset: pieces.append((offset, data)))
        # The same CommandResult that exec answers with.
        self.assertIsInstance(final, CommandResult)
        self.assertEqual((final.status, final.exit_code, final.output), ("error", 4, "first\nsecond\n"))
        direct = room.exec("exit 4")
        self.assertEqual(sorted(final.raw), sorted(direct.raw))
        self.assertEqual(sorted(final.raw["result"]), sorted(direct.raw["result"]))
        status = handle.wait_status()
        self.assertEqual((status.state, status.exit_code), ("exited", 4))
        assert status.result is not None
        self.assertEqual(status.result.command_id, handle.command_id)
        self.assertEqual("".join(d for _, d in pieces), "first\nsecond\n")
        self.assertEqual(pieces[0][0], 0)
        later = room.command(handle.command_id).status(offset=6)
        self.assertEqual((later.output, later.output_offset, later.next_offset), ("second\n", 6, 13))

    def test_kill_ends_it_and_a_second_kill_is_command_not_running(self) -> None:
        _rk, room, _instance = shared()
        handle = room.exec_background("echo up; sleep 60")
        for _ in range(50):
            if "up" in handle.status().output:
                break
            time.sleep(0.1)
        killed = handle.kill()
        self.assertEqual((killed.state, killed.exit_code), ("killed", 137))
        with self.assertRaises(RoomkitError) as caught:
            handle.kill()
        self.assertEqual((caught.exception.code, caught.exception.status), ("command_not_running", 409))

    def test_takes_more_input_while_it_runs(self) -> None:
        _rk, room, _instance = shared()
        handle = room.exec_background("cat; echo done", stdin="first\n", stdin_open=True)
        assert handle.last is not None
        self.assertTrue(handle.last.stdin_open)
        sent = handle.send_stdin("second\n")
        self.assertEqual((sent.bytes, sent.closed), (7, False))
        more = room.send_stdin(handle.command_id, b"\xc3\xa9\n")
        self.assertEqual((more.bytes, more.total_bytes - sent.total_bytes), (3, 3))
        self.assertTrue(handle.close_stdin().closed)
        final = handle.wait(poll_interval_s=0.1, timeout_s=30)
        self.assertEqual(final.output, "first\nsecond\né\ndone\n")
        with self.assertRaises(RoomkitError) as caught:
            handle.send_stdin("late")
        self.assertIn(caught.exception.code, ("command_not_running", "stdin_not_open"))


class Files(unittest.TestCase):
    def test_writes_and_reads_text_that_a_command_sees(self) -> None:
        _rk, room, instance = shared()
        written = room.write_file("notes/hello.txt", "héllo\n")
        self.assertEqual((written.file_path, written.instance_id, written.status, written.size), ("/home/user/notes/hello.txt", instance.instance_id, "created", 7))
        self.assertEqual(room.write_file("notes/hello.txt", "héllo again\n").status, "modified")
        read = room.read_file("notes/hello.txt")
        self.assertEqual((read.file_path, read.encoding, read.content, read.mime_type), ("/home/user/notes/hello.txt", "utf-8", "héllo again\n", "text/plain"))
        self.assertEqual(room.read_text("/home/user/notes/hello.txt"), "héllo again\n")
        self.assertEqual(room.exec("cat notes/hello.txt").output, "héllo again\n")

    def test_round_trips_bytes_through_json_raw_ranges_and_the_public_url(self) -> None:
        rk, room, _instance = shared()
        data = bytes((i * 7) % 256 for i in range(512))
        room.write_file("notes/bin.dat", data)
        read = room.read_file("notes/bin.dat")
        self.assertEqual((read.encoding, read.size), ("base64", 512))
        self.assertEqual(read.to_bytes(), data)
        self.assertEqual(room.read_bytes("notes/bin.dat"), data)
        self.assertEqual(room.read_bytes("notes/bin.dat", start=10, end=19), data[10:20])
        self.assertEqual(room.read_bytes("notes/bin.dat", start=500), data[500:])
        self.assertEqual(room.exec("sha256sum notes/bin.dat | cut -c1-64").output.strip(), hashlib.sha256(data).hexdigest())
        made = room.exec("printf public > pub.txt").result.files_changed[0]
        assert made.public_url is not None
        self.assertEqual(rk.read_public(made.public_url), b"public")
        self.assertEqual(rk.read_public(rk.base_url + made.public_url, start=1, end=2), b"ub")

    def test_sends_paths_with_spaces_hash_and_dots_as_they_are(self) -> None:
        _rk, room, _instance = shared()
        room.write_file("/tmp/a dir/x..y #1?.txt", "odd")
        self.assertEqual(room.read_file("/tmp/a dir/../a dir/x..y #1?.txt").content, "odd")
        self.assertEqual(room.read_bytes("/tmp/a dir/x..y #1?.txt"), b"odd")
        self.assertEqual(room.exec("cat '/tmp/a dir/x..y #1?.txt'").output, "odd")
        self.assertEqual(room.list("/tmp/a dir").entries[0].name, "x..y #1?.txt")

    def test_lists_a_directory_and_deletes_a_file(self) -> None:
        _rk, room, instance = shared()
        room.write_file("listing/b.txt", "bb")
        room.write_file("listing/a.txt", "a")
        room.exec("mkdir -p listing/sub")
        listing = room.list("listing")
        self.assertEqual(listing.path, "/home/user/listing")
        self.assertEqual([(e.name, e.type) for e in listing.entries], [("a.txt", "file"), ("b.txt", "file"), ("sub", "directory")])
        self.assertEqual(listing.entries[1].size, 2)
        self.assertFalse(listing.truncated)
        self.assertIn("listing", [e.name for e in room.list().entries])
        removed = room.delete_file("listing/a.txt")
        self.assertEqual((removed.file_path, removed.instance_id, removed.status), ("/home/user/listing/a.txt", instance.instance_id, "deleted"))
        for call, code, status in (
            (lambda: room.read_file("listing/a.txt"), "file_not_found", 404),
            (lambda: room.read_file("/etc"), "is_a_directory", 400),
            (lambda: room.delete_file("listing/sub"), "is_a_directory", 400),
            (lambda: room.write_file("/etc/passwd", "x"), "permission_denied", 403),
        ):
            with self.assertRaises(RoomkitError) as caught:
                call()
            self.assertEqual((caught.exception.code, caught.exception.status), (code, status))


class Tools(unittest.TestCase):
    NAMES = ["run_command", "run_code", "command_output", "kill_command", "revert_command", "read_file", "write_file", "list_files", "delete_file"]

    def test_gives_the_schema_in_each_format(self) -> None:
        _rk, room, instance = shared()
        own = room.tools.schema()
        self.assertEqual((own.format, own.profile_id, own.room_id), ("roomkit", instance.profile_id, "main"))
        self.assertEqual([t["name"] for t in own.tools], self.NAMES)
        self.assertEqual(own.endpoints["run_command"].method, "POST")
        self.assertIn("command", own.endpoints["run_command"].body or [])
        openai = room.tools.schema("openai")
        self.assertEqual([(t["type"], t["function"]["name"]) for t in openai.tools], [("function", n) for n in self.NAMES])
        self.assertIn("parameters", openai.tools[0]["function"])
        anthropic = room.tools.schema("anthropic")
        self.assertEqual([sorted(t) for t in anthropic.tools], [["description", "input_schema", "name"]] * len(self.NAMES))
        mcp = room.tools.schema("mcp")
        self.assertIn("inputSchema", mcp.tools[0])
        with self.assertRaises(RoomkitError) as caught:
            room.tools.schema("nonsense")
        self.assertEqual(caught.exception.code, "validation_error")

    def test_call_runs_a_tool_with_arguments_as_an_object_or_json_text(self) -> None:
        _rk, room, _instance = shared()
        ran = room.tools.call("run_command", {"command": "echo 42 > answer.txt; cat answer.txt"})
        self.assertIsInstance(ran, ToolCallResult)
        self.assertFalse(ran.is_error)
        self.assertIn("Exit code: 0", ran.text)
        self.assertIn("42", ran.text)
        self.assertEqual(ran.structured_content["result"]["exit_code"], 0)
        read = room.tools.call("read_file", json.dumps({"path": "answer.txt"}))
        self.assertEqual(read.text, "42\n")
        failed = room.tools.call("run_command", {"command": "exit 2"})
        self.assertTrue(failed.is_error)
        missing = room.tools.call("read_file", {"path": "nothing-here"})
        self.assertTrue(missing.is_error)
        self.assertEqual(missing.structured_content["error"], "file_not_found")
        for name, arguments, code in (("no_such_tool", {}, "unknown_tool"), ("run_command", {"cmd": "x"}, "invalid_arguments")):
            with self.assertRaises(RoomkitError) as caught:
                room.tools.call(name, arguments)
            self.assertEqual((caught.exception.code, caught.exception.status), (code, 400))


if __name__ == "__main__":
    unittest.main()
