// Pause and resume on the real host: the real `roomkit serve` with the gVisor runtime.
// A pause keeps an instance's files (and, by default where the runtime can, its memory
// and processes) and holds no machine (no sandbox or cgroups on the host; its network
// and mounts stay for its resume); a resume, or any command on a paused instance,
// brings it back: a background process keeps its pid and what it held in memory, a
// server in it answers without being started again; a saved memory that cannot be
// restored falls back to the files; idle instances are paused and paused ones removed
// after their retention; a kill -9 of the service during a pause or a resume leaves the
// instance paused (and resumable) with nothing of a half-made machine on the host.
// Instances are shared by tests where isolation allows, since each takes real time to
// make.
//
// Only objects of this test's own data directory are touched (names carrying its host
// tag, its runsc root, mounts under it, the server processes it started).
import assert from 'node:assert/strict';
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { mountsUnder } from '../../src/host/mounts.ts';
import { run } from '../../src/host/run.ts';
import { tableName } from '../../src/network/firewall.ts';
import { listHostInterfaces, listNetns } from '../../src/network/netns.ts';
import { TEST_IMAGES_DIR, testDataDir } from '../support/app.ts';
import { type Json, ServedService } from '../support/served-service.ts';
import { hostObjects, instanceNetworkNames, NOTHING } from '../support/host.ts';

const POOL = '10.245.0.0/25';
const SERVER_ENV = {
  ROOMKIT_RUNTIME: 'gvisor',
  ROOMKIT_NETWORK_POOL: POOL,
  ROOMKIT_IMAGES_DIR: TEST_IMAGES_DIR,
  ROOMKIT_ON_SHUTDOWN: 'stop',
  ROOMKIT_EXPIRY_CHECK_INTERVAL_MS: '300',
};

let svc: ServedService;
let dataDir: string;
let tag: string;
let profile: string;
const instanceIds = new Set<string>();

before(async () => {
  svc = new ServedService(testDataDir('roomkit-pause-', POOL), SERVER_ENV);
  ({ dataDir, tag } = svc);
  await svc.start();
  const res = await api('POST', '/api/profiles', { name: 'small', memory_mb: 512, disk_mb: 512, network: { egress: 'none' }, idle_timeout_s: 0 });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  profile = res.body.profile_id;
});

after(async () => {
  if (svc?.running()) {
    // Paused instances outlive a shutdown: delete every live one first.
    for (const instance of await allInstances().catch(() => [])) {
      if (!['stopped', 'failed'].includes(instance.state)) await api('DELETE', `/api/profile/${instance.profile_id}/room/${instance.room_id}`);
    }
    await svc.server!.stop();
  }
  svc?.keepLogs();
  if (dataDir && existsSync(dataDir)) {
    const left = await hostObjects(dataDir, [...instanceIds]);
    const clean = JSON.stringify({ ...left, egressRules: [] }) === JSON.stringify(NOTHING);
    if (!clean) {
      process.stderr.write(`pause test: cleaning up what was left on the host: ${JSON.stringify(left)}\n`);
      for (const id of left.containers) await run('runsc', [`--root=${join(dataDir, 'runsc')}`, 'delete', '--force', id], { timeoutMs: 30_000 });
      for (const point of mountsUnder(dataDir)) await run('umount', ['-l', point], { timeoutMs: 30_000 });
      for (const name of listNetns(tag)) await run('ip', ['netns', 'del', name], { timeoutMs: 10_000 });
      for (const name of await listHostInterfaces(tag)) await run('ip', ['link', 'del', name], { timeoutMs: 10_000 });
      for (const dir of left.cgroups) await run('rmdir', [dir], { timeoutMs: 10_000 });
    }
    await run('nft', ['delete', 'table', 'inet', tableName(tag)], { timeoutMs: 10_000 });
    if (mountsUnder(dataDir).length === 0) rmSync(dataDir, { recursive: true, force: true });
    assert.ok(clean, `the host still held objects of the test's instances: ${JSON.stringify(left)}`);
  }
});

