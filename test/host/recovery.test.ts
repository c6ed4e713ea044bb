// Crash recovery on the real host: the real `roomkit serve` with the gVisor runtime is
// killed with SIGKILL (no shutdown code runs) at chosen moments, started again on the
// same data directory, and must then agree with the host: ready instances that still
// run are adopted, half-made ones are failed and removed, an abandoned image build is
// removed with its processes, and in the end nothing of the data directory is left.
// Over 400 lines: each crash moment needs its own set-up and checks, around one server.
//
// Only objects of this test's own data directory are touched: names carrying its host
// tag, its runsc root, mounts under its directories, the server processes it started,
// and the process group roomkit recorded for the image build it started.
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { mountsUnder } from '../../src/host/mounts.ts';
import { run } from '../../src/host/run.ts';
import { ImageStore } from '../../src/images/builder.ts';
import { tableName } from '../../src/network/firewall.ts';
import { runscBinary } from '../../src/runtimes/gvisor/runsc.ts';
import { listHostInterfaces, listNetns } from '../../src/network/netns.ts';
import { TEST_IMAGES_DIR, testDataDir } from '../support/app.ts';
import { type Json, ServedService } from '../support/served-service.ts';
import { hostObjects, instanceNetworkNames, NOTHING } from '../support/host.ts';

const POOL = '10.215.0.0/24';
const MID_STATES = ['network_allocated', 'ftap_created', 'image_generated', 'vm_started'];
const SERVER_ENV = {
  ROOMKIT_RUNTIME: 'gvisor',
  ROOMKIT_NETWORK_POOL: POOL,
  ROOMKIT_IMAGES_DIR: TEST_IMAGES_DIR,
  ROOMKIT_ON_SHUTDOWN: 'stop',
};

interface Instance {
  instance_id: string;
  state: string;
  failure_reason: string | null;
  state_history: { state: string; at: string; reason?: string }[];
}

let svc: ServedService;
let dataDir: string;
let tag: string;
let defaultProfile: string;
/** Every instance made, so the end can check that none left anything. */
const instanceIds = new Set<string>();
/** The image build this test starts: its cache key (unique to this run) and user. */
const buildUser = `crash${randomBytes(4).toString('hex')}`;
let buildKey: string | undefined;
/** A file in the host's /dev/shm that must survive the removal of an abandoned build. */
const shmCanary = `/dev/shm/roomkit-recovery-canary-${process.pid}`;

before(async () => {
  svc = new ServedService(testDataDir('roomkit-recovery-', POOL), SERVER_ENV);
  ({ dataDir, tag } = svc);
  await start();
  const profiles = await api('GET', '/api/profiles');
  assert.equal(profiles.status, 200);
  const found = (profiles.body.profiles as { name: string; profile_id: string }[]).find((p) => p.name === 'default');
  assert.ok(found, 'the first organization has no default profile');
  defaultProfile = found.profile_id;
});

after(async () => {
  // Clean up whatever a failed test left: first the server (by its pid; its shutdown
  // policy stops every instance), then, only when something is still there, this data
  // directory's own host objects.
  if (svc?.running()) await svc.server!.stop();
  svc?.keepLogs();
  await removeAbandonedBuild();
  if (buildKey) rmSync(join(TEST_IMAGES_DIR, buildKey), { recursive: true, force: true });
  rmSync(shmCanary, { force: true });
  if (dataDir && existsSync(dataDir)) {
    await scrubHost();
    const left = mountsUnder(dataDir);
    if (left.length > 0) throw new Error(`not removing ${dataDir}: still mounted: ${left.join(', ')}`);
    rmSync(dataDir, { recursive: true, force: true });
  }
});

// ---------------------------------------------------------------------------------

function start() {
  return svc.start();
}
function ensureRunning() {
  return svc.ensureRunning();
}
function crash() {
  return svc.crash();
}
function logTail(lines?: number) {
  return svc.logTail(lines);
}
function api(method: string, path: string, body?: unknown) {
  return svc.api(method, path, body);
}

const room = (name: string, profile = defaultProfile) => `/api/profile/${profile}/room/${name}`;

