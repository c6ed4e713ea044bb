"""Snapshots and forks against a real server with real gVisor instances: a snapshot of
the shared instance, an instance started from it in another room, a fork, the
organization's list, and deletion."""
import unittest

from roomkit import ForkResult, RoomkitError, Snapshot

from .support import PROFILE, UUID, shared


class Snapshots(unittest.TestCase):
    def test_a_snapshot_starts_another_room_with_its_files_and_is_listed_then_deleted(self) -> None:
        rk, room, instance = shared()
        room.write_file("snap/state.txt", "before the snapshot")
        snapshot = room.snapshot("py test")
        self.assertIsInstance(snapshot, Snapshot)
        self.assertRegex(snapshot.snapshot_id, UUID)
        self.assertEqual((snapshot.state, snapshot.name, snapshot.instance_id, snapshot.room_id), ("ready", "py test", instance.instance_id, "main"))
        self.assertIs(snapshot.memory_kept, True)
        room.write_file("snap/state.txt", "after the snapshot")
        restored_room = rk.room(PROFILE, "restored")
        try:
            restored = restored_room.create(snapshot_id=snapshot.snapshot_id)
            self.assertEqual((restored.state, restored.snapshot_id), ("ready", snapshot.snapshot_id))
            self.assertNotEqual(restored.instance_id, instance.instance_id)
            self.assertEqual(restored_room.exec("cat snap/state.txt").output, "before the snapshot")
            self.assertIsNone(room.get().snapshot_id)

            listed = rk.snapshots.list(instance_id=instance.instance_id)
            self.assertEqual([s.snapshot_id for s in listed.snapshots], [snapshot.snapshot_id])
            self.assertEqual(rk.snapshots.get(snapshot.snapshot_id).raw, listed.snapshots[0].raw)
            self.assertIn(snapshot.snapshot_id, [s.snapshot_id for s in rk.snapshots.all(limit=1)])
        finally:
            try:
                restored_room.delete()
            finally:
                removed = rk.snapshots.delete(snapshot.snapshot_id)
        self.assertEqual(removed.snapshot_id, snapshot.snapshot_id)
        for call in (lambda: rk.snapshots.get(snapshot.snapshot_id), lambda: restored_room.create(snapshot_id=snapshot.snapshot_id)):
            with self.assertRaises(RoomkitError) as caught:
                call()
            self.assertEqual((caught.exception.code, caught.exception.status), ("snapshot_not_found", 404))

    def test_fork_starts_copies_that_change_apart_and_keeps_its_snapshot_when_asked(self) -> None:
        rk, room, instance = shared()
        room.write_file("fork/state.txt", "forked")
        rooms = [rk.room(PROFILE, "fork-a"), rk.room(PROFILE, "fork-b")]
        forked = None
        try:
            forked = room.fork(["fork-a", "fork-b"], keep_snapshot=True, memory=False)
            self.assertIsInstance(forked, ForkResult)
            self.assertEqual([(i.room_id, i.state) for i in forked.instances], [("fork-a", "ready"), ("fork-b", "ready")])
            assert forked.snapshot is not None
            self.assertIs(forked.snapshot.memory_kept, False)
            self.assertEqual(forked.snapshot.instance_id, instance.instance_id)
            self.assertTrue(all(i.snapshot_id == forked.snapshot.snapshot_id for i in forked.instances))
            rooms[0].exec("echo changed > fork/state.txt")
            self.assertEqual(rooms[0].read_text("fork/state.txt"), "changed\n")
            self.assertEqual(rooms[1].read_text("fork/state.txt"), "forked", "a change in one copy is absent in the other")
            with self.assertRaises(RoomkitError) as occupied:
                room.fork(["fork-b"])
            self.assertEqual((occupied.exception.code, occupied.exception.status), ("room_occupied", 409))
            with self.assertRaises(TypeError):
                room.fork("fork-c")
        finally:
            for r in rooms:
                try:
                    r.delete()
                except RoomkitError:
                    pass
            if forked is not None and forked.snapshot is not None:
                rk.snapshots.delete(forked.snapshot.snapshot_id)


if __name__ == "__main__":
    unittest.main()
