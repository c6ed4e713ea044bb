// Memory pressure with real gVisor sandboxes: on a host made small for the test
// (ROOMKIT_ADMIT_HOST_MEMORY_MB, all of it for instances, no reserve), one idle instance
// leaves no room for a second one's start; the second create pauses the idle one
// instead of being refused, and a command on the paused one resumes it, pausing the
// other (now idle) for its room. Admission counts what each sandbox's host cgroup
// measures, and a starting one at the runtime's estimate (64 MB).
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { STARTING_MEMORY_MB } from '../../src/runtimes/gvisor/host-usage.ts';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';

const POOL = '10.231.0.0/26';
/** Room for one starting instance and almost nothing beside it: any running sandbox uses more than 2 MB. */
const HOST_MB = STARTING_MEMORY_MB + 2;

let t: TestApp;
let org: TestOrg;
let profile: string;
const room = (name: string) => `/api/profile/${profile}/room/${name}`;
const call = async (method: 'GET' | 'POST' | 'DELETE', url: string, payload?: Record<string, unknown>) => {
  const res = await t.app.inject({ method, url, headers: org.headers, ...(payload === undefined ? {} : { payload }) });
  return { status: res.statusCode, body: res.json() };
};
const lastReason = (instance: { state_history: { reason_code?: string }[] }) => instance.state_history.at(-1)?.reason_code;

before(async () => {
  t = await startTestApp({
    gvisorPool: POOL,
    config: { admitHostMemoryMb: HOST_MB, admitMemoryPercent: 100, admitReserveMb: 0, pressureIdleS: 1 },
  });
  org = await t.newOrg();
  profile = await t.createProfile(org, { name: 'pressure', memory_mb: 256, disk_mb: 512, network: { egress: 'none' } });
});
after(() => t.closeLeavingNothing());

describe('memory pressure with real instances', () => {
  it('pauses an idle instance instead of refusing a create, and resumes it on its next request', async () => {
    const a = await call('POST', room('a'), {});
    assert.equal(a.status, 201, JSON.stringify(a.body));
    assert.equal(a.body.state, 'ready');
    const measured = t.gvisor().memoryInUseMb(a.body.instance_id);
    assert.ok(measured !== undefined && measured > HOST_MB - STARTING_MEMORY_MB, `a's sandbox measured ${measured} MB: too little for the test to mean anything`);
    assert.ok(measured < 256, `an idle sandbox measured ${measured} MB`);
    // Past the idle time, with nothing running in it.
    await sleep(1500);

    const b = await call('POST', room('b'), {});
    assert.equal(b.status, 201, JSON.stringify(b.body));
    assert.equal(b.body.state, 'ready');
    const paused = (await call('GET', room('a'))).body;
    assert.equal(paused.state, 'paused');
    assert.equal(lastReason(paused), 'memory_pressure');
    // Its sandbox's cgroup goes once the host has reaped it (in the background after the pause).
    for (let i = 0; i < 50 && t.gvisor().memoryInUseMb(a.body.instance_id) !== undefined; i++) await sleep(100);
    assert.equal(t.gvisor().memoryInUseMb(a.body.instance_id), undefined, 'a paused instance holds no sandbox');

    await sleep(1500);
    const ran = await call('POST', `${room('a')}/command`, { command: 'echo woken' });
    assert.equal(ran.status, 200, JSON.stringify(ran.body));
    assert.equal(ran.body.result.output, 'woken\n');
    const woken = (await call('GET', room('a'))).body;
    assert.equal(woken.state, 'ready');
    assert.equal(lastReason(woken), 'auto_resumed');
    const other = (await call('GET', room('b'))).body;
    assert.equal(other.state, 'paused', 'b made room for a');
    assert.equal(lastReason(other), 'memory_pressure');

    const metrics = await t.app.inject({ method: 'GET', url: '/metrics' });
    assert.match(metrics.body, /^roomkit_memory_pressure_pauses_total 2$/m);
  });

  it('refuses a create with 503 capacity_exhausted when nothing idle is left to pause', async () => {
    // a was just used: not idle. b is paused and holds no memory.
    assert.equal((await call('POST', `${room('a')}/command`, { command: 'true' })).status, 200);
    const refused = await call('POST', room('c'), {});
    assert.equal(refused.status, 503, JSON.stringify(refused.body));
    assert.equal(refused.body.error, 'capacity_exhausted');
    assert.equal(refused.body.details.paused_for_room, 0);
    assert.match(refused.body.message, /ROOMKIT_PRESSURE_IDLE_S/);
    for (const name of ['a', 'b']) assert.equal((await call('DELETE', room(name))).status, 200);
  });
});
