// Network slots made ahead of creates (network/slots.ts), with real sandboxes: a create
// takes a slot and keeps its names, its lease becomes the instance's and it gets its
// egress rule; the pool refills; the instance pauses and resumes on the slot's network
// (kept by the pause, or made again when the host lost it) and its delete removes it; a
// service's close removes its slots, and the slots a crash left are removed by the next
// start while the new ones are kept by its sweep; a batch of slots for a fork's copies
// is made at once, each addressed, and taken by creates. Nothing is left on the host at
// the end.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { run } from '../../src/host/run.ts';
import { createLogger } from '../../src/log.ts';
import { hostTag, type InstanceNetworkNames, listNetns, netnsPath, networkNames, removeNetwork } from '../../src/network/netns.ts';
import { AddressPool } from '../../src/network/pool.ts';
import { NetworkSlots, SLOT_LEASE_PREFIX } from '../../src/network/slots.ts';
import type { GvisorRuntime } from '../../src/runtimes/gvisor/gvisor-runtime.ts';
import { startTestApp, TEST_DATA_PREFIX, TEST_OWNER_FILE, type TestApp, type TestOrg } from '../support/app.ts';
import { hostObjects } from '../support/host.ts';
import { until, untilTrue } from '../support/until.ts';

const POOL = '10.234.0.0/26';
const SLOTS = 2;

let dataDir: string;
let tag: string;
let t: TestApp | undefined;
let org: TestOrg;

const start = () => startTestApp({ gvisorPool: POOL, onShutdown: 'stop', config: { dataDir, networkSlots: SLOTS } });
const runtime = (): GvisorRuntime => t!.gvisor();
const room = (name: string) => `/api/profile/${org.defaultProfileId}/room/${name}`;
const api = async (method: 'GET' | 'POST' | 'DELETE', url: string, payload?: object) => {
  const res = await t!.app.inject({ method, url, headers: org.headers, ...(payload ? { payload } : {}) });
  return { status: res.statusCode, body: res.json() };
};

async function leaseKeys(): Promise<string[]> {
  return (await t!.services.db.selectFrom('network_leases').select('instance_id').execute()).map((r) => r.instance_id);
}

/** The pool holds `SLOTS` ready slots, each with its namespace on the host. */
async function poolFull(): Promise<InstanceNetworkNames[]> {
  return until(
    'the network slots to be made',
    () => {
      const slots = runtime().networkSlots;
      const names = slots.names();
      return slots.available === SLOTS && names.every((n) => existsSync(netnsPath(n.netns))) ? names : undefined;
    },
    { timeoutMs: 30_000, everyMs: 20 },
  );
}