function start() {
  return svc.start();
}
function api(method: string, path: string, body?: unknown) {
  return svc.api(method, path, body);
}
function allInstances() {
  return svc.allInstances();
}
function waitFor<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs: number, everyMs = 50): Promise<T> {
  return svc.waitFor(what, probe, timeoutMs, everyMs);
}

const room = (name: string, p = profile) => `/api/profile/${p}/room/${name}`;

async function createReady(name: string, p = profile): Promise<Json> {
  const res = await api('POST', room(name, p));
  assert.equal(res.status, 201, JSON.stringify(res.body));
  instanceIds.add(res.body.instance_id);
  return res.body;
}

async function command(name: string, text: string): Promise<Json> {
  const res = await api('POST', `${room(name)}/command`, { command: text });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body.result;
}

/** The instance's machine on the host: sandbox, its processes' cgroups, namespace, veth, mounts, egress rule. */
async function machineOf(instanceId: string) {
  const names = instanceNetworkNames(dataDir, instanceId);
  const host = await hostObjects(dataDir, [instanceId]);
  return {
    containers: host.containers.filter((c) => c === instanceId),
    cgroups: host.cgroups,
    netns: host.netns.filter((n) => n === names.netns),
    interfaces: host.interfaces.filter((i) => i === names.hostIf),
    mounts: host.mounts.filter((m) => m.includes(instanceId)),
    egressRules: host.egressRules.filter((r) => r === names.hostIf),
  };
}
const NO_MACHINE = { containers: [], cgroups: [], netns: [], interfaces: [], mounts: [], egressRules: [] };

/**
 * A paused instance holds no machine: at once no process of its sandbox runs; runsc's
 * record and the cgroups go once the dead sandbox has been reaped. Its network
 * (namespace and veth, on its kept address; these profiles have no egress rule) and its
 * mounts (the writable layer and the overlay root over the image) stay for its resume,
 * until it is deleted.
 */
async function assertNoMachine(instanceId: string): Promise<void> {
  const names = instanceNetworkNames(dataDir, instanceId);
  const dir = join(dataDir, 'instances', instanceId);
  const kept = { mounts: [join(dir, 'rootfs'), join(dir, 'layer')], netns: [names.netns], interfaces: [names.hostIf], egressRules: [] };
  const now = await machineOf(instanceId);
  assert.deepEqual({ mounts: now.mounts, netns: now.netns, interfaces: now.interfaces, egressRules: now.egressRules }, kept);
  const processes = await run('pgrep', ['-f', `runsc-sandbox.*${instanceId}`], { timeoutMs: 10_000 });
  assert.equal(processes.stdout.trim(), '', 'no process of its sandbox runs');
  const pausedMachine = { ...NO_MACHINE, ...kept };
  await waitFor('its sandbox record and cgroups to go', async () => (JSON.stringify(await machineOf(instanceId)) === JSON.stringify(pausedMachine) ? true : undefined), 10_000);
}

/**
 * What a paused instance says it kept is what its directory holds: a whole saved memory
 * exactly when `memory_kept`, and never a partial one.
 */
function assertSavedMemoryAgrees(instance: Json): void {
  const dir = join(dataDir, 'instances', instance.instance_id);
  assert.equal(existsSync(join(dir, 'checkpoint', 'checkpoint.img')), instance.pause.memory_kept, JSON.stringify(instance.pause));
  assert.ok(!existsSync(join(dir, 'checkpoint.partial')), 'no partial saved memory is left');
}

/** The states and reason codes after `ready`, as the history shows them. */
function historyAfterReady(instance: Json): string[] {
  const history = instance.state_history as { state: string; reason_code?: string }[];
  const first = history.findIndex((e) => e.state === 'ready');
  return history.slice(first + 1).map((e) => `${e.state}:${e.reason_code ?? ''}`);
}

