"""The client: where the server is, which key to send, how patient to be; and the
organization-wide resources (profiles, instances, snapshots, keys, usage, audit). Rooms come
from ``Roomkit.room()``."""
import os
import re
import threading
import urllib.parse
from typing import Any, Dict, Iterator, List, Optional

from ._transport import Transport
from .errors import RoomkitError
from .models import ApiKey, AuditPage, CreatedApiKey, Health, Instance, InstancePage, Profile, Snapshot, SnapshotPage, Usage
from .room import Room
from .version import __version__

DEFAULT_BASE_URL = "http://127.0.0.1:8080"
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.IGNORECASE)
_PUBLIC_URL = re.compile(r"^/vm/([^/]+)/file/(.+)$")


class Roomkit:
    """A client of one roomkit server.

    ``base_url`` defaults to ROOMKIT_URL, else http://127.0.0.1:8080; ``api_key`` to
    ROOMKIT_API_KEY. Requests that are safe to repeat (GET, file writes, creating a
    room's instance) are tried up to ``max_retries`` more times on connection errors and
    502/503/504, waiting ``retry_delay_s`` doubled each time. ``timeout_s`` gives up on a
    request that sends nothing for that long (default: no limit, since a create that
    waits or a long command may take minutes).
    """

    def __init__(
        self,
        base_url: Optional[str] = None,
        api_key: Optional[str] = None,
        *,
        max_retries: int = 3,
        retry_delay_s: float = 0.25,
        timeout_s: Optional[float] = None,
        poll_interval_s: float = 0.5,
    ) -> None:
        url = (base_url or _non_empty(os.environ.get("ROOMKIT_URL")) or DEFAULT_BASE_URL).rstrip("/")
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValueError(f'base_url "{url}" is not an http:// or https:// URL; expected e.g. {DEFAULT_BASE_URL}')
        self.base_url = url
        self.poll_interval_s = poll_interval_s
        self._transport = Transport(
            url,
            _non_empty(api_key) or _non_empty(os.environ.get("ROOMKIT_API_KEY")),
            max_retries=max_retries,
            retry_delay_s=retry_delay_s,
            timeout_s=timeout_s,
            user_agent=f"roomkit-python/{__version__}",
        )
        # Profile names resolved to ids, once per client: after renaming a profile, use a new client or its id.
        self._profile_ids: Dict[str, str] = {}
        self._lock = threading.Lock()
        self.profiles = Profiles(self)
        self.instances = Instances(self)
        self.snapshots = Snapshots(self)
        self.keys = Keys(self)

    def room(self, profile: str, room_id: str) -> Room:
        """A room of a profile (its id, or its name such as ``default``). Nothing is sent until a method is called."""
        return Room(self, profile, room_id)

    def usage(self) -> Usage:
        """The organization's quotas and its use of each."""
        return Usage.from_dict(self._transport.json("GET", "/api/usage"))

    def health(self) -> Health:
        """The server's health and whether it can create instances. Needs no key."""
        return Health.from_dict(self._transport.json("GET", "/healthz"))

    def audit(
        self,
        *,
        since: Optional[str] = None,
        until: Optional[str] = None,
        key_id: Optional[str] = None,
        instance_id: Optional[str] = None,
        profile: Optional[str] = None,
        room_id: Optional[str] = None,
        action: Optional[str] = None,
        decision: Optional[str] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
    ) -> AuditPage:
        """One page of the organization's audit trail, newest first."""
        query = {
            "since": since,
            "until": until,
            "key_id": key_id,
            "instance_id": instance_id,
            "profile_id": None if profile is None else self.resolve_profile_id(profile),
            "room_id": room_id,
            "action": action,
            "decision": decision,
            "limit": limit,
            "cursor": cursor,
        }
        return AuditPage.from_dict(self._transport.json("GET", "/api/audit", query=query))

    def read_public(self, public_url: str, *, start: Optional[int] = None, end: Optional[int] = None) -> bytes:
        """The bytes behind a ``public_url`` of a changed file (``/vm/{instance_id}/file/...``,
        relative or absolute), read without the key; ``start``/``end`` (inclusive) ask for a range."""
        path = urllib.parse.urlsplit(public_url).path
        match = _PUBLIC_URL.match(path)
        if match is None:
            raise ValueError(f'"{public_url}" is not a public file URL (/vm/{{instance_id}}/file/...)')
        params = {"instance_id": urllib.parse.unquote(match.group(1)), "path": urllib.parse.unquote_to_bytes(match.group(2))}
        response = self._transport.send("GET", "/vm/{instance_id}/file/{path}", params=params, headers=_range_header(start, end))
        with response:
            return response.read()  # type: ignore[no-any-return]

    def resolve_profile_id(self, profile: str) -> str:
        """A profile's id: a UUID is taken as an id, anything else as a name looked up in the profile list."""
        if _UUID.match(profile):
            return profile.lower()
        with self._lock:
            known = self._profile_ids.get(profile)
        if known is not None:
            return known
        profiles = self.profiles.list()
        for p in profiles:
            if p.name == profile:
                with self._lock:
                    self._profile_ids[profile] = p.profile_id
                return p.profile_id
        names = ", ".join(p.name for p in profiles) or "none"
        raise RoomkitError("profile_not_found", f'no profile named "{profile}" in this organization (it has: {names})', status=404)

    def __repr__(self) -> str:
        return f"Roomkit(base_url={self.base_url!r})"


