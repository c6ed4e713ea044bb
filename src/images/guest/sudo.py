#!/usr/bin/python3
# roomkit's `sudo` inside an instance: runs a command as root (or -u USER) through
# roomkit's root service (rootd.py), passing it this process's standard descriptors,
# environment and working directory, and exits with the command's status. It accepts
# the options agents and install scripts commonly give sudo; authentication options
# are accepted and ignored, since the instance's user may always become root.
import json
import os
import signal
import socket
import struct
import sys
import time

SOCKET_PATH = "/run/roomkit/root.sock"
SECURE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Variables kept as they are; sudo's own env_reset keeps a similar set.
KEEP = ("TERM", "LANG", "LANGUAGE", "LC_ALL", "TZ", "DEBIAN_FRONTEND", "ROOMKIT_COMMAND_ID", "COLORTERM", "NO_COLOR")


def fail(message, code=1):
    sys.stderr.write("sudo: %s\n" % message)
    sys.exit(code)


def parse(args):
    user, preserve, login, shell = "root", False, False, False
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            i += 1
            break
        if not a.startswith("-") or a == "-":
            break
        if a in ("-u", "--user"):
            i += 1
            if i >= len(args):
                fail("option -u needs a user")
            user = args[i]
        elif a.startswith("--user="):
            user = a.split("=", 1)[1]
        elif a.startswith("-u") and len(a) > 2:
            user = a[2:]
        elif a in ("-E", "--preserve-env") or a.startswith("--preserve-env="):
            preserve = True
        elif a in ("-i", "--login"):
            login = True
        elif a in ("-s", "--shell"):
            shell = True
        elif a in ("-v", "--validate", "-k", "--reset-timestamp", "-K", "--remove-timestamp"):
            sys.exit(0)
        elif a in ("-l", "--list"):
            print("User may run the following commands in this instance:\n    (ALL : ALL) NOPASSWD: ALL")
            sys.exit(0)
        elif a in ("-V", "--version"):
            print("roomkit sudo (runs commands as root through the instance's root service)")
            sys.exit(0)
        elif a in ("-h", "--help"):
            print("usage: sudo [-u user] [-E] [-i | -s] [--] command [args...]")
            sys.exit(0)
        elif a in ("-n", "--non-interactive", "-S", "--stdin", "-H", "--set-home", "-b", "--background", "-A", "--askpass"):
            pass
        elif len(a) > 2 and a[1] != "-" and all(c in "nSHEiskK" for c in a[1:]):
            preserve = preserve or "E" in a
            login = login or "i" in a
            shell = shell or "s" in a
        else:
            fail("option %s is not supported here" % a)
        i += 1
    return user, preserve, login, shell, args[i:]


def main():
    user, preserve, login, shell, command = parse(sys.argv[1:])
    if login:
        argv = ["/bin/bash", "-l"] + (["-c", " ".join(command)] if command else [])
    elif shell:
        argv = [os.environ.get("SHELL", "/bin/bash")] + (["-c", " ".join(command)] if command else [])
    elif command:
        argv = command
    else:
        fail("a command is needed (usage: sudo [-u user] command [args...])")
    try:
        import pwd
        home = pwd.getpwnam(user).pw_dir
    except KeyError:
        fail("unknown user %s" % user)
    env = dict(os.environ) if preserve else {k: v for k, v in os.environ.items() if k in KEEP}
    env.update({"HOME": home, "USER": user, "LOGNAME": user, "PATH": SECURE_PATH, "SUDO_USER": os.environ.get("USER", str(os.getuid()))})
    request = json.dumps({"argv": argv, "env": env, "cwd": os.getcwd() if not login else home, "user": user}).encode()

    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    deadline = time.monotonic() + 10
    while True:
        try:
            conn.connect(SOCKET_PATH)
            break
        except (FileNotFoundError, ConnectionRefusedError):
            # The service starts with the instance; give it a moment on a fresh one.
            if time.monotonic() > deadline:
                fail("roomkit's root service is not running in this instance")
            time.sleep(0.05)
    # Interrupting sudo ends the command: closing the connection tells the service.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda *_: os._exit(130))
    socket.send_fds(conn, [struct.pack("!I", len(request))], [0, 1, 2])
    conn.sendall(request)
    status = b""
    while len(status) < 4:
        chunk = conn.recv(4 - len(status))
        if not chunk:
            fail("roomkit's root service ended before the command did")
        status += chunk
    sys.exit(struct.unpack("!i", status)[0])


if __name__ == "__main__":
    main()
