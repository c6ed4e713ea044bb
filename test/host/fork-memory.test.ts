// Snapshots and forks WITH memory on real gVisor instances over the API: a fork into 3
// rooms gives 3 independent instances that each run the source's process (same pid,
// same value held in memory) and its HTTP server, each answering at its own address,
// while the source goes on serving; what one copy writes the others do not see; a
// snapshot with memory starts a new instance with the process; a snapshot whose memory
// cannot be restored boots over its files and its history says so; a sandbox left held
// still by a snapshot the service stopped during goes on when it is checked at the next
// start; a deleted snapshot
// and a refused fork leave nothing on the host (namespaces, mounts, cgroups, runsc
// records are checked at the end by closeLeavingNothing).
import assert from 'node:assert/strict';
import { existsSync, readdirSync, truncateSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Runsc } from '../../src/runtimes/gvisor/runsc.ts';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';

let t: TestApp;
let org: TestOrg;
let profile: string;
/** What the source's background shell holds: its pid and a value only in its memory. */
let held = '';

const room = (name: string) => `/api/profile/${profile}/room/${name}`;

async function api(method: 'GET' | 'POST' | 'DELETE', url: string, payload?: Record<string, unknown>) {
  return t.app.inject({ method, url, headers: org.headers, ...(payload ? { payload } : {}) });
}

async function run(name: string, command: string): Promise<string> {
  const res = await api('POST', `${room(name)}/command`, { command });
  assert.equal(res.statusCode, 200, res.body);
  assert.equal(res.json().result.exit_code, 0, res.json().result.output);
  return res.json().result.output;
}

/**
 * The pid and value the background shell holds, once it runs, and whether it is alive
 * (fresh: its file is written again first, waited for up to 3 s: a sandbox just restored
 * may take a while to run its loop again).
 */
const HELD =
  'rm -f /tmp/held.now; for i in $(seq 15); do sleep 0.2; test -s /tmp/held.now && break; done; cat /tmp/held.pid /tmp/held.now | tr "\\n" " "; kill -0 $(cat /tmp/held.pid) && echo alive';

/** Whether anything still writes the background shell's file (a pid alone proves nothing: a new boot reuses low pids). */
const WRITTEN = 'rm -f /tmp/held.now; sleep 0.6; test -e /tmp/held.now && echo alive || echo gone';

/** What the HTTP server in the instance at `address` answers for /who.txt. */
async function served(address: string): Promise<string> {
  const res = await fetch(`http://${address}:8000/who.txt`, { signal: AbortSignal.timeout(5_000) });
  assert.equal(res.status, 200);
  return (await res.text()).trim();
}

before(async () => {
  t = await startTestApp({ gvisorPool: '10.235.0.0/24' });
  assert.ok('runtime' in t.services.runtime, 'the gVisor runtime is not available');
  org = await t.newOrg();
  profile = await t.createProfile(org, { name: 'forkmem', memory_mb: 512, disk_mb: 512, network: { egress: 'none' }, command_timeout_s: 60 });
  const created = await api('POST', room('src'));
  assert.equal(created.statusCode, 201, created.body);
  await run('src', [
    'nohup sh -c \'v=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d " \\n"); echo $$ > /tmp/held.pid; while :; do echo "$v" > /tmp/held.now; sleep 0.2; done\' >/dev/null 2>&1 &',
    'mkdir -p site && echo src > site/who.txt',
    'cd site && nohup python3 -m http.server 8000 >/dev/null 2>&1 &',
    'sleep 1',
  ].join('\n'));
  held = (await run('src', HELD)).trim();
  assert.match(held, /^\d+ [0-9a-f]{24} alive$/);
});

after(async () => {
  if (!t) return;
  const live = await api('GET', '/api/instances?limit=50');
  for (const i of live.json().instances ?? []) {
    if (i.state !== 'stopped' && i.state !== 'failed') await api('DELETE', `/api/profile/${i.profile_id}/room/${i.room_id}`);
  }
  await t.closeLeavingNothing();
});