describe('pause and resume', () => {
  let id: string;

  it('a files-only pause keeps the files, ends the processes and holds no machine; resume brings the files back', async () => {
    const instance = await createReady('a');
    id = instance.instance_id;
    await command('a', 'echo kept > note.txt; nohup sleep 1000 >/dev/null 2>&1 &');
    assert.match((await command('a', 'pgrep -x sleep || true')).output, /\d+/);

    const paused = await api('POST', `${room('a')}/pause`, { memory: false });
    assert.equal(paused.status, 200, JSON.stringify(paused.body));
    assert.equal(paused.body.state, 'paused');
    assert.equal(paused.body.pause.memory_kept, false);
    assert.ok(Date.parse(paused.body.pause.remove_after) > Date.parse(paused.body.pause.paused_at));
    assert.deepEqual(historyAfterReady(paused.body), ['pausing:paused', 'paused:paused']);
    assert.ok(paused.body.state_history.at(-1).key_id, 'the pause names the key that asked');
    // No machine while paused; its layer stays.
    await assertNoMachine(id);
    assert.ok(existsSync(join(dataDir, 'instances', id, 'disk.img')), 'the writable layer is kept');
    // Its memory is not committed on the host any more, its disk is still the organization's.
    const usage = await api('GET', '/api/usage');
    assert.equal(usage.status, 200, JSON.stringify(usage.body));
    assert.equal(usage.body.quotas.memory_mb.used, 0, JSON.stringify(usage.body.quotas));
    assert.equal(usage.body.quotas.instances.used, 0);
    assert.equal(usage.body.quotas.disk_mb.used, 512);

    // Pausing a paused instance answers it as it is.
    const again = await api('POST', `${room('a')}/pause`);
    assert.equal(again.status, 200);
    assert.equal(again.body.state_history.length, paused.body.state_history.length);

    const resumed = await api('POST', `${room('a')}/resume`);
    assert.equal(resumed.status, 200, JSON.stringify(resumed.body));
    assert.equal(resumed.body.state, 'ready');
    assert.equal(resumed.body.pause, null);
    assert.deepEqual(historyAfterReady(resumed.body).slice(2), ['resuming:resumed', 'ready:resumed']);
    assert.equal((await command('a', 'cat note.txt')).output, 'kept\n');
    // Memory was not kept: the background process ended with the pause.
    assert.equal((await command('a', 'pgrep -x sleep || echo none')).output, 'none\n');
  });

  it('a command on a paused instance resumes it first', async () => {
    assert.equal((await api('POST', `${room('a')}/pause`)).body.state, 'paused');
    const result = await command('a', 'cat note.txt');
    assert.equal(result.output, 'kept\n');
    const instance = (await api('GET', room('a'))).body;
    assert.equal(instance.state, 'ready');
    assert.deepEqual(historyAfterReady(instance).slice(-2), ['resuming:auto_resumed', 'ready:auto_resumed']);
    // A file request does the same.
    assert.equal((await api('POST', `${room('a')}/pause`)).body.state, 'paused');
    const file = await api('GET', `${room('a')}/file/note.txt`);
    assert.equal(file.status, 200, JSON.stringify(file.body));
    assert.equal((await api('GET', room('a'))).body.state, 'ready');
  });

  it('refuses impossible moves with an Error body', async () => {
    // Two pauses at once: one pauses, the other finds it pausing (a pause takes a few
    // hundred milliseconds, so the second may come after it; then it is tried again).
    let refused: Json;
    for (let attempt = 0; attempt < 5 && refused === undefined; attempt++) {
      assert.equal((await api('POST', `${room('a')}/resume`)).body.state, 'ready');
      const answers = await Promise.all([api('POST', `${room('a')}/pause`), api('POST', `${room('a')}/pause`)]);
      assert.ok(answers.some((a) => a.status === 200 && a.body.state === 'paused'), JSON.stringify(answers));
      refused = answers.find((a) => a.status !== 200)?.body;
    }
    assert.ok(refused, 'one of two pauses at once was refused');
    assert.equal(refused.error, 'instance_state_conflict');
    assert.match(refused.message, /being paused already/);
    assert.equal((await api('POST', `${room('a')}/resume`)).body.state, 'ready');
    // A ready instance resumed is answered as it is; a room without an instance is a 404.
    assert.equal((await api('POST', `${room('a')}/resume`)).status, 200);
    assert.equal((await api('POST', `${room('none')}/pause`)).body.error, 'instance_not_found');
  });

  it('deleting a paused instance removes its layer and everything else', async () => {
    assert.equal((await api('POST', `${room('a')}/pause`)).body.state, 'paused');
    const deleted = await api('DELETE', room('a'));
    assert.equal(deleted.body.state, 'stopped');
    await waitFor('its directory to go', async () => (existsSync(join(dataDir, 'instances', id)) ? undefined : true), 30_000);
    assert.deepEqual(await machineOf(id), NO_MACHINE);
  });
});