class Profiles:
    """The organization's profiles; each method takes a profile's id or name."""

    def __init__(self, client: Roomkit) -> None:
        self._client = client

    def list(self) -> List[Profile]:
        answer = self._client._transport.json("GET", "/api/profiles")
        return [Profile.from_dict(p) for p in answer["profiles"]]

    def create(self, name: str, **fields: Any) -> Profile:
        """Creates a profile; every field but ``name`` has a default (image, packages,
        memory_mb, vcpus, disk_mb, user, home, env, command_timeout_s, idle_timeout_s,
        max_lifetime_s, network, settings, raw_files, warm_pool)."""
        return Profile.from_dict(self._client._transport.json("POST", "/api/profiles", body={"name": name, **fields}))

    def get(self, profile: str) -> Profile:
        params = {"profile_id": self._client.resolve_profile_id(profile)}
        return Profile.from_dict(self._client._transport.json("GET", "/api/profiles/{profile_id}", params=params))

    def update(self, profile: str, **changes: Any) -> Profile:
        """Sets the fields given and keeps the rest."""
        params = {"profile_id": self._client.resolve_profile_id(profile)}
        return Profile.from_dict(self._client._transport.json("PATCH", "/api/profiles/{profile_id}", params=params, body=changes))

    def delete(self, profile: str) -> None:
        """Refused with ``profile_in_use`` while the profile has live instances."""
        params = {"profile_id": self._client.resolve_profile_id(profile)}
        self._client._transport.json("DELETE", "/api/profiles/{profile_id}", params=params)
        with self._client._lock:
            for name in [n for n, i in self._client._profile_ids.items() if i == params["profile_id"]]:
                del self._client._profile_ids[name]


