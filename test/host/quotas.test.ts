// Quotas and host admission with real gVisor sandboxes: an organization's instance and
// command quotas answer 403/429 exactly at their limits, another organization is
// unaffected, a delete frees its quota, and host admission (set here to a share of this
// host's memory that holds exactly two default instances, each counted at its whole host
// limit instead of its measured use, so that the count does not depend on how much an
// idle sandbox happens to use; no reserve, no pauses for pressure) refuses the third
// with 503 capacity_exhausted, also among racing creates, leaving nothing behind. A few
// instances serve all cases, one after the other. Admission by measured use and memory
// pressure with real sandboxes are test/host/memory-pressure.test.ts.
import assert from 'node:assert/strict';
import { totalmem } from 'node:os';
import { after, before, describe, it } from 'node:test';
import { PROFILE_DEFAULTS } from '../../src/core/profile-schema.ts';
import { sandboxMemoryLimitMb } from '../../src/runtimes/gvisor/bundle.ts';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';
import { hostObjects } from '../support/host.ts';

const POOL = '10.233.0.0/24';
const HOST_MB = Math.floor(totalmem() / (1024 * 1024));
const COST_MB = sandboxMemoryLimitMb(PROFILE_DEFAULTS.memory_mb);
/** The smallest whole percent of this host's memory that holds two default instances. */
const PERCENT = Math.ceil((2 * COST_MB * 100) / HOST_MB);

let t: TestApp;
let a: TestOrg;
let b: TestOrg;
let c: TestOrg;
const room = (org: TestOrg, name: string) => `/api/profile/${org.defaultProfileId}/room/${name}`;
const create = (org: TestOrg, name: string) => t.app.inject({ method: 'POST', url: room(org, name), headers: org.headers, payload: {} });
const command = (org: TestOrg, name: string, text: string, background = false) =>
  t.app.inject({ method: 'POST', url: `${room(org, name)}/command`, headers: org.headers, payload: { command: text, background } });
const usage = async (org: TestOrg) => (await t.app.inject({ method: 'GET', url: '/api/usage', headers: org.headers })).json();
const rowsOf = (org: TestOrg) =>
  t.services.db.selectFrom('instances').select(['room_id', 'state']).where('organization_id', '=', org.organizationId).orderBy('created_at').execute();

before(async () => {
  // Two instances fit and a third does not.
  assert.ok(Math.floor((HOST_MB * PERCENT) / 100) < 3 * COST_MB, `host of ${HOST_MB} MB`);
  t = await startTestApp({ gvisorPool: POOL, config: { admitMemoryPercent: PERCENT, admitReserveMb: 0, pressureIdleS: 86_400 } });
  // Every instance counts its whole host limit, started or starting.
  const runtime = t.gvisor();
  runtime.memoryInUseMb = () => COST_MB;
  runtime.startingMemoryMb = () => COST_MB;
  [a, b, c] = [await t.newOrg(), await t.newOrg(), await t.newOrg()];
  await t.services.quotas.setOverrides(a.organizationId, { instances: 1, concurrent_commands: 1, commands_per_minute: 3 });
});
after(() => t.closeLeavingNothing());

