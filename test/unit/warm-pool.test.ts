// Warm pools over the API with the runtime test double: a profile's pool fills, a create
// claims a pooled instance (history, claimed_at, metrics, audit) and the pool refills; a
// profile change replaces the pool, a smaller size shrinks it, a delete removes it; the
// pool counts against quotas and gives way to a create that needs its room; a pool
// whose instances fail to start backs off; a restart adopts or replaces pooled instances;
// ROOMKIT_WARM_POOL_MAX_INSTANCES=0 turns pools off. The same with real sandboxes is in
// test/host/warm-pool.test.ts.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { after, afterEach, describe, it } from 'node:test';
import { PROVISION_STATES } from '../../src/core/lifecycle.ts';
import { FakeRuntime } from '../support/fake-runtime.ts';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';
import { until } from '../support/until.ts';

const apps: TestApp[] = [];
afterEach(async () => {
  for (const app of apps.splice(0)) await app.close();
});

async function start(options: Parameters<typeof startTestApp>[0] = {}): Promise<{ t: TestApp; org: TestOrg }> {
  const t = await startTestApp({ ...options, config: { expiryCheckIntervalMs: 100, ...options.config } });
  apps.push(t);
  return { t, org: await t.newOrg() };
}

interface PoolStatus {
  ready: number;
  starting: number;
}

const profileOf = async (t: TestApp, org: TestOrg, id: string) =>
  (await t.app.inject({ method: 'GET', url: `/api/profiles/${id}`, headers: org.headers })).json() as { warm_pool: number; warm_pool_instances: PoolStatus };

/** Waits until the profile's pool shows exactly `ready` ready instances and none starting. */
const poolIs = (t: TestApp, org: TestOrg, id: string, ready: number) =>
  until(`a pool of ${ready} ready`, async () => {
    const status = (await profileOf(t, org, id)).warm_pool_instances;
    return status.ready === ready && status.starting === 0 ? status : undefined;
  });

/** Pooled instances (live, in no room) of a profile, from the store. */
const pooledRows = (t: TestApp, profileId: string) =>
  t.services.db
    .selectFrom('instances')
    .select(['id', 'state', 'warm_pool_key', 'spec'])
    .where('profile_id', '=', profileId)
    .where('warm_pool_key', 'is not', null)
    .where('state', 'not in', ['stopped', 'failed'])
    .orderBy('created_at')
    .orderBy('id')
    .execute();

const create = (t: TestApp, org: TestOrg, profileId: string, room: string) =>
  t.app.inject({ method: 'POST', url: `/api/profile/${profileId}/room/${room}`, headers: org.headers, payload: {} });

