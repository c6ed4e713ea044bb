// Warm pools with real gVisor sandboxes: a claim answers in a fraction of a cold create
// with an instance that runs commands, and the pool refills; pooled instances count
// against the organization's quotas; a profile change replaces the pooled sandbox and
// leaves nothing of it on the host; a restart with on_shutdown `keep` adopts the pooled
// instance and hands it out, and a stop leaves nothing. One server, then a second on the
// same data directory.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { PROVISION_STATES } from '../../src/core/lifecycle.ts';
import { hostTag, networkNames } from '../../src/network/netns.ts';
import { startTestApp, TEST_DATA_PREFIX, TEST_OWNER_FILE, type TestApp, type TestOrg } from '../support/app.ts';
import { hostObjects } from '../support/host.ts';
import { until, untilTrue } from '../support/until.ts';

const POOL = '10.239.0.0/24';

let dataDir: string;
let t: TestApp;
let org: TestOrg;
let profileId: string;

const start = (onShutdown: 'keep' | 'stop') =>
  startTestApp({ gvisorPool: POOL, onShutdown, config: { dataDir, expiryCheckIntervalMs: 500 } });
const create = (room: string, profile = profileId) =>
  t.app.inject({ method: 'POST', url: `/api/profile/${profile}/room/${room}`, headers: org.headers, payload: {} });
const command = (room: string, text: string) =>
  t.app.inject({ method: 'POST', url: `/api/profile/${profileId}/room/${room}/command`, headers: org.headers, payload: { command: text } });

/** The profile's pooled instances that are ready, once there is exactly one and none starting. */
async function pooledReady(timeoutMs = 120_000): Promise<string> {
  let seen: unknown;
  return until(
    'the pool to get one ready instance',
    async () => {
      const profile = (await t.app.inject({ method: 'GET', url: `/api/profiles/${profileId}`, headers: org.headers })).json();
      seen = profile.warm_pool_instances;
      const rows = await t.services.db
        .selectFrom('instances')
        .select('id')
        .where('profile_id', '=', profileId)
        .where('warm_pool_key', 'is not', null)
        .where('state', '=', 'ready')
        .execute();
      return profile.warm_pool_instances.ready === 1 && profile.warm_pool_instances.starting === 0 && rows.length === 1 ? rows[0]!.id : undefined;
    },
    { timeoutMs, everyMs: 100, detail: () => JSON.stringify(seen) },
  );
}

const stateOf = async (id: string) =>
  (await t.services.db.selectFrom('instances').select('state').where('id', '=', id).executeTakeFirstOrThrow()).state;

before(async () => {
  dataDir = mkdtempSync(join(tmpdir(), TEST_DATA_PREFIX));
  writeFileSync(join(dataDir, TEST_OWNER_FILE), JSON.stringify({ pid: process.pid, pool: POOL }));
  t = await start('keep');
  org = await t.newOrg();
  profileId = await t.createProfile(org, { name: 'warm', warm_pool: 1, env: { VERSION: 'one' } });
});
after(async () => {
  await t.closeLeavingNothing();
  rmSync(dataDir, { recursive: true, force: true });
});

describe('warm pools with real instances', () => {
  it('claims a pooled instance in a fraction of a cold create; it runs commands, and the pool refills', async (ctx) => {
    // A cold create of the same image (the default profile has no pool) to compare with.
    const coldStarted = performance.now();
    const cold = await create('cold', org.defaultProfileId);
    const coldMs = performance.now() - coldStarted;
    assert.equal(cold.statusCode, 201, cold.body);
    assert.equal(cold.json().claimed_at, null);

    const pooled = await pooledReady();
    // The pooled instance counts against the organization's quotas.
    const usage = (await t.app.inject({ method: 'GET', url: '/api/usage', headers: org.headers })).json();
    assert.equal(usage.quotas.instances.used, 2);
    assert.equal(usage.quotas.memory_mb.used, 2048);

    const claimStarted = performance.now();
    const claim = await create('warm-1');
    const claimMs = performance.now() - claimStarted;
    assert.equal(claim.statusCode, 201, claim.body);
    const instance = claim.json();
    assert.equal(instance.instance_id, pooled);
    assert.equal(typeof instance.claimed_at, 'string');
    assert.deepEqual(instance.state_history.map((s: { state: string }) => s.state), [...PROVISION_STATES, 'ready']);
    assert.equal(instance.state_history.at(-1).reason_code, 'claimed');
    ctx.diagnostic(`claim ${claimMs.toFixed(1)} ms, cold create ${coldMs.toFixed(1)} ms`);
    assert.ok(claimMs * 3 < coldMs, `a claim took ${claimMs.toFixed(1)} ms, a cold create ${coldMs.toFixed(1)} ms`);

    const ran = await command('warm-1', 'echo "$VERSION" > made.txt && id -un && cat made.txt');
    assert.equal(ran.statusCode, 200, ran.body);
    assert.equal(ran.json().result.exit_code, 0);
    assert.equal(ran.json().result.output, 'user\none\n');
    assert.deepEqual(ran.json().result.files_changed.map((f: { path: string }) => f.path), ['/home/user/made.txt']);

    const refilled = await pooledReady();
    assert.notEqual(refilled, pooled);
    assert.equal((await hostObjects(t.dataDir)).containers.length, 3);
  });

  it('replaces the pooled instance when the profile changes, leaving nothing of the old one on the host', async () => {
    const old = await pooledReady();
    const patched = await t.app.inject({ method: 'PATCH', url: `/api/profiles/${profileId}`, headers: org.headers, payload: { env: { VERSION: 'two' } } });
    assert.equal(patched.statusCode, 200, patched.body);
    const fresh = await pooledReady();
    assert.notEqual(fresh, old);
    await untilTrue('the old pooled instance to stop', async () => (await stateOf(old)) === 'stopped', { timeoutMs: 10_000, everyMs: 100 });
    // `stopped` comes once the sandbox is killed; the rest of it is released right after.
    await t.gvisor().releasesSettled();
    const host = await hostObjects(t.dataDir, [old]);
    assert.ok(!host.containers.includes(old), 'the old sandbox still runs');
    assert.ok(!host.netns.includes(networkNames(hostTag(t.dataDir), old).netns), 'the old namespace is left');
    assert.deepEqual(host.cgroups, []);
    assert.equal(host.containers.length, 3);

    const claim = await create('warm-2');
    assert.equal(claim.json().instance_id, fresh);
    assert.equal((await command('warm-2', 'echo "$VERSION"')).json().result.output, 'two\n');
  });

  it('keeps the pooled instance across a restart with on_shutdown keep and hands it out after', async () => {
    const pooled = await pooledReady();
    await t.app.close();
    await t.services.close();
    t = await start('stop');
    assert.equal(await pooledReady(), pooled);
    const claim = await create('after-restart');
    assert.equal(claim.statusCode, 201, claim.body);
    assert.equal(claim.json().instance_id, pooled);
    assert.equal((await command('after-restart', 'echo "$VERSION"')).json().result.output, 'two\n');
    // after(): the stop removes every instance, pooled ones too, and nothing is left.
  });
});
