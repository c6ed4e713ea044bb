#!/usr/bin/python3
# roomkit's root service inside an instance. This gVisor release does not honour
# setuid, so a real sudo cannot raise the VM user to root; instead roomkit's `sudo`
# (sudo.py) sends its command, environment, working directory and standard
# descriptors over a Unix socket to this service, which roomkit starts as root when
# the instance boots. The instance is the isolation boundary: its user may be root in
# it, as with passwordless sudo. The service runs the command as the asked user with
# the caller's descriptors, reports its exit status, and kills it if the caller goes.
import json
import os
import pwd
import signal
import socket
import struct
import threading

SOCKET_DIR = "/run/roomkit"
SOCKET_PATH = SOCKET_DIR + "/root.sock"
# Who may ask: root and the VM user (roomkit's images create it with this uid).
ALLOWED_UIDS = {0, 1000}
MAX_REQUEST = 1 << 20


def recv_exact(conn, n):
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def run_child(request, fds):
    """In the forked child: become the target user and exec the command."""
    try:
        os.setsid()
        for target, fd in enumerate(fds[:3]):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        user = pwd.getpwnam(request.get("user") or "root")
        os.setgroups(os.getgrouplist(user.pw_name, user.pw_gid))
        os.setgid(user.pw_gid)
        os.setuid(user.pw_uid)
        try:
            os.chdir(request.get("cwd") or "/")
        except OSError:
            os.chdir(user.pw_dir if os.path.isdir(user.pw_dir) else "/")
        argv = request["argv"]
        os.execvpe(argv[0], argv, request.get("env") or {})
    except FileNotFoundError:
        os.write(2, ("sudo: %s: command not found\n" % request["argv"][0]).encode())
        os._exit(127)
    except KeyError:
        os.write(2, ("sudo: unknown user %s\n" % request.get("user")).encode())
        os._exit(1)
    except Exception as err:  # anything else: say it on the caller's stderr
        os.write(2, ("sudo: %s\n" % err).encode())
        os._exit(126)


def serve(conn):
    fds = []
    try:
        _pid, uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
        if uid not in ALLOWED_UIDS:
            return
        head, fds, _flags, _addr = socket.recv_fds(conn, 4, 3)
        if len(head) < 4:
            head += recv_exact(conn, 4 - len(head))
        size = struct.unpack("!I", head)[0]
        if size <= 0 or size > MAX_REQUEST or len(fds) != 3:
            return
        request = json.loads(recv_exact(conn, size))
        pid = os.fork()
        if pid == 0:
            run_child(request, fds)
        for fd in fds:
            os.close(fd)
        fds = []
        done = threading.Event()

        def watch_caller():
            # The caller closing its end early (killed, or interrupted) ends the command.
            try:
                conn.recv(1)
            except OSError:
                pass
            if not done.is_set():
                try:
                    os.killpg(pid, signal.SIGKILL)
                except OSError:
                    pass

        threading.Thread(target=watch_caller, daemon=True).start()
        _, status = os.waitpid(pid, 0)
        done.set()
        code = os.waitstatus_to_exitcode(status)
        conn.sendall(struct.pack("!i", code if code >= 0 else 128 - code))
    except (EOFError, OSError, ValueError):
        pass
    finally:
        for fd in fds:
            os.close(fd)
        conn.close()


def main():
    os.makedirs(SOCKET_DIR, mode=0o755, exist_ok=True)
    try:
        os.unlink(SOCKET_PATH)
    except FileNotFoundError:
        pass
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(SOCKET_PATH + ".new")
    os.chmod(SOCKET_PATH + ".new", 0o666)
    os.rename(SOCKET_PATH + ".new", SOCKET_PATH)
    server.listen(64)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    while True:
        conn, _ = server.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    main()
