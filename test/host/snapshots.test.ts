// Snapshots and forks on real gVisor instances over the API (their memory:
// fork-memory.test.ts): a snapshot restored into
// another room has the files (created ones, an image file changed and one deleted), its
// own instance id and address; fork into 3 rooms gives 3 independent instances and keeps
// no snapshot; a refused fork (a room taken, a quota for all its copies) starts none and keeps no snapshot; a paused instance's snapshot leaves it paused;
// a layer with undo points (btrfs) is restored beside its source and keeps undo working;
// another organization cannot see or use a snapshot id; the quota; what a stop of the
// service leaves half made is removed at the next start; and a copy that would leave the
// host's disk too full is refused.
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { createLogger } from '../../src/log.ts';
import { run as runOnHost } from '../../src/host/run.ts';
import { InstanceHandle } from '../../src/runtimes/gvisor/instance-handle.ts';
import { LayerSnapshots } from '../../src/runtimes/gvisor/snapshots.ts';
import { HostOutOfSpace } from '../../src/runtimes/types.ts';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';

let t: TestApp;
let org: TestOrg;
let other: TestOrg;
let profile: string;
let undoProfile: string;

const room = (name: string, profileId = profile) => `/api/profile/${profileId}/room/${name}`;

async function api(method: 'GET' | 'POST' | 'DELETE', url: string, payload?: Record<string, unknown>, who: TestOrg = org) {
  return t.app.inject({ method, url, headers: who.headers, ...(payload ? { payload } : {}) });
}

async function run(name: string, command: string, profileId = profile): Promise<string> {
  const res = await api('POST', `${room(name, profileId)}/command`, { command });
  assert.equal(res.statusCode, 200, res.body);
  assert.equal(res.json().result.exit_code, 0, res.json().result.output);
  return res.json().result.output;
}

async function snapshot(name: string, profileId = profile, body: Record<string, unknown> = {}) {
  const res = await api('POST', `${room(name, profileId)}/snapshots`, body);
  assert.equal(res.statusCode, 201, res.body);
  return res.json();
}

const snapshotsDir = () => join(t.dataDir, 'snapshots');

before(async () => {
  t = await startTestApp({ gvisorPool: '10.254.0.0/24' });
  assert.ok('runtime' in t.services.runtime, 'the gVisor runtime is not available');
  org = await t.newOrg();
  other = await t.newOrg();
  profile = await t.createProfile(org, { name: 'snap', memory_mb: 512, disk_mb: 512, network: { egress: 'none' }, command_timeout_s: 60 });
  undoProfile = await t.createProfile(org, { name: 'snap-undo', keep_undo: true, memory_mb: 512, disk_mb: 512, network: { egress: 'none' } });
  const created = await api('POST', room('src'));
  assert.equal(created.statusCode, 201, created.body);
  // A created file, an image file changed as root, and an image file deleted.
  await run('src', 'mkdir -p work && echo from-src > work/note && head -c 300000 /dev/urandom > work/blob && md5sum work/blob > work/blob.md5');
  await run('src', 'echo changed | sudo tee /etc/motd > /dev/null && sudo rm /etc/issue.net');
});

after(async () => {
  if (!t) return;
  const live = await api('GET', '/api/instances?limit=50');
  for (const i of live.json().instances ?? []) {
    if (i.state !== 'stopped' && i.state !== 'failed') await api('DELETE', room(i.room_id, i.profile_id));
  }
  await t.closeLeavingNothing();
});