describe('fork with memory', () => {
  it('into 3 rooms gives 3 independent instances, each running the process and serving at its own address, the source serving throughout', async () => {
    const srcAddress = (await run('src', 'hostname -I')).trim().split(' ')[0] ?? '';
    assert.equal(await served(srcAddress), 'src');
    // The source is asked again and again while the fork runs: it must answer every time.
    // A connection open at the checkpoint is dropped (as documented): a client that
    // reconnects at once is answered.
    let forking = true;
    const answers: string[] = [];
    const polling = (async () => {
      while (forking) {
        answers.push(await served(srcAddress).catch(() => served(srcAddress)).catch((err: unknown) => `failed: ${(err as Error).message}`));
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    })();
    const res = await api('POST', `${room('src')}/fork`, { rooms: ['m1', 'm2', 'm3'] });
    forking = false;
    await polling;
    assert.equal(res.statusCode, 201, res.body);
    assert.ok(answers.length > 0 && answers.every((a) => a === 'src'), `the source answered ${JSON.stringify(answers)}`);
    const { instances } = res.json();
    assert.deepEqual(instances.map((i: { room_id: string; state: string }) => [i.room_id, i.state]), [['m1', 'ready'], ['m2', 'ready'], ['m3', 'ready']]);
    const addresses = new Set([srcAddress]);
    for (const instance of instances) {
      const started = instance.state_history.find((e: { state: string }) => e.state === 'vm_started');
      assert.equal(started.reason_code, 'memory_restored', JSON.stringify(instance.state_history));
      const name = instance.room_id;
      assert.equal((await run(name, HELD)).trim(), held, `${name} runs the source's process with the value it held`);
      const address = (await run(name, 'hostname -I')).trim().split(' ')[0] ?? '';
      addresses.add(address);
      // Its own server (not started again) answers at its own address, from its own files.
      await run(name, `echo ${name} > site/who.txt`);
      assert.equal(await served(address), name);
    }
    assert.equal(addresses.size, 4, `each at its own address: ${[...addresses].join(' ')}`);
    // What one wrote, no other sees.
    assert.equal(await served(srcAddress), 'src');
    for (const name of ['m2', 'm3', 'src']) assert.equal(await run(name, 'test -e /tmp/only-m1 || echo absent'), 'absent\n');
    await run('m1', 'echo x > /tmp/only-m1');
    for (const name of ['m2', 'm3', 'src']) assert.equal(await run(name, 'test -e /tmp/only-m1 || echo absent'), 'absent\n');
    assert.equal((await run('src', HELD)).trim(), held, 'the source goes on');
  });

  it('files only when asked: the copies boot without the process', async () => {
    const res = await api('POST', `${room('src')}/fork`, { rooms: ['f1'], memory: false });
    assert.equal(res.statusCode, 201, res.body);
    const [copy] = res.json().instances;
    assert.equal(copy.state, 'ready');
    assert.equal(copy.state_history.find((e: { state: string }) => e.state === 'vm_started').reason_code, undefined);
    assert.equal(await run('f1', `cat site/who.txt; ${WRITTEN}`), 'src\ngone\n');
  });

  it('is refused as a whole when one room has a live instance, leaving no snapshot', async () => {
    const before = readdirSync(join(t.dataDir, 'snapshots')).length;
    const res = await api('POST', `${room('src')}/fork`, { rooms: ['m4', 'm1'] });
    assert.equal(res.statusCode, 409, res.body);
    assert.equal((await api('GET', room('m4'))).statusCode, 404);
    assert.equal(readdirSync(join(t.dataDir, 'snapshots')).length, before);
  });
});

describe('a snapshot with memory', () => {
  it('starts a new instance with the process; deleting it removes its memory and spares the instance', async () => {
    const res = await api('POST', `${room('src')}/snapshots`, {});
    assert.equal(res.statusCode, 201, res.body);
    const taken = res.json();
    assert.equal(taken.memory_kept, true);
    assert.ok(existsSync(join(t.dataDir, 'snapshots', taken.snapshot_id, 'memory')));
    const created = await api('POST', room('s1'), { snapshot_id: taken.snapshot_id });
    assert.equal(created.statusCode, 201, created.body);
    assert.equal((await run('s1', HELD)).trim(), held);
    assert.equal((await api('DELETE', `/api/snapshots/${taken.snapshot_id}`)).statusCode, 200);
    assert.equal(existsSync(join(t.dataDir, 'snapshots', taken.snapshot_id)), false);
    assert.equal((await run('s1', HELD)).trim(), held);
  });

  it('whose memory cannot be restored boots the instance over its files, and its history says so', async () => {
    const taken = (await api('POST', `${room('src')}/snapshots`, {})).json();
    assert.equal(taken.memory_kept, true);
    // A saved state cut short: runsc refuses to restore it.
    truncateSync(join(t.dataDir, 'snapshots', taken.snapshot_id, 'memory', 'checkpoint.img'), 4096);
    const created = await api('POST', room('s2'), { snapshot_id: taken.snapshot_id });
    assert.equal(created.statusCode, 201, created.body);
    const instance = created.json();
    assert.equal(instance.state, 'ready');
    const started = instance.state_history.find((e: { state: string }) => e.state === 'vm_started');
    assert.equal(started.reason_code, 'memory_lost', JSON.stringify(instance.state_history));
    assert.match(started.reason, /could not be restored/);
    assert.equal(await run('s2', `cat site/who.txt; ${WRITTEN}`), 'src\ngone\n');
    await api('DELETE', `/api/snapshots/${taken.snapshot_id}`);
  });
});

describe('a sandbox left held still by a snapshot', () => {
  it('(the service stopped between runsc pause and resume) is resumed when the runtime checks it at start', async () => {
    const source = (await api('GET', room('src'))).json();
    const runtime = 'runtime' in t.services.runtime ? t.services.runtime.runtime : undefined;
    assert.ok(runtime);
    const runsc = new Runsc({ root: join(t.dataDir, 'runsc') });
    const paused = await runsc.call(null, ['pause', source.instance_id]);
    assert.equal(paused.code, 0, paused.stderr);
    assert.equal((await runsc.state(null, source.instance_id))?.status, 'paused');
    assert.deepEqual(await runtime.health(source.instance_id), { healthy: true });
    assert.equal((await runsc.state(null, source.instance_id))?.status, 'running');
    assert.equal((await run('src', HELD)).trim(), held, 'its processes go on');
  });
});