describe('a warm pool', () => {
  it('fills to its size; a create claims a booted instance, shows when, and the pool refills', async () => {
    const { t, org } = await start();
    const profileId = await t.createProfile(org, { name: 'pooled', warm_pool: 2 });
    await poolIs(t, org, profileId, 2);
    const pooled = (await pooledRows(t, profileId)).map((r) => r.id);
    assert.equal(pooled.length, 2);
    // Pooled instances are in no room: the organization's list does not show them.
    const listed = (await t.app.inject({ method: 'GET', url: '/api/instances', headers: org.headers })).json();
    assert.equal(listed.instances.length, 0);

    const res = await create(t, org, profileId, 'claimer');
    assert.equal(res.statusCode, 201, res.body);
    const instance = res.json();
    assert.ok(pooled.includes(instance.instance_id), 'the create did not take a pooled instance');
    assert.equal(instance.room_id, 'claimer');
    assert.equal(instance.state, 'ready');
    assert.equal(typeof instance.claimed_at, 'string');
    // The seven states of its making with their times, then the claim.
    const history = instance.state_history as { state: string; at: string; reason_code?: string }[];
    assert.deepEqual(history.map((s) => s.state), [...PROVISION_STATES, 'ready']);
    assert.equal(history.at(-1)!.reason_code, 'claimed');
    assert.equal(history.at(-1)!.at, instance.claimed_at);
    assert.ok(Date.parse(history.at(-2)!.at) <= Date.parse(instance.claimed_at));
    // It answers like any instance of the room, and the room's GET and the list show it.
    const got = (await t.app.inject({ method: 'GET', url: `/api/profile/${profileId}/room/claimer`, headers: org.headers })).json();
    assert.equal(got.instance_id, instance.instance_id);
    const cmd = await t.app.inject({ method: 'POST', url: `/api/profile/${profileId}/room/claimer/command`, headers: org.headers, payload: { command: 'true' } });
    assert.equal(cmd.statusCode, 200, cmd.body);
    // A second create of the room answers the same instance (200), not another claim.
    const again = await create(t, org, profileId, 'claimer');
    assert.equal(again.statusCode, 200);
    assert.equal(again.json().instance_id, instance.instance_id);

    // The pool refills with a new one.
    await poolIs(t, org, profileId, 2);
    const refilled = (await pooledRows(t, profileId)).map((r) => r.id);
    assert.ok(!refilled.includes(instance.instance_id));

    // Metrics count claims and cold creates apart; the audit trail records the claim.
    await create(t, org, org.defaultProfileId, 'cold');
    const metrics = (await t.app.inject({ method: 'GET', url: '/metrics' })).body;
    assert.match(metrics, /roomkit_instance_assignments_total\{source="warm_pool"\} 1\n/);
    assert.match(metrics, /roomkit_instance_assignments_total\{source="cold"\} 1\n/);
    await t.services.audit.flush();
    const events = (await t.app.inject({ method: 'GET', url: '/api/audit', headers: org.headers })).json().events as { action: string; room_id: string; instance_id: string }[];
    assert.deepEqual(
      events.filter((e) => e.action.startsWith('instance.')).map((e) => [e.action, e.room_id]),
      [['instance.create', 'cold'], ['instance.create', 'claimer'], ['instance.claim', 'claimer']],
    );
  });

  it('is replaced when the profile changes: an instance made from the old profile is never handed out', async () => {
    const runtime = new FakeRuntime();
    const { t, org } = await start({ fake: runtime });
    const profileId = await t.createProfile(org, { name: 'changing', warm_pool: 2, env: { VERSION: 'one' } });
    await poolIs(t, org, profileId, 2);
    const old = (await pooledRows(t, profileId)).map((r) => r.id);

    // Hold the new ones while they start: a create meanwhile must make its own, not take an old one.
    runtime.options = { holdAt: 'vm_booted' };
    const patched = await t.app.inject({ method: 'PATCH', url: `/api/profiles/${profileId}`, headers: org.headers, payload: { env: { VERSION: 'two' } } });
    assert.equal(patched.statusCode, 200);
    assert.equal(patched.json().warm_pool_instances.ready, 0, 'pooled instances of the old profile are counted as the new one\'s');
    await until('the old pool to be gone', async () => (old.every((id) => runtime.destroyed.includes(id)) ? true : undefined));
    const during = create(t, org, profileId, 'during-change');
    await new Promise((r) => setTimeout(r, 50));
    runtime.release();
    runtime.options = {};
    const made = (await during).json();
    assert.ok(!old.includes(made.instance_id));
    // On a slow host the new pool may be ready before this create looks: a claim of the
    // new profile's instance is right too, which the spec below tells apart from an old one.
    assert.deepEqual(JSON.parse((await t.services.db.selectFrom('instances').select('spec').where('id', '=', made.instance_id).executeTakeFirstOrThrow()).spec!).env, { VERSION: 'two' });

    await poolIs(t, org, profileId, 2);
    for (const row of await pooledRows(t, profileId)) assert.deepEqual(JSON.parse(row.spec!).env, { VERSION: 'two' });
    const claimed = (await create(t, org, profileId, 'after-change')).json();
    assert.equal(typeof claimed.claimed_at, 'string');
    const rows = await t.services.db.selectFrom('instances').select(['id', 'state']).where('id', 'in', old).execute();
    assert.deepEqual(rows.map((r) => r.state), ['stopped', 'stopped']);
    const history = (await t.services.instances.list(org.organizationId, { limit: 10 })).instances;
    assert.ok(!history.some((i) => old.includes(i.instance_id)), 'removed pooled instances are listed');
  });

  it('never hands out an instance made from an older version of the profile, even before the pool has replaced it', async () => {
    // No periodic pass: only the change itself would make the pool look again.
    const { t, org } = await start({ config: { expiryCheckIntervalMs: 3_600_000 } });
    const profileId = await t.createProfile(org, { name: 'stale', warm_pool: 1, env: { VERSION: 'one' } });
    await poolIs(t, org, profileId, 1);
    const [old] = await pooledRows(t, profileId);
    // The profile changes behind the pool's back (as a change whose notice has not been acted on yet).
    const row = await t.services.db.selectFrom('profiles').select('spec').where('id', '=', profileId).executeTakeFirstOrThrow();
    const spec = { ...JSON.parse(row.spec), env: { VERSION: 'two' } };
    await t.services.db.updateTable('profiles').set({ spec: JSON.stringify(spec) }).where('id', '=', profileId).execute();
    assert.deepEqual((await profileOf(t, org, profileId)).warm_pool_instances, { ready: 0, starting: 0 });

    const made = (await create(t, org, profileId, 'fresh')).json();
    assert.notEqual(made.instance_id, old!.id);
    assert.equal(made.claimed_at, null);
    assert.deepEqual((await pooledRows(t, profileId)).map((r) => r.id), [old!.id], 'the old pooled instance was not there to be refused');
  });

  it('shrinks when its size is lowered, and goes with its profile (which a pool does not keep from being deleted)', async () => {
    const runtime = new FakeRuntime();
    const { t, org } = await start({ fake: runtime });
    const profileId = await t.createProfile(org, { name: 'shrinking', warm_pool: 3 });
    await poolIs(t, org, profileId, 3);
    const kept = (await pooledRows(t, profileId)).map((r) => r.id);
    await t.app.inject({ method: 'PATCH', url: `/api/profiles/${profileId}`, headers: org.headers, payload: { warm_pool: 1 } });
    await poolIs(t, org, profileId, 1);
    // The size is no change to the instances: the oldest stays (the others stop as the pool is counted without them).
    await until('the pool to keep only its oldest', async () => ((await pooledRows(t, profileId)).length === 1 ? true : undefined));
    assert.deepEqual((await pooledRows(t, profileId)).map((r) => r.id), [kept[0]]);

    const del = await t.app.inject({ method: 'DELETE', url: `/api/profiles/${profileId}`, headers: org.headers });
    assert.equal(del.statusCode, 204, del.body);
    await until('the pool to be gone', async () => ((await pooledRows(t, profileId)).length === 0 ? true : undefined));
    assert.ok(runtime.destroyed.includes(kept[0]!));
    assert.equal(runtime.live.size, 0);
  });

  it('counts against the quotas, and gives way to a create that needs what it holds', async () => {
    const runtime = new FakeRuntime();
    const { t, org } = await start({ fake: runtime, config: { quotaInstances: 3 } });
    const profileId = await t.createProfile(org, { name: 'quota', warm_pool: 3 });
    await poolIs(t, org, profileId, 3);
    const usage = (await t.app.inject({ method: 'GET', url: '/api/usage', headers: org.headers })).json();
    assert.equal(usage.quotas.instances.used, 3);

    // Another profile's create would go over the instances quota: a pooled instance makes room.
    const res = await create(t, org, org.defaultProfileId, 'needs-room');
    assert.equal(res.statusCode, 201, res.body);
    assert.equal(res.json().claimed_at, null);
    assert.equal((await pooledRows(t, profileId)).length, 2);
    // The pool does not take the room back while the quota is full.
    await new Promise((r) => setTimeout(r, 300));
    assert.equal((await pooledRows(t, profileId)).length, 2);
    // A claim frees no quota (the instance counts either way), and a full quota with no pool left still refuses.
    assert.equal((await create(t, org, profileId, 'claim-1')).statusCode, 201);
    assert.equal((await create(t, org, profileId, 'claim-2')).statusCode, 201);
    const refused = await create(t, org, org.defaultProfileId, 'over');
    assert.equal(refused.statusCode, 403);
    assert.equal(refused.json().error, 'quota_exceeded');
  });

  it('gives way to another organization\'s create when the host is full, and refuses only when no pool is left', async () => {
    // The double's instances use their memory_mb: a share of this host's memory that holds exactly two instances (no reserve).
    const hostMb = Math.floor(totalmem() / (1024 * 1024));
    const percent = Math.ceil((2 * 1024 * 100) / hostMb);
    assert.ok(Math.floor((hostMb * percent) / 100) < 3 * 1024, `host of ${hostMb} MB`);
    const { t, org } = await start({ config: { admitMemoryPercent: percent, admitReserveMb: 0 } });
    const profileId = await t.createProfile(org, { name: 'host-full', warm_pool: 2 });
    await poolIs(t, org, profileId, 2);
    const [b, c, d] = [await t.newOrg(), await t.newOrg(), await t.newOrg()];
    const first = await create(t, b, b.defaultProfileId, 'b');
    assert.equal(first.statusCode, 201, first.body);
    assert.equal((await pooledRows(t, profileId)).length, 1);
    const second = await create(t, c, c.defaultProfileId, 'c');
    assert.equal(second.statusCode, 201, second.body);
    assert.equal((await pooledRows(t, profileId)).length, 0);
    // Nothing pooled is left to give way: the host is full of instances in rooms.
    const refused = await create(t, d, d.defaultProfileId, 'd');
    assert.equal(refused.statusCode, 503, refused.body);
    assert.equal(refused.json().error, 'capacity_exhausted');
  });

  it('backs off when its instances fail to start, instead of making failed ones in a loop', async () => {
    const runtime = new FakeRuntime({ failAt: { step: 'vm_booted', message: 'boot failed' } });
    const { t, org } = await start({ fake: runtime });
    const profileId = await t.createProfile(org, { name: 'failing', warm_pool: 2 });
    await new Promise((r) => setTimeout(r, 1000));
    const failed = await t.services.db.selectFrom('instances').select('id').where('profile_id', '=', profileId).where('state', '=', 'failed').execute();
    // The first pass starts the pool's size; then it waits (5 s, doubling) before trying again.
    assert.ok(failed.length >= 1 && failed.length <= 3, `${failed.length} failed pooled instances in 1 s`);
    // A create in a room still works by itself.
    runtime.options = {};
    assert.equal((await create(t, org, profileId, 'cold-anyway')).statusCode, 201);
  });

  it('is off with ROOMKIT_WARM_POOL_MAX_INSTANCES=0', async () => {
    const { t, org } = await start({ config: { warmPoolMaxInstances: 0 } });
    const profileId = await t.createProfile(org, { name: 'off', warm_pool: 2 });
    await new Promise((r) => setTimeout(r, 300));
    assert.equal((await pooledRows(t, profileId)).length, 0);
    assert.equal((await create(t, org, profileId, 'room')).json().claimed_at, null);
  });

  it('is kept across a restart with on_shutdown keep, and replaced when the host lost it', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'roomkit-test-'));
    after(() => rmSync(dataDir, { recursive: true, force: true }));
    const runtime = new FakeRuntime();
    const first = await startTestApp({ fake: runtime, onShutdown: 'keep', config: { dataDir, expiryCheckIntervalMs: 100 } });
    const org = await first.newOrg();
    const profileId = await first.createProfile(org, { name: 'restart', warm_pool: 2 });
    await poolIs(first, org, profileId, 2);
    const before = (await pooledRows(first, profileId)).map((r) => r.id).sort();
    await first.app.close();
    await first.services.close();

    // The same host: the pooled instances are adopted and handed out.
    const second = await startTestApp({ fake: runtime, onShutdown: 'keep', config: { dataDir, expiryCheckIntervalMs: 100 } });
    await poolIs(second, org, profileId, 2);
    assert.deepEqual((await pooledRows(second, profileId)).map((r) => r.id).sort(), before);
    const claimed = (await create(second, org, profileId, 'after-restart')).json();
    assert.ok(before.includes(claimed.instance_id));
    await second.app.close();
    await second.services.close();

    // A host that lost them: they are recorded failed, and the pool starts new ones.
    const lost = new FakeRuntime();
    const third = await startTestApp({ fake: lost, onShutdown: 'stop', config: { dataDir, expiryCheckIntervalMs: 100 } });
    apps.push(third);
    await poolIs(third, org, profileId, 2);
    const now = (await pooledRows(third, profileId)).map((r) => r.id);
    assert.ok(now.every((id) => !before.includes(id)));
    const old = await third.services.db.selectFrom('instances').select('state').where('id', 'in', before.filter((id) => id !== claimed.instance_id)).execute();
    assert.deepEqual(old.map((r) => r.state), ['failed']);
  });
});