describe('a snapshot', () => {
  let snapshotId: string;

  it('saves a ready instance\'s files, costing its changes on disk, not its size', async () => {
    const taken = await snapshot('src', profile, { name: 'after-setup' });
    snapshotId = taken.snapshot_id;
    assert.equal(taken.state, 'ready');
    assert.equal(taken.name, 'after-setup');
    // A running instance's memory is kept by default (fork-memory.test.ts looks at its processes).
    assert.equal(taken.memory_kept, true);
    assert.equal(taken.disk_mb, 512);
    assert.equal(taken.room_id, 'src');
    // The layer is sparse: what the instance wrote (300 kB) plus ext4's own metadata, not
    // 512 MiB; its saved memory is what the guest holds (tens of MiB), not its memory_mb.
    assert.ok(taken.disk_bytes > 300_000 && taken.disk_bytes < 200 * 1024 * 1024, `disk_bytes ${taken.disk_bytes}`);
    assert.deepEqual(readdirSync(join(snapshotsDir(), snapshotId)).sort(), ['layer.img', 'memory', 'snapshot.json']);
    // Files only when asked: the layer alone, which costs the instance's changes.
    const files = await snapshot('src', profile, { memory: false });
    assert.equal(files.memory_kept, false);
    assert.ok(files.disk_bytes > 300_000 && files.disk_bytes < 32 * 1024 * 1024, `disk_bytes ${files.disk_bytes}`);
    assert.deepEqual(readdirSync(join(snapshotsDir(), files.snapshot_id)).sort(), ['layer.img', 'snapshot.json']);
    assert.equal((await api('DELETE', `/api/snapshots/${files.snapshot_id}`)).statusCode, 200);
    // The source goes on as it was.
    assert.equal((await api('GET', room('src'))).json().state, 'ready');
    assert.match(await run('src', 'cat work/note'), /from-src/);
    const listed = await api('GET', '/api/snapshots');
    assert.deepEqual(listed.json().snapshots.map((s: { snapshot_id: string }) => s.snapshot_id), [snapshotId]);
    assert.equal((await api('GET', '/api/usage')).json().quotas.snapshots.used, 1);
  });

  it('starts an instance in another room with the files, its own id and its own address', async () => {
    const created = await api('POST', room('copy'), { snapshot_id: snapshotId });
    assert.equal(created.statusCode, 201, created.body);
    const copy = created.json();
    assert.equal(copy.snapshot_id, snapshotId);
    assert.equal(copy.resources.disk_mb, 512);
    const source = (await api('GET', room('src'))).json();
    assert.notEqual(copy.instance_id, source.instance_id);
    assert.equal(await run('copy', 'cat work/note; md5sum -c work/blob.md5; cat /etc/motd; test -e /etc/issue.net || echo issue.net-absent'), 'from-src\nwork/blob: OK\nchanged\nissue.net-absent\n');
    const [srcAddress, copyAddress] = [await run('src', 'hostname -I'), await run('copy', 'hostname -I')];
    assert.match(copyAddress, /^10\.254\.0\.\d+/);
    assert.notEqual(copyAddress.trim(), srcAddress.trim());
    // A retry of the same create answers the same instance; one from another snapshot is refused.
    const again = await api('POST', room('copy'), { snapshot_id: snapshotId });
    assert.equal(again.statusCode, 200);
    assert.equal(again.json().instance_id, copy.instance_id);
    const occupied = await api('POST', room('src'), { snapshot_id: snapshotId });
    assert.equal(occupied.statusCode, 409);
    assert.equal(occupied.json().error, 'room_occupied');
    assert.match(occupied.json().message, /DELETE \/api\/profile\//);
  });

  it('is not visible to, nor usable by, another organization', async () => {
    const otherProfile = (await api('GET', '/api/profiles', undefined, other)).json().profiles[0].profile_id;
    for (const res of [
      await api('POST', `/api/profile/${otherProfile}/room/steal`, { snapshot_id: snapshotId }, other),
      await api('GET', `/api/snapshots/${snapshotId}`, undefined, other),
      await api('DELETE', `/api/snapshots/${snapshotId}`, undefined, other),
    ]) {
      assert.equal(res.statusCode, 404, res.body);
      assert.equal(res.json().error, 'snapshot_not_found');
    }
    assert.deepEqual((await api('GET', '/api/snapshots', undefined, other)).json().snapshots, []);
    assert.equal((await api('GET', `/api/profile/${otherProfile}/room/steal`, undefined, other)).statusCode, 404);
    assert.equal((await api('GET', `/api/snapshots/${snapshotId}`)).statusCode, 200);
  });

  it('of a paused instance leaves it paused; deleting a snapshot frees its files and spares its instances', async () => {
    await run('copy', 'echo from-copy > work/copy-only');
    const paused = await api('POST', `${room('copy')}/pause`);
    assert.equal(paused.json().state, 'paused', paused.body);
    const taken = await snapshot('copy');
    assert.equal((await api('GET', room('copy'))).json().state, 'paused');
    // Its pause kept its memory: so does the snapshot, a copy of that saved memory.
    assert.equal(taken.memory_kept, true);
    const second = await api('POST', room('copy2'), { snapshot_id: taken.snapshot_id });
    assert.equal(second.statusCode, 201, second.body);
    assert.equal(await run('copy2', 'cat work/note work/copy-only'), 'from-src\nfrom-copy\n');

    const deleted = await api('DELETE', `/api/snapshots/${taken.snapshot_id}`);
    assert.equal(deleted.statusCode, 200, deleted.body);
    assert.equal(existsSync(join(snapshotsDir(), taken.snapshot_id)), false);
    assert.equal((await api('GET', `/api/snapshots/${taken.snapshot_id}`)).json().error, 'snapshot_not_found');
    assert.equal((await api('POST', room('copy3'), { snapshot_id: taken.snapshot_id })).json().error, 'snapshot_not_found');
    assert.equal(await run('copy2', 'cat work/copy-only'), 'from-copy\n');
  });

  it('counts against the organization\'s snapshots quota', async () => {
    const used = (await api('GET', '/api/usage')).json().quotas.snapshots.used;
    await t.services.quotas.setOverrides(org.organizationId, { snapshots: used });
    try {
      const refused = await api('POST', `${room('src')}/snapshots`);
      assert.equal(refused.statusCode, 403, refused.body);
      assert.equal(refused.json().error, 'quota_exceeded');
      assert.equal(refused.json().details.quota, 'snapshots');
      assert.equal((await api('GET', '/api/snapshots')).json().snapshots.length, used);
    } finally {
      await t.services.quotas.setOverrides(org.organizationId, { snapshots: null });
    }
  });
});

describe('fork', () => {
  it('into 3 rooms gives 3 independent instances, and keeps no snapshot', async () => {
    const before = (await api('GET', '/api/snapshots')).json().snapshots.length;
    const res = await api('POST', `${room('src')}/fork`, { rooms: ['f1', 'f2', 'f3'] });
    assert.equal(res.statusCode, 201, res.body);
    const { instances, snapshot: kept } = res.json();
    assert.equal(kept, null);
    assert.deepEqual(instances.map((i: { room_id: string; state: string }) => [i.room_id, i.state]), [['f1', 'ready'], ['f2', 'ready'], ['f3', 'ready']]);
    assert.equal(new Set(instances.map((i: { instance_id: string }) => i.instance_id)).size, 3);
    for (const name of ['f1', 'f2', 'f3']) assert.equal(await run(name, 'cat work/note'), 'from-src\n');
    await run('f1', 'echo only-f1 > work/mine');
    for (const name of ['f2', 'f3', 'src']) assert.equal(await run(name, 'test -e work/mine || echo absent'), 'absent\n');
    assert.equal((await api('GET', '/api/snapshots')).json().snapshots.length, before);
    assert.equal(readdirSync(snapshotsDir()).length, before);
  });

  it('is refused as a whole when one room has a live instance: no copy starts', async () => {
    const res = await api('POST', `${room('src')}/fork`, { rooms: ['f4', 'f1'] });
    assert.equal(res.statusCode, 409, res.body);
    assert.equal(res.json().error, 'room_occupied');
    assert.match(res.json().message, /room "f1"/);
    assert.equal((await api('GET', room('f4'))).statusCode, 404);
    for (const body of [{ rooms: [] }, { rooms: ['a', 'a'] }, { rooms: ['bad/room'] }, { rooms: Array.from({ length: 21 }, (_, i) => `r${i}`) }]) {
      const bad = await api('POST', `${room('src')}/fork`, body);
      assert.equal(bad.statusCode, 400, JSON.stringify(body));
      assert.equal(bad.json().error, 'validation_error');
    }
  });

  it('is admitted as a whole: over the instances quota by one copy, none starts and no snapshot is kept, even one asked for', async () => {
    const usage = (await api('GET', '/api/usage')).json().quotas;
    const snapshotsBefore = usage.snapshots.used;
    await t.services.quotas.setOverrides(org.organizationId, { instances: usage.instances.used + 2 });
    try {
      const refused = await api('POST', `${room('src')}/fork`, { rooms: ['q1', 'q2', 'q3'], keep_snapshot: true });
      assert.equal(refused.statusCode, 403, refused.body);
      assert.equal(refused.json().error, 'quota_exceeded');
      assert.deepEqual([refused.json().details.quota, refused.json().details.requested], ['instances', 3]);
      for (const name of ['q1', 'q2', 'q3']) assert.equal((await api('GET', room(name))).statusCode, 404, name);
      assert.equal((await api('GET', '/api/snapshots')).json().snapshots.length, snapshotsBefore);
      assert.equal(readdirSync(snapshotsDir()).length, snapshotsBefore);
    } finally {
      await t.services.quotas.setOverrides(org.organizationId, { instances: null });
    }
  });
});

describe('a layer with undo points', () => {
  it('is restored beside its source, without the source\'s undo points, and reverts its own commands', async () => {
    const created = await api('POST', room('u-src', undoProfile));
    assert.equal(created.statusCode, 201, created.body);
    await run('u-src', 'echo v1 > f.txt', undoProfile);
    const taken = await snapshot('u-src', undoProfile);
    const copy = await api('POST', room('u-copy', undoProfile), { snapshot_id: taken.snapshot_id });
    assert.equal(copy.statusCode, 201, copy.body);
    // Both btrfs layers are mounted at once (the copy got a file system id of its own).
    const copyId = copy.json().instance_id;
    assert.deepEqual(readdirSync(join(t.dataDir, 'instances', copyId, 'layer', 'undo')), []);
    const changed = await api('POST', `${room('u-copy', undoProfile)}/command`, { command: 'cat f.txt; echo v2 > f.txt' });
    assert.equal(changed.json().result.output, 'v1\n');
    const reverted = await api('POST', `${room('u-copy', undoProfile)}/commands/${changed.json().command_id}/revert`);
    assert.equal(reverted.statusCode, 200, reverted.body);
    assert.equal(await run('u-copy', 'cat f.txt', undoProfile), 'v1\n');
    assert.equal(await run('u-src', 'cat f.txt', undoProfile), 'v1\n');
    await api('DELETE', `/api/snapshots/${taken.snapshot_id}`);
  });
});

describe('after a stop of the service', () => {
  it('removes a snapshot it was still taking, and files the store does not know', async () => {
    const half = randomUUID();
    await t.services.db
      .insertInto('snapshots')
      .values({
        id: half,
        organization_id: org.organizationId,
        name: null,
        state: 'creating',
        source_instance_id: randomUUID(),
        profile_id: profile,
        room_id: 'src',
        runtime: 'gvisor',
        // A snapshot keeps the whole spec of its source (here its profile's).
        spec: (await t.services.db.selectFrom('profiles').select('spec').where('id', '=', profile).executeTakeFirstOrThrow()).spec,
        memory_kept: 0,
        disk_bytes: 0,
        created_at: new Date().toISOString(),
        deleted_at: null,
        node_id: t.services.nodeId,
      })
      .execute();
    const stray = randomUUID();
    mkdirSync(join(snapshotsDir(), half));
    mkdirSync(join(snapshotsDir(), stray));
    // The one being taken is listed, as `creating`, until the next start removes it.
    const listed = (await api('GET', '/api/snapshots')).json().snapshots;
    assert.equal(listed.find((s: { snapshot_id: string }) => s.snapshot_id === half)?.state, 'creating');
    const kept = listed.filter((s: { snapshot_id: string }) => s.snapshot_id !== half).map((s: { snapshot_id: string }) => s.snapshot_id);
    await t.services.snapshots.reconcile();
    assert.equal(existsSync(join(snapshotsDir(), half)), false);
    assert.equal(existsSync(join(snapshotsDir(), stray)), false);
    assert.equal(await t.services.db.selectFrom('snapshots').select('id').where('id', '=', half).executeTakeFirst(), undefined);
    assert.deepEqual((await api('GET', '/api/snapshots')).json().snapshots.map((s: { snapshot_id: string }) => s.snapshot_id), kept);
    for (const id of kept) assert.ok(existsSync(join(snapshotsDir(), id, 'layer.img')), id);
  });
});

describe('a snapshot\'s copy', () => {
  it('is refused when it would leave the data directory\'s disk too full, and taken where there is room', async () => {
    // A paused instance's layer (not mounted, so nothing to freeze): an 8 MB file and its record.
    const make = (dataDir: string) => {
      const h = new InstanceHandle(join(dataDir, 'instances'), 'test', randomUUID());
      mkdirSync(h.dir, { recursive: true });
      writeFileSync(h.diskImage, Buffer.alloc(8 * 1024 * 1024, 1));
      h.writeMeta({ instanceId: h.id, imageKey: 'k', netns: 'n', hostIf: 'h', guestIf: 'g', home: '/home/user', egress: 'none', memoryMb: 256 });
      return h;
    };
    const log = createLogger('silent');
    const small = mkdtempSync(join(tmpdir(), 'roomkit-snapshot-space-'));
    const roomy = mkdtempSync(join(t.dataDir, 'space-'));
    try {
      // 64 MB of disk: far below the 1 GiB a copy must leave free.
      const mounted = await runOnHost('mount', ['-t', 'tmpfs', '-o', 'size=64m', 'tmpfs', small], { timeoutMs: 10_000 });
      assert.equal(mounted.code, 0, mounted.stderr);
      const tight = new LayerSnapshots(small, log);
      const id = randomUUID();
      await assert.rejects(tight.save(make(small), id, async () => {}), (err: unknown) => {
        assert.ok(err instanceof HostOutOfSpace);
        assert.match(err.message, /must stay free/);
        return true;
      });
      assert.deepEqual(tight.list(), []);
      // The same copy where there is room.
      const ok = new LayerSnapshots(roomy, log);
      const taken = await ok.save(make(roomy), id, async () => {});
      assert.ok(taken.diskBytes >= 8 * 1024 * 1024);
      assert.deepEqual(ok.list(), [id]);
    } finally {
      await runOnHost('umount', [small], { timeoutMs: 10_000 });
      rmSync(small, { recursive: true, force: true });
      rmSync(roomy, { recursive: true, force: true });
    }
  });
});
