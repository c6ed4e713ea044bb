#!/usr/bin/python3
# roomkit's bash code context: one long-lived bash that keeps its variables, functions,
# aliases and working directory from run to run, driven by python3 (every Debian image
# has it) with the protocol of code-context.py, whose pipes and events it shares (loaded
# from beside this file). Each run's code is sourced by that bash from a here-string,
# with stdin /dev/null; its stdout and stderr reach the run as they come. The shell
# reports the run's exit status on a pipe of its own: a status other than 0 is the
# run's error (`ExitStatus`), an interrupt is `KeyboardInterrupt`. SIGINT reaches the
# whole process group: the program running dies of it and the shell's trap returns
# from the code (from the innermost function or sourced file the code was in). A cell
# that runs `exit` ends the shell: the run says so, and the next one has a new shell.
import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading

spec = importlib.util.spec_from_file_location('roomkit_code_context', os.path.join(os.path.dirname(os.path.abspath(__file__)), 'code-context.py'))
base = importlib.util.module_from_spec(spec)
spec.loader.exec_module(base)
send, sync_output = base.send, base.sync_output

# Set up once. The command pipe is the shell's script, which bash reads through a
# descriptor of its own: closed for everything the code starts. The trap returns from
# the code under way, and does nothing between runs.
PRELUDE = "exec {commands}<&-\ntrap '[[ -n $__roomkit_running ]] && return 130' INT\n"
INTERRUPTED = threading.Event()
RUNNING = threading.Event()


def quoted(text):
    """Bash's $'…' quoting of any text: every byte but ASCII letters and digits escaped."""
    return "$'" + ''.join(chr(b) if b < 128 and chr(b).isalnum() else '\\x%02x' % b for b in text.encode('utf-8')) + "'"


def on_interrupt(signum, frame):
    # The shell and the code's programs got the same SIGINT (one process group).
    if RUNNING.is_set():
        INTERRUPTED.set()


def run_script(code, env, status_fd):
    lines = []
    for i, (name, value) in enumerate(env.items()):
        lines.append('__roomkit_saved_%d=$(declare -p %s 2>/dev/null); export %s=%s' % (i, name, name, quoted(value)))
    lines.append('__roomkit_running=1')
    # The code runs without the status pipe; its here-string is on a descriptor of its own.
    lines.append('. /dev/fd/5 5<<<%s %d>&-' % (quoted(code), status_fd))
    lines.append('__roomkit_status=$? __roomkit_running=')
    for i, name in enumerate(env):
        lines.append('unset %s; eval "$__roomkit_saved_%d"; unset __roomkit_saved_%d' % (name, i, i))
    lines.append('printf "%%d\\n" "$__roomkit_status" >&%d' % status_fd)
    # The code's own last status is what the next run's $? starts from.
    lines.append('(exit "$__roomkit_status")')
    return '\n'.join(lines) + '\n'


class Shell:
    """One bash reading its commands from a pipe, and telling each run's status on another."""

    def __init__(self):
        commands_r, commands_w = os.pipe()
        status_r, self.status_fd = os.pipe()
        try:
            self.process = subprocess.Popen(['bash', '--noprofile', '--norc', '/dev/fd/%d' % commands_r], pass_fds=(commands_r, self.status_fd), stdin=0, stdout=1, stderr=2)
        finally:
            # The shell's own copies (the same numbers in it); the status pipe reads EOF once it ends.
            os.close(commands_r)
            os.close(self.status_fd)
        self.commands = os.fdopen(commands_w, 'w', encoding='utf-8')
        self.statuses = os.fdopen(status_r, 'r', encoding='utf-8')
        self.commands.write(PRELUDE.replace('{commands}', str(commands_r)))
        self.commands.flush()

    def run(self, code, env):
        """The code's exit status, or None when the shell ended during it."""
        try:
            self.commands.write(run_script(code, env, self.status_fd))
            self.commands.flush()
            status = self.statuses.readline()
        except OSError:
            return None
        return int(status) if status else None

    def end(self):
        for f in (self.commands, self.statuses):
            try:
                f.close()
            except OSError:
                pass
        return self.process.wait()


START_DIR = '.'


def main():
    global START_DIR
    cwd = sys.argv[1] if len(sys.argv) > 1 else ''
    if cwd:
        try:
            os.chdir(cwd)
        except OSError as err:
            send({'type': 'failed', 'reason': 'cwd', 'message': '%s: %s' % (cwd, err.strerror)})
            return
    START_DIR = os.getcwd()
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    for stream, fd in (('stdout', 1), ('stderr', 2)):
        pump = base.Pump(stream, fd)
        pump.start()
        base.PUMPS.append(pump)
    signal.signal(signal.SIGINT, on_interrupt)
    try:
        shell = Shell()
    except OSError as err:
        send({'type': 'failed', 'reason': 'bash', 'message': 'bash: %s' % err.strerror})
        return
    execution_count = 0
    version = subprocess.run(['bash', '-c', 'echo $BASH_VERSION'], capture_output=True, text=True).stdout.strip()
    send({'type': 'ready', 'pid': os.getpid(), 'language': 'bash', 'version': version})
    for line in base.PROTO_IN:
        try:
            request = json.loads(line)
        except ValueError:
            continue
        if request.get('type') != 'run':
            continue
        execution_count += 1
        INTERRUPTED.clear()
        RUNNING.set()
        send({'type': 'started'})
        try:
            status = shell.run(request.get('code', ''), request.get('env') or {})
        finally:
            RUNNING.clear()
        sync_output()
        if status is None:
            # The code ended the shell (`exit`): the next run has a new one, in the context's cwd.
            code = shell.end()
            os.chdir(START_DIR)
            shell = Shell()
            send({'type': 'error', 'name': 'ExitStatus', 'value': str(code), 'traceback': 'the shell exited with status %d: the next run has a new one (its variables are gone)' % code})
            send({'type': 'end', 'execution_count': execution_count})
            continue
        code = status
        if INTERRUPTED.is_set():
            send({'type': 'error', 'name': 'KeyboardInterrupt', 'value': '', 'traceback': 'KeyboardInterrupt'})
        elif code != 0:
            send({'type': 'error', 'name': 'ExitStatus', 'value': str(code), 'traceback': 'exit status %d' % code})
        send({'type': 'end', 'execution_count': execution_count})


if __name__ == '__main__':
    main()
