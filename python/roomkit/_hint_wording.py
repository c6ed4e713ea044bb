"""The SDK's words for the advice the server's errors carry as data.

The Error body's ``hint`` (a code and the values its wording needs) is the same advice
the REST API words as an endpoint to call; here it is said as the SDK method that does
it. A hint without words here keeps the server's message.
"""

from typing import Any, Callable, Dict, Mapping, Optional

_Words = Callable[[str, Mapping[str, Any]], str]

_WORDS: Dict[str, _Words] = {
    "create_instance": lambda p, h: f"{p}; create one with room.create()",
    "create_new_instance": lambda p, h: f"{p}; create a new one with room.create()",
    "recreate_failed_instance": lambda p, h: f"{p}; delete it with room.delete() and create another with room.create()",
    "wait_until_ready": lambda p, h: f"{p}; room.create() waits until it is ready (room.get() shows its state)",
    "poll_until": lambda p, h: f'{p}; follow room.get() until it is "{h.get("until")}"',
    "poll_state": lambda p, h: f"{p} (room.get() shows its state)",
    "poll_and_retry": lambda p, h: f"{p}; follow room.get() and retry",
    "delete_instance_first": lambda p, h: f"{p}; delete it first (room.delete()) to {h.get('asked')}, or use another room",
    "instance_options_differ": lambda p, h: f"{p}: pass the same options (or none) to get it, room.keep_alive() to move its deadline, or room.delete() and create it again",
    "delete_profile_instances": lambda p, h: f"{p} (room.delete() for each of them; client.instances.list(profile=...) lists them)",
    "list_commands": lambda p, h: f"{p}; room.commands() lists them",
    "kill_a_command": lambda p, h: f"{p}; wait for one to finish, or stop one with room.command(command_id).kill()",
    "stdin_later": lambda p, h: f"{p}, whose input is sent later with room.send_stdin(); give a waited-for command its input at once with stdin=",
    "stdin_in_file": lambda p, h: f"{p}; write the input to a file with room.write_file() and redirect it (`cmd < file`), or start the command with stdin_open=True and send it in parts",
    "command_in_file": lambda p, h: f"{p}; write long scripts to a file with room.write_file() and run that",
    "env_in_file": lambda p, h: f"{p}; put large values in a file with room.write_file()",
    "enable_keep_undo": lambda p, h: f"{p}. Set keep_undo on the profile (client.profiles.update(profile, keep_undo=True)), then delete the instance and create it again",
    "fetch_raw_file": lambda p, h: f"{p}; read its bytes with room.read_bytes({str(h.get('path'))!r})",
    "read_with_key": lambda p, h: f"{p}; read it with the key through room.read_bytes(path)",
    "quota_fix": lambda p, h: f"{p} (client.usage() shows all quotas)",
    "show_quotas": lambda p, h: f"{p} (client.usage() shows all quotas)",
    "list_snapshots": lambda p, h: f"{p}; client.snapshots.list() lists them",
    "snapshot_ready_later": lambda p, h: f'{p}; retry once client.snapshots.get("{h.get("snapshot_id")}") says "ready"',
    "sign_port_url": lambda p, h: f"{p}; get a new one with room.ports.url({h.get('port', 'port')})",
    "new_terminal_ticket": lambda p, h: f"{p}; open the terminal again",
}


def sdk_message(message: str, problem: Optional[Any], hint: Optional[Any]) -> str:
    """The message of an Error body in the SDK's words: its problem and its hint as an SDK call, else the server's message."""
    if not isinstance(hint, dict) or not isinstance(problem, str):
        return message
    words = _WORDS.get(str(hint.get("code")))
    return words(problem, hint) if words else message
