// A create's options (env, metadata, timeout_s) and the keep-alive, in core/ and the API
// over the runtime test double (a pausable one): what the instance answers (env names,
// never values), the env its commands get (profile < create < command), a create
// answered by the live instance with other options (409), the list's metadata filter
// across organizations, the deadline pausing or stopping the instance as the profile
// says and a keep-alive moving it, a warm pool instance taking the options as a room
// claims it, and the refusals. The same with real sandboxes is in
// test/host/instance-options.test.ts.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { PausableFakeRuntime } from '../support/fake-runtime.ts';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';
import { untilTrue } from '../support/until.ts';

type Json = any;
const codes = (instance: Json) =>
  (instance.state_history as { state: string; reason_code?: string }[]).filter((e) => e.reason_code !== undefined).map((e) => `${e.state}:${e.reason_code}`);

describe('a create\'s env, metadata and timeout_s', () => {
  let t: TestApp;
  let org: TestOrg;
  let other: TestOrg;
  let profile: string;
  const runtime = new PausableFakeRuntime();
  const room = (name: string, p = profile) => `/api/profile/${p}/room/${name}`;
  const call = async (method: 'GET' | 'POST' | 'DELETE', url: string, payload?: unknown, who = org) => {
    const res = await t.app.inject({ method, url, headers: who.headers, ...(payload === undefined ? {} : { payload: payload as Record<string, unknown> }) });
    return { status: res.statusCode, body: res.json() as Json, text: res.body };
  };

  before(async () => {
    t = await startTestApp({ fake: runtime, config: { expiryCheckIntervalMs: 3_600_000 } });
    org = await t.newOrg();
    other = await t.newOrg();
    const created = await call('POST', '/api/profiles', { name: 'opts', env: { SHARED: 'profile', PROFILE_ONLY: 'p' }, max_lifetime_s: 3600, idle_timeout_s: 0 });
    assert.equal(created.status, 201, created.text);
    profile = created.body.profile_id;
  });
  after(() => t.close());

  it('answers the options (env by name only) and gives the env to commands under the command\'s own', async () => {
    const created = await call('POST', room('a'), { env: { SECRET: 'hunter2-value', SHARED: 'create' }, metadata: { app: 'grader', user: 'u-42' }, timeout_s: 600 });
    assert.equal(created.status, 201, created.text);
    assert.deepEqual(created.body.env_names, ['SECRET', 'SHARED']);
    assert.deepEqual(created.body.metadata, { app: 'grader', user: 'u-42' });
    assert.equal(created.body.timeout_s, 600);
    const left = Date.parse(created.body.expires_at) - Date.now();
    assert.ok(left > 590_000 && left <= 600_000, `expires_at is ${left} ms away`);
    assert.ok(!created.text.includes('hunter2-value'), 'the answer must not carry env values');
    const got = await call('GET', room('a'));
    assert.ok(!got.text.includes('hunter2-value'));
    assert.deepEqual(got.body.metadata, { app: 'grader', user: 'u-42' });

    runtime.commands.length = 0;
    assert.equal((await call('POST', `${room('a')}/command`, { command: 'true' })).status, 200);
    assert.equal((await call('POST', `${room('a')}/command`, { command: 'true', env: { SHARED: 'command' } })).status, 200);
    assert.equal((await call('POST', `${room('a')}/command`, { command: 'true', background: true })).status, 202);
    const envs = runtime.commands.map((c) => c.env);
    assert.deepEqual(envs[0], { SHARED: 'create', PROFILE_ONLY: 'p', SECRET: 'hunter2-value' });
    assert.deepEqual(envs[1], { SHARED: 'command', PROFILE_ONLY: 'p', SECRET: 'hunter2-value' });
    assert.deepEqual(envs[2], envs[0]);
  });

  it('a create answered by the live instance: the same options (or none) get it, others are a 409 naming the fields', async () => {
    const id = (await call('GET', room('a'))).body.instance_id;
    for (const same of [{}, { env: { SHARED: 'create', SECRET: 'hunter2-value' } }, { metadata: { user: 'u-42', app: 'grader' }, timeout_s: 600 }]) {
      const res = await call('POST', room('a'), same);
      assert.equal(res.status, 200, res.text);
      assert.equal(res.body.instance_id, id);
    }
    const conflict = await call('POST', room('a'), { env: { SECRET: 'another-value', SHARED: 'create' }, timeout_s: 60 });
    assert.equal(conflict.status, 409, conflict.text);
    assert.equal(conflict.body.error, 'instance_options_conflict');
    assert.deepEqual(conflict.body.details.fields, ['env', 'timeout_s']);
    assert.ok(!conflict.text.includes('hunter2-value') && !conflict.text.includes('another-value'));
    const labels = await call('POST', room('a'), { metadata: { app: 'grader' } });
    assert.equal(labels.status, 409);
    assert.deepEqual(labels.body.details.fields, ['metadata']);
  });

  it('the list filters by metadata (all pairs must match), never showing another organization\'s instances', async () => {
    const mine = (await call('GET', room('a'))).body.instance_id;
    const theirs = await call('POST', room('b', other.defaultProfileId), { metadata: { app: 'grader', user: 'u-42' } }, other);
    assert.equal(theirs.status, 201, theirs.text);
    assert.equal((await call('POST', room('plain'))).status, 201);
    const list = async (query: string, who = org) => {
      const res = await call('GET', `/api/instances?metadata=${encodeURIComponent(query)}`, undefined, who);
      assert.equal(res.status, 200, res.text);
      return (res.body.instances as Json[]).map((i) => i.instance_id);
    };
    assert.deepEqual(await list('app=grader'), [mine]);
    assert.deepEqual(await list('app=grader&user=u-42'), [mine]);
    assert.deepEqual(await list('app=grader&user=u-43'), []);
    assert.deepEqual(await list('user=u-42', other), [theirs.body.instance_id]);
    // Positive control: without the filter the list has more than the labelled one.
    assert.ok((await call('GET', '/api/instances')).body.instances.length >= 2);
    for (const bad of ['app', 'app=a&app=b', '=x', '%zz=1']) {
      const res = await call('GET', `/api/instances?metadata=${encodeURIComponent(bad)}`);
      assert.equal(res.status, 400, bad);
      assert.equal(res.body.error, 'validation_error');
    }
  });

  it('the deadline pauses the instance (idle_action pause), a keep-alive moves it, and a resume restarts it', async () => {
    const { instance_id: id, expires_at: first } = (await call('POST', room('short'), { timeout_s: 60 })).body;
    const kept = await call('POST', `${room('short')}/keepalive`, { timeout_s: 120 });
    assert.equal(kept.status, 200, kept.text);
    assert.ok(Date.parse(kept.body.expires_at) > Date.parse(first) + 50_000, 'the keep-alive moved the deadline');
    assert.equal(kept.body.timeout_s, 60, 'its create\'s timeout_s stays');
    // Past the first deadline, not the moved one.
    assert.ok(!(await t.services.instances.expire(Date.now() + 61_000)).includes(id));
    assert.ok((await t.services.instances.expire(Date.now() + 121_000)).includes(id));
    const paused = (await call('GET', room('short'))).body;
    assert.equal(paused.state, 'paused');
    assert.deepEqual(codes(paused), ['pausing:timeout', 'paused:timeout']);
    const resumed = await call('POST', `${room('short')}/resume`);
    assert.equal(resumed.body.state, 'ready');
    const left = Date.parse(resumed.body.expires_at) - Date.now();
    assert.ok(left > 55_000 && left <= 60_000, `a resume restarts the deadline (${left} ms)`);
    // A keep-alive without timeout_s uses the create's.
    const again = await call('POST', `${room('short')}/keepalive`);
    assert.ok(Date.parse(again.body.expires_at) - Date.now() > 55_000);
    await call('DELETE', room('short'));
  });

  it('with idle_action stop the deadline stops the instance, and its room then says why', async () => {
    const stopping = await call('POST', '/api/profiles', { name: 'stops', idle_action: 'stop' });
    const p = stopping.body.profile_id;
    const { instance_id: id } = (await call('POST', room('s', p), { timeout_s: 30 })).body;
    assert.ok((await t.services.instances.expire(Date.now() + 31_000)).includes(id));
    const gone = await call('GET', room('s', p));
    assert.equal(gone.status, 404);
    assert.equal(gone.body.details.reason_code, 'timeout');
  });

  it('a deadline action given at create (an adapter\'s, as E2B\'s onTimeout) wins over the profile\'s idle_action, for the deadline only', async () => {
    const stops = (await call('GET', '/api/profiles/stops')).body.profile_id as string;
    const create = (p: string, roomId: string, timeoutAction: 'pause' | 'stop') =>
      t.services.instances.create(org.organizationId, p, roomId, { wait: true, timeout_s: 30, timeoutAction });
    const paused = (await create(stops, 'pause-at-deadline', 'pause')).instance.instance_id;
    const stopped = (await create(profile, 'stop-at-deadline', 'stop')).instance.instance_id;
    assert.ok(!(await t.services.instances.expire(Date.now() + 29_000)).includes(paused), 'not before its deadline');
    const expired = await t.services.instances.expire(Date.now() + 31_000);
    assert.ok(expired.includes(paused) && expired.includes(stopped), JSON.stringify(expired));
    const pausedNow = (await call('GET', room('pause-at-deadline', stops))).body;
    assert.equal(pausedNow.state, 'paused', 'paused although its profile stops idle instances');
    assert.deepEqual(codes(pausedNow), ['pausing:timeout', 'paused:timeout']);
    const gone = await call('GET', room('stop-at-deadline'));
    assert.equal(gone.status, 404, 'stopped although its profile pauses idle instances');
    assert.equal(gone.body.details.reason_code, 'timeout');
    const resumed = await call('POST', `${room('pause-at-deadline', stops)}/resume`);
    assert.equal(resumed.body.state, 'ready', resumed.text);
    await call('DELETE', room('pause-at-deadline', stops));
  });

  it('refuses bad options with 400s, and makes no instance for them', async () => {
    const bad: [string, unknown][] = [
      ['env name', { env: { '1BAD': 'x' } }],
      ['reserved env name', { env: { ROOMKIT_X: 'x' } }],
      ['env value too long', { env: { A: 'x'.repeat(4097) } }],
      ['env too large in all', { env: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`V${i}`, 'x'.repeat(4000)])) }],
      ['env not strings', { env: { A: 1 } }],
      ['metadata key', { metadata: { 'bad key': 'x' } }],
      ['metadata value too long', { metadata: { k: 'x'.repeat(257) } }],
      ['too many labels', { metadata: Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, 'v'])) }],
      ['timeout 0', { timeout_s: 0 }],
      ['timeout not an integer', { timeout_s: 1.5 }],
    ];
    for (const [what, body] of bad) {
      const res = await call('POST', room('never'), body);
      assert.equal(res.status, 400, `${what}: ${res.text}`);
      assert.equal(res.body.error, 'validation_error', what);
    }
    const above = await call('POST', room('never'), { timeout_s: 7200 });
    assert.equal(above.status, 400);
    assert.match(above.body.message, /max_lifetime_s of 3600/);
    assert.equal((await call('GET', room('never'))).status, 404);
    const keepAbove = await call('POST', `${room('a')}/keepalive`, { timeout_s: 7200 });
    assert.equal(keepAbove.status, 400);
    assert.match(keepAbove.body.message, /max_lifetime_s of 3600/);
    assert.equal((await call('POST', `${room('nothing')}/keepalive`, {})).status, 404);
  });
});

