"""`pip install ./python` works with nothing but pip and the standard library (no
package index), and the installed package is the SDK of this directory."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from .support import server

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Install(unittest.TestCase):
    def test_pip_installs_the_package_without_an_index_and_it_talks_to_the_server(self) -> None:
        target = tempfile.mkdtemp(prefix="roomkit-pip-")
        source = tempfile.mkdtemp(prefix="roomkit-src-")
        try:
            # A copy, so that the build leaves nothing in the repository.
            shutil.copytree(PYTHON_DIR, os.path.join(source, "python"), ignore=shutil.ignore_patterns("__pycache__", "tests"))
            pip = subprocess.run(
                [sys.executable, "-m", "pip", "install", "--no-index", "--no-deps", "--disable-pip-version-check", "--target", target, os.path.join(source, "python")],
                capture_output=True, text=True, timeout=300,
            )
            self.assertEqual(pip.returncode, 0, pip.stdout + pip.stderr)
            self.assertEqual(sorted(n for n in os.listdir(target) if not n.startswith(".")), ["roomkit", "roomkit-1.0.0.dist-info"])
            script = "import roomkit, sys; print(roomkit.__file__); print(roomkit.Roomkit(sys.argv[1]).health().status)"
            env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
            env["PYTHONPATH"] = target
            run = subprocess.run([sys.executable, "-c", script, server()[0]], capture_output=True, text=True, cwd=target, env=env, timeout=60)
            self.assertEqual(run.returncode, 0, run.stderr)
            where, status = run.stdout.split()
            self.assertTrue(where.startswith(target), where)
            self.assertEqual(status, "ok")
        finally:
            shutil.rmtree(target, ignore_errors=True)
            shutil.rmtree(source, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