async function createReady(name: string, profile = defaultProfile): Promise<Instance> {
  const res = await api('POST', room(name, profile));
  assert.equal(res.status, 201, JSON.stringify(res.body));
  assert.equal(res.body.state, 'ready');
  instanceIds.add(res.body.instance_id);
  return res.body;
}

async function getRoom(name: string, profile = defaultProfile): Promise<{ status: number; body: Json }> {
  return api('GET', room(name, profile));
}

function allInstances(): Promise<Instance[]> {
  return svc.allInstances();
}
function waitFor<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, timeoutMs: number, everyMs = 100): Promise<T> {
  return svc.waitFor(what, probe, timeoutMs, everyMs);
}

/** What the host still holds for one instance (empty lists when nothing). */
async function leftFor(instanceId: string) {
  const names = instanceNetworkNames(dataDir, instanceId);
  const host = await hostObjects(dataDir, [instanceId]);
  return {
    netns: host.netns.filter((n) => n === names.netns),
    interfaces: host.interfaces.filter((i) => i === names.hostIf),
    containers: host.containers.filter((c) => c === instanceId),
    mounts: host.mounts.filter((m) => m.includes(instanceId)),
    cgroups: host.cgroups,
    egressRules: host.egressRules.filter((r) => r === names.hostIf),
    directory: existsSync(join(dataDir, 'instances', instanceId)) ? [join(dataDir, 'instances', instanceId)] : [],
  };
}

const NOTHING_FOR_ONE = { netns: [], interfaces: [], containers: [], mounts: [], cgroups: [], egressRules: [], directory: [] };

/** Waits until the host holds nothing of a deleted instance: a delete answers once its machine is stopped, and the rest is released right after. */
async function releasedFor(instanceId: string): Promise<void> {
  await waitFor(`instance ${instanceId} to be released`, async () => {
    const left = await leftFor(instanceId);
    return JSON.stringify(left) === JSON.stringify(NOTHING_FOR_ONE) ? true : undefined;
  }, 30_000);
  assert.deepEqual(await leftFor(instanceId), NOTHING_FOR_ONE);
}

/** Live processes in a process group, as "pid state command" lines. */
async function processGroup(pgid: number): Promise<string[]> {
  const res = await run('ps', ['-o', 'pid=,stat=,args=', '-g', String(pgid)], { timeoutMs: 10_000 });
  // A zombie runs nothing any more; it only waits for its new parent to reap it.
  return res.stdout.split('\n').map((l) => l.trim()).filter((l) => l !== '' && !/^\d+\s+Z/.test(l));
}

/** mmdebstrap processes whose command line writes into this run's build directories. */
async function buildProcesses(): Promise<string[]> {
  if (!buildKey) return [];
  const res = await run('pgrep', ['-a', '-f', `mmdebstrap.*${join(TEST_IMAGES_DIR, `.build-${buildKey}`)}`], { timeoutMs: 10_000 });
  return res.stdout.split('\n').filter(Boolean);
}

function buildDirs(): string[] {
  if (!buildKey || !existsSync(TEST_IMAGES_DIR)) return [];
  return readdirSync(TEST_IMAGES_DIR)
    .filter((n) => n.startsWith(`.build-${buildKey}-`))
    .map((n) => join(TEST_IMAGES_DIR, n));
}

/**
 * Clean-up for a failed test: kills the process group roomkit recorded for this run's
 * build, unmounts what it left mounted and removes the directory. Another server sharing
 * the image cache would otherwise meet the same leftovers at its start.
 */
async function removeAbandonedBuild(): Promise<void> {
  for (const dir of buildDirs()) {
    try {
      const { pgid } = JSON.parse(readFileSync(join(dir, 'build.json'), 'utf8')) as { pgid?: number };
      // Only while its leader is still this build's mmdebstrap (a pid may be reused).
      if (pgid !== undefined && readFileSync(`/proc/${pgid}/cmdline`, 'utf8').includes(dir)) process.kill(-pgid, 'SIGKILL');
    } catch {
      // no record, or the group is gone
    }
    await new Promise((r) => setTimeout(r, 500));
    for (const point of mountsUnder(dir)) {
      const res = await run('umount', [point], { timeoutMs: 30_000 });
      if (res.code !== 0) await run('umount', ['-l', point], { timeoutMs: 30_000 });
    }
    if (mountsUnder(dir).length === 0) rmSync(dir, { recursive: true, force: true });
  }
}

