"""python/README.md's examples, run as they are written: the quick start against the
server, and the agent-loop recipe with a scripted model (a fixed list of tool calls)
against the shared real instance."""
import contextlib
import io
import json
import os
import re
import unittest
from typing import Any, Dict, List

from roomkit import RoomkitError

from .support import shared

README = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "README.md")


def readme_block(name: str) -> str:
    """The ```python block right after the README's `<!-- test: NAME ... -->` marker."""
    with open(README, encoding="utf-8") as f:
        text = f.read()
    match = re.search(r"<!-- test: " + re.escape(name) + r"\b[^>]*-->\s*```python\n(.*?)```", text, re.DOTALL)
    if match is None:
        raise AssertionError(f"python/README.md has no python block marked <!-- test: {name} -->")
    return match.group(1)


class Readme(unittest.TestCase):
    def test_the_quick_start_runs_as_written(self) -> None:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(readme_block("quickstart"), "README.md:quickstart", "exec"), {})
        printed = out.getvalue()
        self.assertIn("state: ready", printed)
        self.assertIn("0 hello\n ['/home/user/hello.txt']", printed)
        self.assertIn("b'\\x00\\x01\\x02' hello\n", printed)
        self.assertIn("tick 1\ntick 2\ntick 3\nexit code 0", printed)
        self.assertIn("background: 42\n", printed)
        self.assertRegex(printed, r"404 instance_not_found [0-9a-f-]{36}")
        # The block deleted its instance.
        with self.assertRaises(RoomkitError):
            shared()[0].room("default", "quickstart").get()

    def test_the_agent_loop_recipe_runs_a_scripted_model_against_a_real_instance(self) -> None:
        namespace: Dict[str, Any] = {}
        exec(compile(readme_block("agent-loop"), "README.md:agent-loop", "exec"), namespace)
        run_agent = namespace["run_agent"]
        _rk, room, _instance = shared()
        script = [
            [("write_file", {"path": "agent/fizz.sh", "content": 'for i in $(seq 1 15); do\n  if [ $((i % 15)) -eq 0 ]; then echo FizzBuzz\n  elif [ $((i % 3)) -eq 0 ]; then echo Fizz\n  elif [ $((i % 5)) -eq 0 ]; then echo Buzz\n  else echo $i; fi\ndone\n'})],
            [("run_command", {"command": "sh agent/fizz.sh | tail -3"}), ("list_files", {"path": "agent"})],
            [("read_file", {"path": "agent/missing.txt"})],
            "FizzBuzz works.",
        ]
        seen: List[List[Dict[str, Any]]] = []

        def scripted_model(messages: List[Dict[str, Any]], tools: List[Dict[str, Any]]) -> Dict[str, Any]:
            self.assertEqual([t["function"]["name"] for t in tools][:1], ["run_command"])
            seen.append([dict(m) for m in messages])
            step = script[len(seen) - 1]
            if isinstance(step, str):
                return {"role": "assistant", "content": step}
            calls = [
                {"id": f"call_{len(seen)}_{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
                for i, (name, args) in enumerate(step)
            ]
            return {"role": "assistant", "content": None, "tool_calls": calls}

        answer = run_agent(room, scripted_model, "Write fizzbuzz for 1 to 15 and run it.")
        self.assertEqual(answer, "FizzBuzz works.")
        self.assertEqual(len(seen), 4)
        # What the model was given back after each turn: one tool message per call, in order.
        after_write = seen[1][-1]
        self.assertEqual((after_write["role"], after_write["tool_call_id"]), ("tool", "call_1_0"))
        self.assertIn("Created /home/user/agent/fizz.sh", after_write["content"])
        ran, listed = seen[2][-2], seen[2][-1]
        self.assertIn("Exit code: 0", ran["content"])
        self.assertIn("13\n14\nFizzBuzz", ran["content"])
        self.assertIn("fizz.sh", listed["content"])
        self.assertIn("Error file_not_found", seen[3][-1]["content"])
        # The file the model wrote is really in the instance.
        self.assertIn("FizzBuzz", room.read_text("agent/fizz.sh"))


if __name__ == "__main__":
    unittest.main()