before(async () => {
  dataDir = mkdtempSync(join(tmpdir(), TEST_DATA_PREFIX));
  writeFileSync(join(dataDir, TEST_OWNER_FILE), JSON.stringify({ pid: process.pid, pool: POOL }));
  tag = hostTag(dataDir);
  t = await start();
  org = await t.newOrg();
});
after(async () => {
  try {
    await t?.closeLeavingNothing();
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});

describe('network slots made ahead of creates', () => {
  it('a create takes a slot and keeps its names and address; the pool refills; pause, resume and delete work on it', async () => {
    const slots = await poolFull();
    const leasedBefore = await leaseKeys();
    assert.equal(leasedBefore.filter((k) => k.startsWith(SLOT_LEASE_PREFIX)).length, SLOTS, JSON.stringify(leasedBefore));

    const created = await api('POST', room('a'));
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.equal(created.body.state, 'ready');
    const id: string = created.body.instance_id;
    const names = runtime().networkOf(id);
    assert.ok(slots.some((s) => s.netns === names.netns && s.hostIf === names.hostIf), `it did not take a slot: ${JSON.stringify({ names, slots })}`);
    assert.notEqual(names.netns, networkNames(tag, id).netns);
    // The slot's lease is the instance's now: one lease fewer under a slot's key.
    const leased = await leaseKeys();
    assert.ok(leased.includes(id), JSON.stringify(leased));
    // The default profile has internet egress: the rule was added when the slot was taken.
    assert.ok((await hostObjects(dataDir)).egressRules.includes(names.hostIf), 'no egress rule for the taken slot');
    const said = await api('POST', `${room('a')}/command`, { command: 'echo hello' });
    assert.equal(said.status, 200, JSON.stringify(said.body));
    assert.equal(said.body.result.output, 'hello\n');

    // Refilled in the background, with a new slot.
    const refilled = await poolFull();
    assert.ok(!refilled.some((s) => s.netns === names.netns), 'the taken slot is still in the pool');

    // A pause keeps the instance's network for its resume.
    const paused = await api('POST', `${room('a')}/pause`);
    assert.equal(paused.status, 200, JSON.stringify(paused.body));
    assert.ok(listNetns(tag).includes(names.netns), 'the paused instance lost its namespace');
    const resumed = await api('POST', `${room('a')}/resume`);
    assert.equal(resumed.status, 200, JSON.stringify(resumed.body));
    assert.equal(resumed.body.state, 'ready');
    assert.equal((await api('POST', `${room('a')}/command`, { command: 'echo again' })).body.result.output, 'again\n');

    // A network the host lost while the instance was paused (a reboot keeps nothing) is made again by the resume.
    assert.equal((await api('POST', `${room('a')}/pause`)).status, 200);
    await runtime().releasesSettled();
    await removeNetwork(names);
    assert.ok(!listNetns(tag).includes(names.netns));
    const again = await api('POST', `${room('a')}/resume`);
    assert.equal(again.status, 200, JSON.stringify(again.body));
    assert.equal(again.body.state, 'ready');
    assert.ok(listNetns(tag).includes(names.netns), 'the resume did not make the namespace again');
    assert.ok((await hostObjects(dataDir)).egressRules.includes(names.hostIf), 'the resume did not add the egress rule again');
    assert.equal((await api('POST', `${room('a')}/command`, { command: 'echo made-again' })).body.result.output, 'made-again\n');

    // Its delete removes the slot's network and lease with it.
    assert.equal((await api('DELETE', room('a'))).status, 200);
    await runtime().releasesSettled();
    const host = await hostObjects(dataDir);
    assert.ok(!host.netns.includes(names.netns) && !host.interfaces.includes(names.hostIf), JSON.stringify(host));
    assert.ok(!host.egressRules.includes(names.hostIf), 'its egress rule is left');
    assert.ok(!(await leaseKeys()).includes(id), 'its lease is left');
    // What the host holds now is the pool's slots alone.
    assert.deepEqual([...host.netns].sort(), refilled.map((s) => s.netns).sort());
  });

  it("a close removes the service's slots; a crash's slots are removed at the next start, whose own slots its sweep keeps", async () => {
    // A crash's slots: made on the service's store and tag by a pool that is never closed.
    const crashed = new NetworkSlots({ pool: new AddressPool(t!.services.db, POOL, t!.services.nodeId), tag, size: 2, log: createLogger('silent') });
    await crashed.fill();
    const leftover = crashed.names();
    assert.equal(leftover.length, 2);
    const own = await poolFull();

    await t!.close();
    t = undefined;
    // The closed service's own slots are gone; the crash's are still there.
    let netns = listNetns(tag);
    assert.ok(own.every((s) => !netns.includes(s.netns)), `the service's slots outlived its close: ${JSON.stringify(netns)}`);
    assert.ok(leftover.every((s) => netns.includes(s.netns)));

    t = await start();
    org = await t.newOrg();
    await untilTrue('the crash\'s slots to be removed', () => leftover.every((s) => !listNetns(tag).includes(s.netns)), { timeoutMs: 10_000 });
    const fresh = await poolFull();
    netns = listNetns(tag);
    assert.ok(fresh.every((s) => netns.includes(s.netns)), 'the start\'s sweep removed its own slots');
    const keys = await leaseKeys();
    assert.deepEqual(keys.filter((k) => k.startsWith(SLOT_LEASE_PREFIX)).length, SLOTS, JSON.stringify(keys));

    // And they are used: a create takes one.
    const created = await api('POST', room('b'));
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const names = runtime().networkOf(created.body.instance_id);
    assert.ok(fresh.some((s) => s.netns === names.netns), 'the create after the restart did not take a slot');
    assert.equal((await api('DELETE', room('b'))).status, 200);
  });

  it("a batch for a fork's copies makes the slots missing at once, each addressed, and creates take them", async () => {
    const slots = runtime().networkSlots;
    await poolFull();
    await slots.addBatch(5);
    assert.equal(slots.available, 5);
    const batch = slots.names();
    const leased = (await leaseKeys()).filter((k) => k.startsWith(SLOT_LEASE_PREFIX));
    assert.equal(leased.length, 5, JSON.stringify(leased));
    for (const names of batch) {
      const guest = await run('ip', ['-n', names.netns, '-4', '-o', 'addr', 'show', 'dev', 'eth0'], { timeoutMs: 10_000 });
      assert.match(guest.stdout, /inet 10\.234\.0\.\d+\/30/, `${names.netns}: ${guest.stdout}${guest.stderr}`);
      const route = await run('ip', ['-n', names.netns, 'route', 'show', 'default'], { timeoutMs: 10_000 });
      assert.match(route.stdout, /default via 10\.234\.0\.\d+ dev eth0/, `${names.netns}: ${route.stdout}`);
      const host = await run('ip', ['-4', '-o', 'addr', 'show', 'dev', names.hostIf], { timeoutMs: 10_000 });
      assert.match(host.stdout, /inet 10\.234\.0\.\d+\/30/, `${names.hostIf}: ${host.stdout}${host.stderr}`);
    }
    // Already as many as asked: nothing more is made.
    await slots.addBatch(3);
    assert.equal(slots.available, 5);

    const created = await api('POST', room('c'));
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const names = runtime().networkOf(created.body.instance_id);
    assert.ok(batch.some((s) => s.netns === names.netns), 'the create did not take a slot of the batch');
    assert.equal((await api('POST', `${room('c')}/command`, { command: 'echo through-batch' })).body.result.output, 'through-batch\n');
    assert.equal((await api('DELETE', room('c'))).status, 200);
  });
});
