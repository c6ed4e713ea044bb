// CPU pressure with real gVisor sandboxes: with ROOMKIT_FREEZE_CPU_PERCENT at 1 (the
// host counts as busy whenever anything runs), an idle instance's sandbox is frozen by
// the expiry check (its host cgroup says FROZEN and its CPU time stands still), while
// one whose background process works is not; a command, a file read and a delete on a
// frozen instance all work, thawing it first, and nothing is left behind.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { cpuUsedMs } from '../../src/runtimes/gvisor/freezer.ts';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';
import { untilTrue } from '../support/until.ts';

const POOL = '10.231.0.128/26';
const OPERATOR = 'operator-token-for-the-cpu-pressure-test';

let t: TestApp;
let org: TestOrg;
let profile: string;
const room = (name: string) => `/api/profile/${profile}/room/${name}`;
const call = async (method: 'GET' | 'POST' | 'DELETE', url: string, payload?: Record<string, unknown>) => {
  const res = await t.app.inject({ method, url, headers: org.headers, ...(payload === undefined ? {} : { payload }) });
  return { status: res.statusCode, body: res.json(), raw: res.body };
};
/** What the host's freezer cgroup of the instance's sandbox says (v1, as on this kind of host). */
const freezerState = (id: string) => readFileSync(`/sys/fs/cgroup/freezer/roomkit/${id}/freezer.state`, 'utf8').trim();

before(async () => {
  t = await startTestApp({
    gvisorPool: POOL,
    config: { freezeCpuPercent: 1, pressureIdleS: 1, expiryCheckIntervalMs: 500, operatorToken: OPERATOR },
  });
  org = await t.newOrg();
  profile = await t.createProfile(org, { name: 'cpu', memory_mb: 256, disk_mb: 512, network: { egress: 'none' } });
});
after(() => t.closeLeavingNothing());

describe('CPU pressure with real instances', () => {
  it('freezes an idle instance but not a working one, and thaws it for a command, a file and a delete', async () => {
    const idle = await call('POST', room('idle'), {});
    const working = await call('POST', room('working'), {});
    assert.equal(idle.status, 201, idle.raw);
    assert.equal(working.status, 201, working.raw);
    const idleId = idle.body.instance_id as string;
    const workingId = working.body.instance_id as string;
    // A process that outlives its command and keeps a core busy: not quiet.
    const spin = await call('POST', `${room('working')}/command`, { command: "nohup sh -c 'while :; do :; done' >/dev/null 2>&1 &" });
    assert.equal(spin.status, 200, spin.raw);
    const wrote = await call('POST', `${room('idle')}/command`, { command: 'echo kept > note.txt' });
    assert.equal(wrote.status, 200, wrote.raw);

    await untilTrue('the idle instance frozen', () => freezerState(idleId) === 'FROZEN', { timeoutMs: 30_000 });
    assert.equal(t.gvisor().isFrozen(idleId), true);
    // A few more checks: the working one stays thawed.
    await sleep(2000);
    assert.equal(freezerState(workingId), 'THAWED');
    assert.equal(t.gvisor().isFrozen(workingId), false);
    const capacity = await t.app.inject({ method: 'GET', url: '/operator/capacity', headers: { authorization: `Bearer ${OPERATOR}` } });
    assert.equal(capacity.statusCode, 200, capacity.body);
    assert.ok(capacity.json().cpu.frozen_instances >= 1, capacity.body);
    assert.ok(capacity.json().cpu.pressure_freezes >= 1, capacity.body);
    // Frozen, its sandbox uses no CPU at all.
    const before = cpuUsedMs(idleId)!;
    await sleep(1500);
    if (freezerState(idleId) === 'FROZEN') assert.equal(cpuUsedMs(idleId), before, 'a frozen sandbox used CPU');

    // Waits until frozen again, then reaches in another way.
    const ran = await call('POST', `${room('idle')}/command`, { command: 'cat note.txt' });
    assert.equal(ran.status, 200, ran.raw);
    assert.equal(ran.body.result.output, 'kept\n');
    assert.equal(freezerState(idleId), 'THAWED');
    await untilTrue('the idle instance frozen again', () => freezerState(idleId) === 'FROZEN', { timeoutMs: 30_000 });
    const file = await t.app.inject({ method: 'GET', url: `${room('idle')}/file/note.txt`, headers: org.headers });
    assert.equal(file.statusCode, 200, file.body);
    assert.equal(file.json().content, 'kept\n');

    await untilTrue('the idle instance frozen before its delete', () => freezerState(idleId) === 'FROZEN', { timeoutMs: 30_000 });
    const deleted = await call('DELETE', room('idle'));
    assert.equal(deleted.status, 200, deleted.raw);
    assert.equal((await call('DELETE', room('working'))).status, 200);
  });
});
