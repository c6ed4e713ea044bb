"""What the tests share: the server they run against (ROOMKIT_URL and ROOMKIT_API_KEY,
as test/host/python-sdk.test.ts gives them) and one instance that every test needing
one uses, made on first use and deleted when the test process ends."""
import atexit
import os
import threading
from typing import Optional, Tuple

from roomkit import Instance, Room, Roomkit, RoomkitError

PROFILE = "py-sdk"
ROOM = "main"
UUID = r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"

_lock = threading.Lock()
_shared: Optional[Tuple[Roomkit, Room, Instance]] = None


def server() -> Tuple[str, str]:
    url, key = os.environ.get("ROOMKIT_URL"), os.environ.get("ROOMKIT_API_KEY")
    if not url or not key:
        raise RuntimeError("the tests need a roomkit server: set ROOMKIT_URL and ROOMKIT_API_KEY (test/host/python-sdk.test.ts does)")
    return url, key


def client(**options: object) -> Roomkit:
    url, key = server()
    return Roomkit(url, key, **options)  # type: ignore[arg-type]


def shared() -> Tuple[Roomkit, Room, Instance]:
    """The client, the room and the ready instance the tests share (profile "py-sdk", with
    keep_undo so that commands can be reverted; room "main")."""
    global _shared
    with _lock:
        if _shared is None:
            rk = client()
            try:
                if not rk.profiles.get(PROFILE).keep_undo:
                    rk.profiles.update(PROFILE, keep_undo=True)  # made by an older suite
            except RoomkitError as err:
                if err.code != "profile_not_found":
                    raise
                rk.profiles.create(PROFILE, memory_mb=512, disk_mb=1024, network={"egress": "none"}, command_timeout_s=60, keep_undo=True)
            room = rk.room(PROFILE, ROOM)
            instance = room.create()
            atexit.register(_delete, room)
            _shared = (rk, room, instance)
        return _shared


def _delete(room: Room) -> None:
    try:
        room.delete()
    except RoomkitError:
        pass