describe('pause with memory', () => {
  let id: string;
  const checkpoint = () => join(dataDir, 'instances', id, 'checkpoint');

  it('a background process keeps its pid and a value held in memory, and a server answers without being started again', async (t) => {
    id = (await createReady('mem')).instance_id;
    // A value that exists only in the shell's memory, written out again every 0.2 s; an HTTP server.
    await command('mem', [
      'nohup sh -c \'v=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d " \\n"); echo $$ > /tmp/held.pid; while :; do echo "$v" > /tmp/held.now; sleep 0.2; done\' >/dev/null 2>&1 &',
      'nohup python3 -m http.server 8000 >/dev/null 2>&1 & echo $! > /tmp/server.pid; sleep 1',
    ].join('\n'));
    const before = (await command('mem', 'cat /tmp/held.pid /tmp/held.now /tmp/server.pid | tr "\\n" " "')).output.trim();
    assert.equal(before.split(' ').length, 3, before);

    const paused = await api('POST', `${room('mem')}/pause`);
    assert.equal(paused.status, 200, JSON.stringify(paused.body));
    if (!paused.body.pause.memory_kept) {
      t.skip('this host\'s runtime cannot keep memory (capabilities.pauseMemory is false: its sandboxes use the host\'s network stack)');
      return;
    }
    // No machine, but its saved memory is on the disk.
    await assertNoMachine(id);
    assert.ok(existsSync(join(checkpoint(), 'checkpoint.img')), 'the saved memory is in the instance\'s directory');

    const resumed = await api('POST', `${room('mem')}/resume`);
    assert.equal(resumed.status, 200, JSON.stringify(resumed.body));
    assert.deepEqual(historyAfterReady(resumed.body).slice(-2), ['resuming:resumed', 'ready:resumed']);
    assert.ok(!existsSync(checkpoint()), 'the saved memory is removed once the instance runs again');
    const after = await command('mem', [
      'rm -f /tmp/held.now; sleep 0.5',
      'cat /tmp/held.pid /tmp/held.now /tmp/server.pid | tr "\\n" " "',
      'kill -0 $(cat /tmp/held.pid) $(cat /tmp/server.pid) && echo alive',
      'python3 -c "import urllib.request; print(urllib.request.urlopen(\'http://127.0.0.1:8000/\', timeout=5).status)"',
    ].join('\n'));
    assert.equal(after.output, `${before} alive\n200\n`, 'the same processes, the same value in memory, the server answering');
  });

  it('a saved memory that cannot be restored falls back to the files and says so', async (t) => {
    if (id === undefined) return t.skip('no instance with memory');
    await command('mem', 'echo files > fallback.txt');
    const paused = await api('POST', `${room('mem')}/pause`);
    if (!paused.body.pause.memory_kept) return t.skip('this host\'s runtime cannot keep memory');
    // A damaged image: runsc cannot read it.
    writeFileSync(join(checkpoint(), 'checkpoint.img'), 'not an image');
    const resumed = await api('POST', `${room('mem')}/resume`);
    assert.equal(resumed.status, 200, JSON.stringify(resumed.body));
    assert.equal(resumed.body.state, 'ready');
    const last = resumed.body.state_history.at(-1);
    assert.equal(last.reason_code, 'memory_lost', JSON.stringify(last));
    assert.match(last.reason, /over its files only/);
    assert.equal((await command('mem', 'cat fallback.txt; pgrep -f "[h]ttp.server" || echo gone')).output, 'files\ngone\n');
    assert.equal((await api('DELETE', room('mem'))).body.state, 'stopped');
  });
});