/** Clean-up for a failed test: removes what this data directory still has on the host. */
async function scrubHost(): Promise<void> {
  const runscRoot = join(dataDir, 'runsc');
  const left = await hostObjects(dataDir, [...instanceIds]);
  if (JSON.stringify({ ...left, egressRules: [] }) === JSON.stringify(NOTHING)) {
    await run('nft', ['delete', 'table', 'inet', tableName(tag)], { timeoutMs: 10_000 });
    return;
  }
  process.stderr.write(`recovery test: cleaning up what was left on the host: ${JSON.stringify(left)}\n`);
  for (const id of left.containers) await run(runscBinary(), [`--root=${runscRoot}`, 'delete', '--force', id], { timeoutMs: 30_000 });
  for (const point of mountsUnder(dataDir)) {
    const res = await run('umount', [point], { timeoutMs: 30_000 });
    if (res.code !== 0) await run('umount', ['-l', point], { timeoutMs: 30_000 });
  }
  for (const name of listNetns(tag)) await run('ip', ['netns', 'del', name], { timeoutMs: 10_000 });
  for (const name of await listHostInterfaces(tag)) await run('ip', ['link', 'del', name], { timeoutMs: 10_000 });
  await run('nft', ['delete', 'table', 'inet', tableName(tag)], { timeoutMs: 10_000 });
  for (const dir of left.cgroups) await run('rmdir', [dir], { timeoutMs: 10_000 });
}

// ---------------------------------------------------------------------------------

