// Host admission by measured use, and memory pressure, over the runtime test double (a
// pausable one, whose instances use what the test sets): a create that does not fit
// pauses the least recently used idle instance instead of being refused; a busy one or
// one used within ROOMKIT_PRESSURE_IDLE_S is never paused; a paused one resumes on its
// next request, pausing another idle one for its room; a refusal says what was short
// and how many were paused; the periodic check keeps the reserve free; /metrics and
// the operator's capacity show it. The same with real sandboxes is in
// test/host/memory-pressure.test.ts.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { PausableFakeRuntime } from '../support/fake-runtime.ts';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';

type Json = any;
const OPERATOR = 'operator-token-for-memory-pressure';

describe('memory pressure with a runtime that can pause', () => {
  let t: TestApp;
  let org: TestOrg;
  let profile: string;
  const runtime = new PausableFakeRuntime();
  const room = (name: string) => `/api/profile/${profile}/room/${name}`;
  const call = async (method: 'GET' | 'POST' | 'DELETE', url: string, payload?: Record<string, unknown>) => {
    const res = await t.app.inject({ method, url, headers: org.headers, ...(payload === undefined ? {} : { payload }) });
    return { status: res.statusCode, body: res.json() as Json, headers: res.headers };
  };
  const stateOf = async (name: string) => (await call('GET', room(name))).body as Json;
  const idOf = async (name: string) => (await stateOf(name)).instance_id as string;
  /** Makes `name` the least recently used instance by far. */
  const ageOf = async (name: string, seconds: number) => {
    const at = new Date(Date.now() - seconds * 1000).toISOString();
    await t.services.db.updateTable('instances').set({ last_active_at: at }).where('id', '=', await idOf(name)).execute();
  };

  before(async () => {
    // A host of 1000 MB, all of it for instances, 200 MB of it kept free: 800 MB, so
    // six instances of 128 MB fit (768), a seventh does not.
    t = await startTestApp({
      fake: runtime,
      config: { admitHostMemoryMb: 1000, admitMemoryPercent: 100, admitReserveMb: 200, pressureIdleS: 60, operatorToken: OPERATOR },
    });
    org = await t.newOrg();
    profile = await t.createProfile(org, { name: 'small', memory_mb: 128 });
  });
  after(() => t.close());

  it('admits by what instances use, not by their memory_mb', async () => {
    for (const name of ['a', 'b', 'c', 'd', 'e', 'f']) assert.equal((await call('POST', room(name), {})).status, 201, name);
    // Measured, each uses 128 MB: a seventh does not fit and nothing is idle yet.
    const refused = await call('POST', room('g'), {});
    assert.equal(refused.status, 503, JSON.stringify(refused.body));
    assert.equal(refused.body.error, 'capacity_exhausted');
    assert.equal(refused.headers['retry-after'], '30');
    assert.deepEqual(refused.body.details, {
      resource: 'memory', limit_mb: 1000, committed_mb: 768, reserve_mb: 200, requested_mb: 128, paused_for_room: 0, retry_after_s: 30,
    });
    assert.match(refused.body.message, /ROOMKIT_ADMIT_RESERVE_MB/);
    assert.match(refused.body.message, /no instance has been idle long enough to be paused \(ROOMKIT_PRESSURE_IDLE_S\)/);
    // Idle ones use far less than their memory_mb: now the seventh fits, and more.
    for (const name of ['a', 'b', 'c', 'd', 'e', 'f']) runtime.memoryInUse.set(await idOf(name), 30);
    assert.equal((await call('POST', room('g'), {})).status, 201);
    runtime.memoryInUse.set(await idOf('g'), 30);
    // 7 × 30 = 210 in use: 590 MB of room, four more starting instances at 128 each.
    const capacity = await t.app.inject({ method: 'GET', url: '/operator/capacity', headers: { authorization: `Bearer ${OPERATOR}` } });
    assert.equal(capacity.statusCode, 200, capacity.body);
    const memory = capacity.json().memory;
    assert.deepEqual(
      { in_use_mb: memory.in_use_mb, reserve_mb: memory.reserve_mb, limit_mb: memory.limit_mb, room_mb: memory.room_mb, under_pressure: memory.under_pressure },
      { in_use_mb: 210, reserve_mb: 200, limit_mb: 1000, room_mb: 590, under_pressure: false },
    );
    assert.equal(memory.committed_mb, 7 * 128, 'what their limits commit, as before');
    // The organization sees what its own instances use (here all of them), not the host's figures.
    const usage = (await call('GET', '/api/usage')).body;
    assert.equal(usage.memory_in_use_mb, 210);
    assert.equal(usage.host, undefined);
    assert.equal(capacity.json().admissible_default_instances, Math.floor(590 / 1024), 'a default instance starts at its whole memory_mb in the double');
  });

  it('pauses the least recently used idle instance instead of refusing a create', async () => {
    // Grown: each of the seven uses 100 MB now (700 of 800).
    for (const name of ['a', 'b', 'c', 'd', 'e', 'f', 'g']) runtime.memoryInUse.set(await idOf(name), 100);
    await ageOf('c', 600);
    await ageOf('b', 300);
    // b is older than the idle time too, but busy: a command runs in it.
    const busy = new Set([await idOf('b')]);
    t.services.instances.addBusyCheck((id) => busy.has(id));
    const created = await call('POST', room('h'), {});
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const c = await stateOf('c');
    assert.equal(c.state, 'paused');
    const last = c.state_history.at(-1);
    assert.equal(last.reason_code, 'memory_pressure');
    assert.match(last.reason, /make room/);
    for (const name of ['a', 'b', 'd', 'e', 'f', 'g']) assert.equal((await stateOf(name)).state, 'ready', name);
    busy.clear();
    const metrics = await t.app.inject({ method: 'GET', url: '/metrics' });
    assert.match(metrics.body, /^roomkit_memory_pressure_pauses_total 1$/m);
    assert.match(metrics.body, /^roomkit_admission_memory_reserve_bytes 209715200$/m);
    assert.match(metrics.body, /^roomkit_instances_memory_in_use_bytes \d+$/m);
  });

  it('resumes a paused instance on its next request, pausing another idle one for its room', async () => {
    runtime.memoryInUse.set(await idOf('h'), 100);
    // 700 MB in use of 800: c's 128 MB estimate needs b (now idle, the oldest) paused.
    const ran = await call('POST', `${room('c')}/command`, { command: 'echo back' });
    assert.equal(ran.status, 200, JSON.stringify(ran.body));
    assert.equal((await stateOf('c')).state, 'ready');
    const b = await stateOf('b');
    assert.equal(b.state, 'paused');
    assert.equal(b.state_history.at(-1).reason_code, 'memory_pressure');
  });

  it('refuses only when no idle instance is left to pause, saying how many it paused', async () => {
    const refused = await (async () => {
      // Every other instance is recent: a, d and e old enough to go, none after them.
      for (const name of ['a', 'd', 'e']) await ageOf(name, 120);
      for (const name of ['a', 'd', 'e', 'f', 'g', 'h', 'c']) runtime.memoryInUse.set(await idOf(name), 200);
      return call('POST', room('i'), {});
    })();
    assert.equal(refused.status, 503, JSON.stringify(refused.body));
    assert.equal(refused.body.details.paused_for_room, 3);
    assert.match(refused.body.message, /3 idle instances were paused to make room, and no other has been idle long enough/);
    for (const name of ['a', 'd', 'e']) assert.equal((await stateOf(name)).state, 'paused', name);
    assert.equal((await stateOf('f')).state, 'ready');
  });

  it('pauses idle instances while running ones eat into the reserve', async () => {
    // f, g, h and c use 200 each: 800 of 1000, the reserve's 200 untouched.
    assert.deepEqual(await t.services.instances.memoryPressure.relieve(), []);
    runtime.memoryInUse.set(await idOf('f'), 300);
    await ageOf('g', 200);
    await ageOf('h', 100);
    const paused = await t.services.instances.memoryPressure.relieve();
    assert.deepEqual(paused, [await idOf('g')], 'one was enough: 700 of 800');
    assert.equal((await stateOf('h')).state, 'ready');
  });
});