describe('an instance whose layer keeps undo points', () => {
  it('keeps them across a pause: a command before it is reverted after the resume', async () => {
    const created = await api('POST', '/api/profiles', { name: 'undo', memory_mb: 512, disk_mb: 512, network: { egress: 'none' }, idle_timeout_s: 0, keep_undo: true });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const undoProfile = created.body.profile_id;
    const { instance_id: id } = await createReady('undo', undoProfile);
    const ran = await api('POST', `${room('undo', undoProfile)}/command`, { command: 'echo made > made.txt' });
    assert.equal(ran.status, 200, JSON.stringify(ran.body));
    assert.equal((await api('POST', `${room('undo', undoProfile)}/pause`)).body.state, 'paused');
    await assertNoMachine(id);
    assert.equal((await api('POST', `${room('undo', undoProfile)}/resume`)).body.state, 'ready');
    const reverted = await api('POST', `${room('undo', undoProfile)}/commands/${ran.body.command_id}/revert`, {});
    assert.equal(reverted.status, 200, JSON.stringify(reverted.body));
    const listed = await api('POST', `${room('undo', undoProfile)}/command`, { command: 'ls made.txt 2>&1 || true' });
    assert.match(listed.body.result.output, /No such file/);
    assert.equal((await api('DELETE', room('undo', undoProfile))).body.state, 'stopped');
  });
});

describe('idle and retention', () => {
  it('an idle instance is paused, and a paused one is removed after its retention', async () => {
    const created = await api('POST', '/api/profiles', {
      name: 'idle',
      memory_mb: 512,
      disk_mb: 512,
      network: { egress: 'none' },
      idle_timeout_s: 1,
      paused_retention_s: 3,
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const idleProfile = created.body.profile_id;
    assert.equal(created.body.idle_action, 'pause');
    const { instance_id: id } = await createReady('idle', idleProfile);
    const paused = await waitFor('the idle instance to be paused', async () => {
      const res = await api('GET', room('idle', idleProfile));
      return res.body.state === 'paused' ? res.body : undefined;
    }, 20_000);
    assert.deepEqual(historyAfterReady(paused), ['pausing:idle', 'paused:idle']);
    const stopped = await waitFor('the paused instance to be removed', async () => {
      const found = (await allInstances()).find((i) => i.instance_id === id);
      return found?.state === 'stopped' ? found : undefined;
    }, 30_000);
    assert.deepEqual(historyAfterReady(stopped), ['pausing:idle', 'paused:idle', 'stopping:retention', 'stopped:retention']);
    assert.equal((await api('GET', room('idle', idleProfile))).status, 404);
    await waitFor('its directory to go', async () => (existsSync(join(dataDir, 'instances', id)) ? undefined : true), 30_000);
    assert.deepEqual(await machineOf(id), NO_MACHINE);
  });
});

describe('a crash during a pause or a resume', () => {
  it('kill -9 while pausing, then while resuming: the instance ends paused and resumable, nothing half made is left', async () => {
    const { instance_id: id } = await createReady('crash');
    await command('crash', 'echo before-crash > kept.txt');

    // During the pause.
    const pausing = api('POST', `${room('crash')}/pause`).catch(() => undefined);
    await waitFor('the pause to begin', async () => ((await api('GET', room('crash'))).body.state === 'pausing' ? true : undefined), 10_000, 10);
    await svc.server!.kill('SIGKILL');
    await pausing;
    await start();
    let instance = (await api('GET', room('crash'))).body;
    assert.equal(instance.state, 'paused', JSON.stringify(instance.state_history));
    assert.equal(instance.state_history.at(-1).reason_code, 'service_stopped');
    await assertNoMachine(id);
    assertSavedMemoryAgrees(instance);

    // During the resume.
    const resuming = api('POST', `${room('crash')}/resume`).catch(() => undefined);
    await waitFor('the resume to begin', async () => ((await api('GET', room('crash'))).body.state === 'resuming' ? true : undefined), 10_000, 10);
    await svc.server!.kill('SIGKILL');
    await resuming;
    await start();
    instance = (await api('GET', room('crash'))).body;
    assert.equal(instance.state, 'paused', JSON.stringify(instance.state_history));
    await assertNoMachine(id);
    assertSavedMemoryAgrees(instance);

    // Still resumable, with its files.
    assert.equal((await command('crash', 'cat kept.txt')).output, 'before-crash\n');
    assert.equal((await api('DELETE', room('crash'))).body.state, 'stopped');
  });
});