class Instances:
    """The organization's instances, newest first, including stopped and failed ones.
    An instance is created, read and deleted through its room: ``client.room(profile, room)``."""

    def __init__(self, client: Roomkit) -> None:
        self._client = client

    def list(
        self,
        *,
        profile: Optional[str] = None,
        state: Optional[str] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
        metadata: Optional[Dict[str, str]] = None,
    ) -> InstancePage:
        """One page; pass ``next_cursor`` back as ``cursor`` for the next. ``metadata``
        keeps the instances carrying all these labels."""
        query = {
            "profile_id": None if profile is None else self._client.resolve_profile_id(profile),
            "state": state,
            "metadata": None if metadata is None else urllib.parse.urlencode(metadata, quote_via=urllib.parse.quote),
            "limit": limit,
            "cursor": cursor,
        }
        return InstancePage.from_dict(self._client._transport.json("GET", "/api/instances", query=query))

    def all(
        self,
        *,
        profile: Optional[str] = None,
        state: Optional[str] = None,
        limit: Optional[int] = None,
        metadata: Optional[Dict[str, str]] = None,
    ) -> Iterator[Instance]:
        """Every instance matching the filter, page after page."""
        cursor: Optional[str] = None
        while True:
            page = self.list(profile=profile, state=state, limit=limit, cursor=cursor, metadata=metadata)
            yield from page.instances
            cursor = page.next_cursor
            if cursor is None:
                return

    def create(self, profile: str, room_id: str, **options: Any) -> Instance:
        """The room's instance, made if it has none (as ``room(profile, room_id).create()``)."""
        return self._client.room(profile, room_id).create(**options)

    def get(self, profile: str, room_id: str) -> Instance:
        return self._client.room(profile, room_id).get()

    def delete(self, profile: str, room_id: str) -> Instance:
        return self._client.room(profile, room_id).delete()


class Snapshots:
    """The organization's snapshots, newest first: a room's instance takes one with
    ``room.snapshot()``, and ``room.create(snapshot_id=...)`` starts an instance from one."""

    def __init__(self, client: Roomkit) -> None:
        self._client = client

    def list(self, *, instance_id: Optional[str] = None, limit: Optional[int] = None, cursor: Optional[str] = None) -> SnapshotPage:
        """One page; pass ``next_cursor`` back as ``cursor`` for the next. ``instance_id``
        keeps the snapshots taken of that instance."""
        query = {"instance_id": instance_id, "limit": limit, "cursor": cursor}
        return SnapshotPage.from_dict(self._client._transport.json("GET", "/api/snapshots", query=query))

    def all(self, *, instance_id: Optional[str] = None, limit: Optional[int] = None) -> Iterator[Snapshot]:
        """Every snapshot matching the filter, page after page."""
        cursor: Optional[str] = None
        while True:
            page = self.list(instance_id=instance_id, limit=limit, cursor=cursor)
            yield from page.snapshots
            cursor = page.next_cursor
            if cursor is None:
                return

    def get(self, snapshot_id: str) -> Snapshot:
        return Snapshot.from_dict(self._client._transport.json("GET", "/api/snapshots/{snapshot_id}", params={"snapshot_id": snapshot_id}))

    def delete(self, snapshot_id: str) -> Snapshot:
        """Deletes the snapshot and frees its disk; instances started from it keep their
        files. Answers with the snapshot as it was. Not retried."""
        return Snapshot.from_dict(self._client._transport.json("DELETE", "/api/snapshots/{snapshot_id}", params={"snapshot_id": snapshot_id}))


class Keys:
    """The organization's API keys."""

    def __init__(self, client: Roomkit) -> None:
        self._client = client

    def list(self) -> List[ApiKey]:
        return [ApiKey.from_dict(k) for k in self._client._transport.json("GET", "/api/keys")["keys"]]

    def create(self, *, name: Optional[str] = None, env: Optional[str] = None) -> CreatedApiKey:
        """Creates a key; the key itself (``api_key``) is in this answer only."""
        body = {k: v for k, v in {"name": name, "env": env}.items() if v is not None}
        return CreatedApiKey.from_dict(self._client._transport.json("POST", "/api/keys", body=body))

    def revoke(self, key_id: str) -> None:
        """Revokes a key; the next request made with it gets ``invalid_api_key``."""
        self._client._transport.json("DELETE", "/api/keys/{key_id}", params={"key_id": key_id})


def _non_empty(value: Optional[str]) -> Optional[str]:
    return value.strip() if value is not None and value.strip() else None


def _range_header(start: Optional[int], end: Optional[int]) -> Dict[str, str]:
    if start is None and end is None:
        return {}
    return {"Range": f"bytes={start or 0}-{'' if end is None else end}"}
