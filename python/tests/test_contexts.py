"""Code contexts through the SDK against a real server with a real gVisor instance (the
shared one): state kept between runs, results and errors, a streamed run's callbacks in
order, an interrupt, a restart, a delete."""
import threading
import time
import unittest

from roomkit import CodeContext, ContextRunResult, RoomkitError

from .support import shared


class Contexts(unittest.TestCase):
    def test_keeps_state_between_runs_and_answers_results_and_errors(self) -> None:
        _rk, room, _instance = shared()
        context = room.contexts.create()
        try:
            self.assertEqual(context.language, "python")
            self.assertIsNone(context.run("x = 41").error)
            answered = context.run("x + 1")
            self.assertIsInstance(answered, ContextRunResult)
            self.assertEqual(answered.text, "42")
            self.assertEqual(answered.execution_count, 2)
            self.assertIn(context.context_id, [c.context_id for c in room.contexts.list()])
            self.assertEqual(room.contexts.get(context.context_id).language, "python")
            failed = context.run("1 / 0")
            assert failed.error is not None
            self.assertEqual((failed.error.name, failed.error.value), ("ZeroDivisionError", "division by zero"))
            self.assertEqual(context.run("import os\nos.environ.get('ONCE')", env={"ONCE": "yes"}).text, "'yes'")
        finally:
            context.delete()

    def test_streams_output_results_and_the_error_to_their_callbacks_in_order(self) -> None:
        _rk, room, _instance = shared()
        context = room.contexts.create(env={"GREETING": "hello"})
        seen = []
        try:
            result = context.run(
                'import os, sys\nprint(os.environ["GREETING"])\nprint("oops", file=sys.stderr)\ndisplay(7)\nraise ValueError("bad")',
                on_stdout=lambda text: seen.append("out:" + text),
                on_stderr=lambda text: seen.append("err:" + text),
                on_result=lambda shown: seen.append(f"result:{shown.text}"),
                on_error=lambda error: seen.append("error:" + error.name),
            )
            self.assertEqual(seen, ["out:hello\n", "err:oops\n", "result:7", "error:ValueError"])
            self.assertEqual(result.stdout, "hello\n")
        finally:
            context.delete()

    def test_interrupts_restarts_and_deletes(self) -> None:
        _rk, room, _instance = shared()
        context = room.contexts.create()
        context.run("kept = 1")
        outcome = {}
        runner = threading.Thread(target=lambda: outcome.setdefault("result", context.run("while True: pass")))
        runner.start()
        interrupted = False
        for _ in range(50):
            time.sleep(0.1)
            if context.interrupt().interrupted:
                interrupted = True
                break
        runner.join(30)
        self.assertTrue(interrupted, "the interrupt found the run")
        stopped = outcome["result"]
        self.assertTrue(stopped.interrupted)
        self.assertEqual(stopped.error.name, "KeyboardInterrupt")
        self.assertEqual(context.run("kept").text, "1", "state kept")
        self.assertIsInstance(context.restart(), CodeContext)
        self.assertEqual(context.run("kept").error.name, "NameError")
        context.delete()
        with self.assertRaises(RoomkitError) as caught:
            context.run("1")
        self.assertEqual((caught.exception.code, caught.exception.status), ("context_not_found", 404))


if __name__ == "__main__":
    unittest.main()