describe('memory pressure with a warm pool', () => {
  it('removes warm pool instances before it pauses an idle instance in a room', async () => {
    const runtime = new PausableFakeRuntime();
    const t = await startTestApp({ fake: runtime, config: { admitHostMemoryMb: 1000, admitMemoryPercent: 100, admitReserveMb: 200, pressureIdleS: 0 } });
    try {
      const org = await t.newOrg();
      const pooledProfile = await t.createProfile(org, { name: 'pooled', memory_mb: 128, warm_pool: 1 });
      const small = await t.createProfile(org, { name: 'small', memory_mb: 128 });
      const pooled = async () =>
        t.services.db.selectFrom('instances').select(['id', 'state']).where('profile_id', '=', pooledProfile).where('warm_pool_key', 'is not', null).execute();
      for (let i = 0; i < 100 && !(await pooled()).some((r) => r.state === 'ready'); i++) await new Promise((r) => setTimeout(r, 50));
      const [member] = await pooled();
      assert.equal(member?.state, 'ready', 'the pool filled');
      const created = await t.app.inject({ method: 'POST', url: `/api/profile/${small}/room/x`, headers: org.headers, payload: {} });
      assert.equal(created.statusCode, 201, created.body);
      // x grows to 700 MB: with the pooled 128, 828 of the 800 instances may use.
      runtime.memoryInUse.set(created.json().instance_id, 700);
      assert.deepEqual(await t.services.instances.memoryPressure.relieve(), [], 'no instance in a room was paused');
      const gone = await t.services.db.selectFrom('instances').select('state').where('id', '=', member!.id).executeTakeFirstOrThrow();
      assert.equal(gone.state, 'stopped');
      assert.equal((await t.app.inject({ method: 'GET', url: `/api/profile/${small}/room/x`, headers: org.headers })).json().state, 'ready');
      // Still short without a pool: x itself is idle now and goes.
      runtime.memoryInUse.set(created.json().instance_id, 900);
      assert.deepEqual(await t.services.instances.memoryPressure.relieve(), [created.json().instance_id]);
    } finally {
      await t.close();
    }
  });
});