describe('quotas with real instances', () => {
  it('refuses the instance over the organization\'s instance quota, and makes nothing for it', async () => {
    const first = await create(a, 'a1');
    assert.equal(first.statusCode, 201, first.body);
    const before = await hostObjects(t.dataDir);
    const second = await create(a, 'a2');
    assert.equal(second.statusCode, 403, second.body);
    assert.equal(second.json().error, 'quota_exceeded');
    assert.deepEqual(second.json().details, { quota: 'instances', limit: 1, used: 1, requested: 1 });
    assert.deepEqual(await rowsOf(a), [{ room_id: 'a1', state: 'ready' }]);
    assert.deepEqual(await hostObjects(t.dataDir), before);
  });

  it('refuses the command over the concurrent quota (403) and the one over the per-minute quota (429)', async () => {
    const held = await command(a, 'a1', 'sleep 60', true);
    assert.equal(held.statusCode, 202, held.body);
    const refused = await command(a, 'a1', 'echo hi');
    assert.equal(refused.statusCode, 403, refused.body);
    assert.deepEqual(refused.json().details, { quota: 'concurrent_commands', limit: 1, used: 1, requested: 1 });
    const kill = await t.app.inject({ method: 'POST', url: `${room(a, 'a1')}/commands/${held.json().command_id}/kill`, headers: a.headers, payload: {} });
    assert.equal(kill.statusCode, 200, kill.body);
    assert.equal((await usage(a)).quotas.concurrent_commands.used, 0);
    // One command started this minute; two more fit, the fourth does not.
    assert.equal((await command(a, 'a1', 'echo two')).json().result.output, 'two\n');
    assert.equal((await command(a, 'a1', 'echo three')).statusCode, 200);
    const fourth = await command(a, 'a1', 'echo four');
    assert.equal(fourth.statusCode, 429, fourth.body);
    assert.equal(fourth.json().error, 'commands_rate_exceeded');
    assert.equal(fourth.headers['retry-after'], String(fourth.json().details.retry_after_s));
    assert.equal(fourth.json().details.used, 3);
  });

  it('leaves another organization its own quotas', async () => {
    const other = await create(b, 'b1');
    assert.equal(other.statusCode, 201, other.body);
    const u = await usage(b);
    assert.deepEqual(
      Object.fromEntries(Object.entries(u.quotas).map(([k, v]) => [k, (v as { used: number }).used])),
      { instances: 1, memory_mb: 1024, vcpus: 1, disk_mb: 2048, concurrent_commands: 0, commands_per_minute: 0, snapshots: 0 },
    );
    assert.equal((await command(b, 'b1', 'echo b')).statusCode, 200, 'A\'s rate quota is not B\'s');
  });
});

describe('host admission with real instances', () => {
  it(`refuses a third default instance at ${PERCENT}% of ${HOST_MB} MB with 503 capacity_exhausted, leaving nothing behind`, async () => {
    const before = await hostObjects(t.dataDir);
    assert.equal(before.netns.length, 2);
    const refused = await create(c, 'c1');
    assert.equal(refused.statusCode, 503, refused.body);
    assert.equal(refused.json().error, 'capacity_exhausted');
    assert.equal(refused.headers['retry-after'], '30');
    const { details } = refused.json();
    assert.deepEqual(details, {
      resource: 'memory',
      limit_mb: Math.floor((HOST_MB * PERCENT) / 100),
      committed_mb: 2 * COST_MB,
      reserve_mb: 0,
      requested_mb: COST_MB,
      paused_for_room: 0,
      retry_after_s: 30,
    });
    assert.deepEqual(await rowsOf(c), [], 'no record, in a creating state or any other');
    assert.deepEqual(await hostObjects(t.dataDir), before, 'no namespace, interface, mount or sandbox');
  });

  it('gives the room back when an instance is deleted, to exactly one of racing creates', async () => {
    assert.equal((await t.app.inject({ method: 'DELETE', url: room(a, 'a1'), headers: a.headers })).statusCode, 200);
    assert.equal((await usage(a)).quotas.instances.used, 0);
    const answers = await Promise.all(['c1', 'c2', 'c3'].map((name) => create(c, name)));
    assert.deepEqual(answers.map((r) => r.statusCode).sort(), [201, 503, 503], answers.map((r) => r.body).join('\n'));
    assert.deepEqual((await rowsOf(c)).map((r) => r.state), ['ready']);
    // The deleted instance's namespace goes in the background, right after its delete.
    await t.gvisor().releasesSettled();
    assert.equal((await hostObjects(t.dataDir)).netns.length, 2);
    // A's own quota is free again too, but the host is full.
    const again = await create(a, 'a2');
    assert.equal(again.statusCode, 503, again.body);
  });
});
