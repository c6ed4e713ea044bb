"""The organization's resources against a real server: health, usage, profiles (by
name and id), keys, the instance list, the audit trail, and the errors of each."""
import os
import unittest
import uuid

from roomkit import ApiKey, Profile, Roomkit, RoomkitError

from .support import PROFILE, UUID, client, server, shared


class Service(unittest.TestCase):
    def test_health_needs_no_key(self) -> None:
        health = Roomkit(server()[0], None).health()
        self.assertEqual(health.status, "ok")
        self.assertTrue(health.runtime["available"])

    def test_usage_lists_every_quota(self) -> None:
        usage = client().usage()
        self.assertRegex(usage.organization_id, UUID)
        self.assertEqual(set(usage.quotas), {"instances", "memory_mb", "vcpus", "disk_mb", "concurrent_commands", "commands_per_minute", "snapshots"})
        self.assertGreater(usage.quotas["instances"].limit, 0)


class Profiles(unittest.TestCase):
    def test_create_get_update_and_delete_by_name_and_by_id(self) -> None:
        rk = client()
        name = f"tmp-{uuid.uuid4().hex[:8]}"
        made = rk.profiles.create(name, memory_mb=256, packages=["jq"], env={"A": "1"})
        self.assertIsInstance(made, Profile)
        self.assertEqual((made.name, made.memory_mb, made.packages, made.env), (name, 256, ["jq"], {"A": "1"}))
        self.assertEqual(made.home, "/home/user")
        self.assertEqual(rk.profiles.get(name).profile_id, made.profile_id)
        self.assertEqual(rk.profiles.get(made.profile_id.upper()).name, name)
        self.assertIn(made.profile_id, [p.profile_id for p in rk.profiles.list()])
        self.assertEqual((made.idle_action, made.keep_undo), ("pause", False))
        changed = rk.profiles.update(name, vcpus=2, idle_timeout_s=60, idle_action="stop", paused_retention_s=3600, keep_undo=True)
        self.assertEqual((changed.vcpus, changed.idle_timeout_s, changed.memory_mb), (2, 60, 256))
        self.assertEqual((changed.idle_action, changed.paused_retention_s, changed.keep_undo), ("stop", 3600, True))
        self.assertIsNone(rk.profiles.delete(name))
        with self.assertRaises(RoomkitError) as caught:
            rk.profiles.get(made.profile_id)
        self.assertEqual((caught.exception.code, caught.exception.status), ("profile_not_found", 404))

    def test_a_taken_name_and_a_bad_field_are_api_errors_with_request_ids(self) -> None:
        rk = client()
        shared()
        with self.assertRaises(RoomkitError) as taken:
            rk.profiles.create(PROFILE)
        self.assertEqual((taken.exception.code, taken.exception.status), ("profile_name_taken", 409))
        self.assertRegex(taken.exception.request_id or "", UUID)
        with self.assertRaises(RoomkitError) as invalid:
            rk.profiles.create("bad-memory", memory_mb=-1)
        self.assertEqual(invalid.exception.code, "validation_error")
        self.assertIsInstance((invalid.exception.details or {}).get("errors"), list)

    def test_an_unknown_name_is_profile_not_found_naming_the_profiles_there_are(self) -> None:
        with self.assertRaises(RoomkitError) as caught:
            client().room("no-such-profile", "main").get()
        self.assertEqual(caught.exception.code, "profile_not_found")
        self.assertIn("no-such-profile", caught.exception.message)
        self.assertIn("default", caught.exception.message)


class Keys(unittest.TestCase):
    def test_create_list_and_revoke_a_key_then_it_is_refused(self) -> None:
        rk = client()
        made = rk.keys.create(name="py-sdk-test")
        self.assertTrue(made.api_key.startswith("rk_test_"))
        self.assertTrue(made.api_key.startswith(made.prefix))
        listed = rk.keys.list()
        self.assertTrue(all(isinstance(k, ApiKey) for k in listed))
        self.assertIn(made.key_id, [k.key_id for k in listed])
        other = Roomkit(server()[0], made.api_key)
        self.assertEqual(other.usage().organization_id, rk.usage().organization_id)
        rk.keys.revoke(made.key_id)
        with self.assertRaises(RoomkitError) as caught:
            other.usage()
        self.assertEqual((caught.exception.code, caught.exception.status), ("invalid_api_key", 401))

    def test_no_key_is_missing_api_key_and_the_environment_gives_url_and_key(self) -> None:
        saved = {k: os.environ.get(k) for k in ("ROOMKIT_URL", "ROOMKIT_API_KEY")}
        url, key = server()
        try:
            os.environ["ROOMKIT_URL"] = url + "/"
            os.environ.pop("ROOMKIT_API_KEY", None)
            with self.assertRaises(RoomkitError) as caught:
                Roomkit().usage()
            self.assertEqual((caught.exception.code, caught.exception.status), ("missing_api_key", 401))
            os.environ["ROOMKIT_API_KEY"] = f" {key} "
            from_env = Roomkit()
            self.assertEqual(from_env.base_url, url)
            self.assertEqual(from_env.usage().organization_id, client().usage().organization_id)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


class Instances(unittest.TestCase):
    def test_lists_instances_by_profile_name_and_state_page_by_page(self) -> None:
        rk, _room, instance = shared()
        page = rk.instances.list(profile=PROFILE, state="ready", limit=1)
        self.assertEqual([i.instance_id for i in page.instances], [instance.instance_id])
        self.assertEqual(page.instances[0].resources.memory_mb, 512)
        self.assertIn(instance.instance_id, [i.instance_id for i in rk.instances.all(limit=1)])
        self.assertEqual(rk.instances.list(profile="default", state="ready").instances, [])
        self.assertEqual(rk.instances.get(PROFILE, "main").instance_id, instance.instance_id)


class Audit(unittest.TestCase):
    def test_the_trail_records_what_this_client_did(self) -> None:
        rk, room, instance = shared()
        done = room.exec("echo audited")
        page = rk.audit(action="command.run", profile=PROFILE, room_id="main", limit=50)
        self.assertIn(done.command_id, [e.command_id for e in page.events])
        event = next(e for e in page.events if e.command_id == done.command_id)
        self.assertEqual((event.instance_id, event.command, event.exit_code, event.decision), (instance.instance_id, "echo audited", 0, "allowed"))


if __name__ == "__main__":
    unittest.main()