describe('a warm pool instance takes a create\'s options as a room claims it', () => {
  let t: TestApp;
  let org: TestOrg;
  const runtime = new PausableFakeRuntime();

  before(async () => {
    t = await startTestApp({ fake: runtime, config: { expiryCheckIntervalMs: 100, warmPoolMaxInstances: 4 } });
    org = await t.newOrg();
  });
  after(() => t.close());

  it('claims from the pool with options given', async () => {
    const created = await t.app.inject({ method: 'POST', url: '/api/profiles', headers: org.headers, payload: { name: 'pooled', warm_pool: 1 } });
    const profile = created.json().profile_id as string;
    await untilTrue(
      'the pool to fill',
      async () => (await t.app.inject({ method: 'GET', url: `/api/profiles/${profile}`, headers: org.headers })).json().warm_pool_instances.ready >= 1,
      { everyMs: 20 },
    );
    const res = await t.app.inject({
      method: 'POST',
      url: `/api/profile/${profile}/room/r`,
      headers: org.headers,
      payload: { env: { TOKEN: 't' }, metadata: { app: 'pool' }, timeout_s: 300 },
    });
    assert.equal(res.statusCode, 201, res.body);
    const instance = res.json();
    assert.notEqual(instance.claimed_at, null, 'taken from the pool');
    assert.deepEqual([instance.env_names, instance.metadata, instance.timeout_s], [['TOKEN'], { app: 'pool' }, 300]);
    assert.ok(instance.expires_at !== null);
    runtime.commands.length = 0;
    await t.app.inject({ method: 'POST', url: `/api/profile/${profile}/room/r/command`, headers: org.headers, payload: { command: 'true' } });
    assert.equal(runtime.commands[0]?.env.TOKEN, 't');
    const listed = await t.app.inject({ method: 'GET', url: `/api/instances?metadata=${encodeURIComponent('app=pool')}`, headers: org.headers });
    assert.deepEqual(listed.json().instances.map((i: Json) => i.instance_id), [instance.instance_id]);
  });
});