describe('crash recovery: roomkit serve killed with SIGKILL and started again', () => {
  it('adopts a ready instance that survived the crash, which then still works', async () => {
    const made = await createReady('r1');
    const id = made.instance_id;
    const names = instanceNetworkNames(dataDir, id);
    const before = await hostObjects(dataDir, [id]);
    assert.ok(before.containers.includes(id) && before.netns.includes(names.netns));
    assert.ok(before.egressRules.includes(names.hostIf), 'the default profile has internet egress');

    await crash();
    // The sandbox outlives the service: nothing of it is stopped by the crash.
    const orphaned = await hostObjects(dataDir, [id]);
    assert.ok(orphaned.containers.includes(id), 'the sandbox died with the service');
    assert.ok(orphaned.sandboxProcesses > 0);

    await start();
    const res = await getRoom('r1');
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.instance_id, id);
    assert.equal(res.body.state, 'ready', `${res.body.failure_reason}\n${logTail()}`);
    assert.equal(res.body.failure_reason, null);
    assert.deepEqual(
      res.body.state_history.map((s: { state: string }) => s.state),
      made.state_history.map((s) => s.state),
      'adoption must not add to the history',
    );
    const adopted = await hostObjects(dataDir, [id]);
    assert.ok(adopted.containers.includes(id), 'its sandbox is gone after the restart');
    assert.ok(adopted.netns.includes(names.netns), 'its network namespace is gone after the restart');
    assert.ok(adopted.interfaces.includes(names.hostIf), 'its veth is gone after the restart');
    // The firewall table is replaced at start; adoption puts its egress back.
    assert.ok(adopted.egressRules.includes(names.hostIf), `its egress rule was not restored: ${JSON.stringify(adopted.egressRules)}`);

    // The runtime still controls it: deleting it works and removes all of it.
    const deleted = await api('DELETE', room('r1'));
    assert.equal(deleted.status, 200, JSON.stringify(deleted.body));
    assert.equal(deleted.body.state, 'stopped');
    await releasedFor(id);
  });

  it('thaws a writable layer a snapshot left frozen at the crash, so the adopted instance writes again', async () => {
    const made = await createReady('frozen');
    const layer = join(dataDir, 'instances', made.instance_id, 'layer');
    // As a crash during a snapshot's copy leaves it: the layer's file system frozen.
    const frozen = await run('fsfreeze', ['--freeze', layer], { timeoutMs: 10_000 });
    assert.equal(frozen.code, 0, frozen.stderr);
    try {
      await crash();
      await start();
      const res = await api('POST', `${room('frozen')}/command`, { command: 'echo after > after.txt && cat after.txt', timeout_s: 20 });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal(res.body.result.exit_code, 0, JSON.stringify(res.body.result));
      assert.equal(res.body.result.output, 'after\n');
    } finally {
      await run('fsfreeze', ['--unfreeze', layer], { timeoutMs: 10_000 });
    }
    const deleted = await api('DELETE', room('frozen'));
    assert.equal(deleted.status, 200, JSON.stringify(deleted.body));
    await releasedFor(made.instance_id);
  });

  it('adopts an instance whose command was running at the crash, records the command as interrupted and ends its processes', async () => {
    const made = await createReady('r-exec');
    const id = made.instance_id;
    // A command that would run for ten minutes; its request dies with the server.
    const pending = api('POST', `${room('r-exec')}/command`, { command: 'echo started > /tmp/started; sleep 600' }).catch((err: Error) => err);
    let started = false;
    for (const deadline = Date.now() + 20_000; !started && Date.now() < deadline; ) {
      await new Promise((r) => setTimeout(r, 200));
      const check = await api('GET', `${room('r-exec')}/file//tmp/started`);
      started = check.status === 200;
    }
    assert.ok(started, `the command did not start\n${logTail()}`);
    await crash();
    assert.ok((await pending) instanceof Error, 'the request should have died with the server');

    await start();
    const res = await getRoom('r-exec');
    assert.equal(res.body.state, 'ready', `${res.body.failure_reason}\n${logTail()}`);
    assert.equal(res.body.instance_id, id);
    const history = await api('GET', `${room('r-exec')}/commands`);
    assert.equal(history.status, 200, JSON.stringify(history.body));
    const interrupted = history.body.commands.find((c: { command: string }) => c.command.includes('sleep 600'));
    assert.equal(interrupted?.state, 'interrupted', JSON.stringify(history.body));
    const after = await api('POST', `${room('r-exec')}/command`, { command: 'ps -eo args | grep -c "^sleep 600" || true; echo alive' });
    assert.equal(after.status, 200, JSON.stringify(after.body));
    assert.equal(after.body.result.output, '0\nalive\n', 'the interrupted command\'s process is still running');

    const deleted = await api('DELETE', room('r-exec'));
    assert.equal(deleted.status, 200, JSON.stringify(deleted.body));
    await releasedFor(id);
  });

  it('fails and removes an instance whose image was being built, with the abandoned build', async () => {
    const profile = await api('POST', '/api/profiles', {
      name: 'crash-build',
      packages: ['cowsay'],
      user: buildUser,
      memory_mb: 512,
      disk_mb: 256,
      network: { egress: 'none' },
    });
    assert.equal(profile.status, 201, JSON.stringify(profile.body));
    const profileId: string = profile.body.profile_id;
    // A user name of this run's own makes an image key no cache has: the build must run.
    buildKey = ImageStore.keyOf({ image: profile.body.image, packages: profile.body.packages, user: profile.body.user, home: profile.body.home });
    assert.ok(!existsSync(join(TEST_IMAGES_DIR, buildKey)));

    const created = await api('POST', room('building', profileId), { wait: false });
    assert.equal(created.status, 202, JSON.stringify(created.body));
    const id: string = created.body.instance_id;
    instanceIds.add(id);

    // Wait until mmdebstrap works inside the new root (its mounts are up): most of a
    // build's time is spent so, so that is where a crash most likely finds it.
    const buildDir = await waitFor('the image build to begin', () => buildDirs()[0], 30_000);
    const pgid = await waitFor(
      'the build to record its process group',
      () => {
        try {
          return (JSON.parse(readFileSync(join(buildDir, 'build.json'), 'utf8')) as { pgid?: number }).pgid;
        } catch {
          return undefined;
        }
      },
      30_000,
    );
    await waitFor('mmdebstrap to mount into the new root', () => (mountsUnder(buildDir).length > 0 ? true : undefined), 60_000, 50);
    const mountsAtCrash = mountsUnder(buildDir);
    const state = await getRoom('building', profileId);
    assert.equal(state.body.state, 'active', 'still building its image');
    writeFileSync(shmCanary, 'must survive\n');

    await crash();
    const groupAfterCrash = await processGroup(pgid);
    process.stderr.write(
      `recovery test: killed during the image build; mounts in the build: ${mountsAtCrash.join(' ')}; ` +
        `processes of its group right after the crash: ${groupAfterCrash.length}\n`,
    );

    try {
      await start();
      const res = await getRoom('building', profileId);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal(res.body.instance_id, id);
      assert.equal(res.body.state, 'failed');
      assert.match(res.body.failure_reason, /the service stopped while the instance was active/);
      assert.deepEqual(await leftFor(id), NOTHING_FOR_ONE);

      // The abandoned build: its processes are gone, nothing stays mounted, its directory
      // is removed, and what its mounts led to on the host is untouched.
      const snapshot = async () => ({
        group: await processGroup(pgid),
        mmdebstrap: await buildProcesses(),
        mounts: mountsUnder(buildDir),
        directory: existsSync(buildDir),
      });
      const clean = { group: [], mmdebstrap: [], mounts: [], directory: false };
      let left = await snapshot();
      for (let deadline = Date.now() + 5_000; Date.now() < deadline && JSON.stringify(left) !== JSON.stringify(clean); ) {
        await new Promise((r) => setTimeout(r, 250));
        left = await snapshot();
      }
      assert.deepEqual(left, clean, 'the abandoned build was not cleaned up');
      assert.ok(existsSync(shmCanary), "removing the abandoned build deleted files in the host's /dev/shm");
    } finally {
      // What the restart left of the build, for the report when an assertion failed.
      process.stderr.write(
        `recovery test: after the restart: build directory ${existsSync(buildDir) ? 'still there' : 'removed'}; ` +
          `mounts left in it: ${mountsUnder(buildDir).length}; processes left in its group: ${JSON.stringify(await processGroup(pgid))}; ` +
          `/dev/shm canary ${existsSync(shmCanary) ? 'intact' : 'DELETED'}\n`,
      );
      // Leftovers of the build would stop every later start that shares the image cache.
      await removeAbandonedBuild();
    }

    // The room works again: a new instance, built from scratch, becomes ready.
    await ensureRunning();
    const again = await createReady('building', profileId);
    assert.notEqual(again.instance_id, id);
    assert.ok((await hostObjects(dataDir, [again.instance_id])).containers.includes(again.instance_id));
  });

  it('fails and removes instances killed half-way through host provisioning', async () => {
    await ensureRunning();
    // Several at once, polled tightly, so that some are caught between their steps.
    const rooms = ['h1', 'h2', 'h3'];
    const ids = new Map<string, string>();
    await Promise.all(
      rooms.map(async (name) => {
        const res = await api('POST', room(name), { wait: false });
        assert.equal(res.status, 202, JSON.stringify(res.body));
        ids.set(name, res.body.instance_id);
        instanceIds.add(res.body.instance_id);
      }),
    );
    // Preferably once one has its mounts and its sandbox in the making (image_generated,
    // vm_started: the longest steps, some 100 ms each), the most a crash can leave.
    const seen = await waitFor(
      'an instance between two provisioning steps',
      async () => {
        const states = await Promise.all(rooms.map(async (name) => (await getRoom(name)).body.state as string));
        const caught = states.some((s) => s === 'image_generated' || s === 'vm_started');
        const over = states.every((s) => s === 'ready' || s === 'failed');
        return caught || over ? states : undefined;
      },
      60_000,
      5,
    );
    await crash();
    const atCrash = await hostObjects(dataDir, [...ids.values()]);
    process.stderr.write(
      `recovery test: killed with the instances in ${seen.join(', ')}; the crash left ${atCrash.netns.length} namespaces, ` +
        `${atCrash.mounts.length} mounts, ${atCrash.containers.length} sandboxes\n`,
    );

    await start();
    let failedMidWay = 0;
    for (const name of rooms) {
      const id = ids.get(name) ?? '';
      const res = await getRoom(name);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal(res.body.instance_id, id);
      if (res.body.state === 'ready') continue; // it got there before the kill: adopted
      assert.equal(res.body.state, 'failed', `room ${name}: ${JSON.stringify(res.body)}`);
      const match = /the service stopped while the instance was (\w+)/.exec(res.body.failure_reason ?? '');
      assert.ok(match, `room ${name}: ${res.body.failure_reason}`);
      if (MID_STATES.includes(match[1] ?? '')) failedMidWay++;
      assert.deepEqual(await leftFor(id), NOTHING_FOR_ONE, `room ${name} (${match[1]}) left something`);
    }
    assert.ok(failedMidWay > 0, `no instance was failed mid-way; states seen at the kill: ${seen.join(', ')}`);
    // The address pool gave the failed instances' addresses back: every room works again.
    for (const name of rooms) {
      const del = await api('DELETE', room(name));
      assert.equal(del.status, 200, JSON.stringify(del.body));
      assert.ok(['stopped', 'failed'].includes(del.body.state));
      assert.equal((await getRoom(name)).status, 404);
    }
    for (const name of rooms) await createReady(name);
  });

  it('finishes removing an instance whose delete was under way', async () => {
    await ensureRunning();
    const made = await createReady('r3');
    const id = made.instance_id;
    let answered: number | string | undefined;
    const pending = api('DELETE', room('r3')).then(
      (r) => (answered = r.status),
      (err: Error) => (answered = `no answer (${err.message})`),
    );
    // The delete has begun once the room no longer shows the instance (it is `stopping`
    // and hidden). It answers once the sandbox is stopped, within milliseconds; the
    // release of the rest takes longer, so the kill lands in the stop or in the release.
    await waitFor('the delete to begin', async () => ((await getRoom('r3')).status === 404 ? true : undefined), 30_000, 2);
    await crash();
    await pending;
    const atCrash = await leftFor(id);
    process.stderr.write(`recovery test: killed during a delete; the DELETE answered: ${answered}; left at the crash: ${JSON.stringify(atCrash)}\n`);
    assert.notDeepEqual(atCrash, NOTHING_FOR_ONE, 'the delete had already finished: the kill did not catch it under way');
    assert.ok(typeof answered === 'string' || answered === 200, `the DELETE answered ${answered}`);

    await start();
    const res = await getRoom('r3');
    assert.ok(res.status === 404 || ['stopped', 'failed'].includes(res.body.state), JSON.stringify(res.body));
    const record = (await allInstances()).find((i) => i.instance_id === id);
    assert.ok(record);
    // The user asked for the delete: the restart completes it rather than calling it a failure.
    assert.equal(record.state, 'stopped', `after the restart it is ${record.state}: ${record.failure_reason}`);
    process.stderr.write(`recovery test: the interrupted delete ended as ${record.state}: ${record.failure_reason}\n`);
    assert.deepEqual(await leftFor(id), NOTHING_FOR_ONE);
    // The room is free for a new instance.
    const again = await createReady('r3');
    assert.notEqual(again.instance_id, id);
  });

  it('leaves nothing of the data directory on the host after SIGTERM with the stop policy', async () => {
    await ensureRunning();
    assert.ok(svc.server);
    const live = (await allInstances()).filter((i) => i.state === 'ready');
    assert.ok(live.length > 0, 'some instances should be running to be stopped');
    const stopped = await svc.server.stop();
    assert.equal(stopped.code, 0, stopped.stderr);
    const left = await hostObjects(dataDir, [...instanceIds]);
    assert.deepEqual(left, NOTHING);
    const tables = await run('nft', ['list', 'tables'], { timeoutMs: 10_000 });
    assert.doesNotMatch(tables.stdout, new RegExp(`\\b${tableName(tag)}\\b`));
  });
});
