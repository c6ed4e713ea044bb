// Pause and resume in core/ and the API, over the runtime test double (a pausable one,
// and one that cannot pause): profile fields, quotas counting a paused instance's disk
// alone, a resume refused by a quota leaving it paused, a failed resume, idle and
// retention, requests that wake a paused instance, and a start settling half-done pauses.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sumResources } from '../../src/core/quotas.ts';
import { FakeRuntime, PausableFakeRuntime } from '../support/fake-runtime.ts';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';

type Json = any;
const codes = (instance: Json) =>
  (instance.state_history as { state: string; reason_code?: string }[]).filter((e) => e.reason_code !== undefined).map((e) => `${e.state}:${e.reason_code}`);

describe('pause with a runtime that can pause', () => {
  let t: TestApp;
  let org: TestOrg;
  const runtime = new PausableFakeRuntime();
  const room = (name: string, profile = org.defaultProfileId) => `/api/profile/${profile}/room/${name}`;
  const call = async (method: 'GET' | 'POST' | 'DELETE', url: string, payload?: Record<string, unknown>) => {
    const res = await t.app.inject({ method, url, headers: org.headers, ...(payload === undefined ? {} : { payload }) });
    return { status: res.statusCode, body: res.json() as Json };
  };

  before(async () => {
    // Memory for one default instance (1024 MB) at a time.
    t = await startTestApp({ fake: runtime, config: { quotaMemoryMb: 1024 } });
    org = await t.newOrg();
  });
  after(() => t.close());

  it('has idle_action pause and a 7-day retention by default, and checks both fields', async () => {
    const profile = await call('GET', `/api/profiles/${org.defaultProfileId}`);
    assert.equal(profile.body.idle_action, 'pause');
    assert.equal(profile.body.paused_retention_s, 604800);
    for (const bad of [{ paused_retention_s: 0 }, { paused_retention_s: 90 * 86400 + 1 }, { idle_action: 'sleep' }]) {
      const res = await call('POST', '/api/profiles', { name: `bad-${Object.values(bad)[0]}`, ...bad });
      assert.equal(res.status, 400, JSON.stringify(bad));
      assert.equal(res.body.error, 'validation_error');
    }
  });

  it('a paused instance holds its disk alone: another fits, and its resume is refused by the memory quota and leaves it paused', async () => {
    assert.equal((await call('POST', room('a'))).status, 201);
    const paused = await call('POST', `${room('a')}/pause`);
    assert.equal(paused.status, 200);
    assert.equal(paused.body.state, 'paused');
    // A runtime that can keep memory keeps it unless asked not to.
    assert.deepEqual(paused.body.pause && { memory_kept: paused.body.pause.memory_kept }, { memory_kept: true });
    assert.deepEqual(runtime.pauseOptions.at(-1), { memory: true });
    // Its disk: the writable layer and the saved memory.
    const usage = (await call('GET', '/api/usage')).body.quotas;
    assert.deepEqual([usage.instances.used, usage.memory_mb.used, usage.disk_mb.used], [0, 0, 2048 + 1024]);
    // The memory a paused instance gave back lets another instance start.
    assert.equal((await call('POST', room('b'))).status, 201);
    const refused = await call('POST', `${room('a')}/resume`);
    assert.equal(refused.status, 403, JSON.stringify(refused.body));
    assert.equal(refused.body.error, 'quota_exceeded');
    assert.equal(refused.body.details.quota, 'memory_mb');
    const still = await call('GET', room('a'));
    assert.equal(still.body.state, 'paused');
    assert.deepEqual(codes(still.body), ['pausing:paused', 'paused:paused']);
    // A command needs it running: the same refusal, nothing run.
    assert.equal((await call('POST', `${room('a')}/command`, { command: 'true' })).body.error, 'quota_exceeded');
    assert.equal((await call('DELETE', room('b'))).body.state, 'stopped');
  });

  it('a command on a paused instance resumes it first; a failed resume leaves it paused with why', async () => {
    runtime.failNextResume = 'the sandbox would not start';
    const failed = await call('POST', `${room('a')}/command`, { command: 'true' });
    assert.equal(failed.status, 500);
    assert.equal(failed.body.error, 'instance_resume_failed');
    assert.match(failed.body.message, /would not start/);
    const instance = (await call('GET', room('a'))).body;
    assert.equal(instance.state, 'paused');
    assert.deepEqual(codes(instance).slice(-2), ['resuming:auto_resumed', 'paused:resume_failed']);
    assert.ok(instance.pause, 'it is still paused, with its pause record');

    const ran = await call('POST', `${room('a')}/command`, { command: 'true' });
    assert.equal(ran.status, 200, JSON.stringify(ran.body));
    const resumed = (await call('GET', room('a'))).body;
    assert.equal(resumed.state, 'ready');
    assert.equal(resumed.pause, null);
    assert.deepEqual(codes(resumed).slice(-2), ['resuming:auto_resumed', 'ready:auto_resumed']);
  });

  it('a pause with {"memory": false} keeps files only; other bodies are refused', async () => {
    const bad = await call('POST', `${room('a')}/pause`, { memory: 'yes' });
    assert.equal(bad.status, 400, JSON.stringify(bad.body));
    assert.equal(bad.body.error, 'validation_error');
    assert.equal((await call('POST', `${room('a')}/pause`, { keep: true })).status, 400);
    const paused = await call('POST', `${room('a')}/pause`, { memory: false });
    assert.equal(paused.status, 200, JSON.stringify(paused.body));
    assert.equal(paused.body.pause.memory_kept, false);
    assert.deepEqual(runtime.pauseOptions.at(-1), { memory: false });
    const resumed = await call('POST', `${room('a')}/resume`);
    assert.equal(resumed.body.state, 'ready');
    assert.deepEqual(codes(resumed.body).slice(-2), ['resuming:resumed', 'ready:resumed']);
  });

  it('a saved memory that cannot be restored resumes the instance over its files, and its answer says so', async () => {
    assert.equal((await call('POST', `${room('a')}/pause`)).body.pause.memory_kept, true);
    runtime.failNextRestore = 'the image is damaged';
    const resumed = await call('POST', `${room('a')}/resume`);
    assert.equal(resumed.status, 200, JSON.stringify(resumed.body));
    assert.equal(resumed.body.state, 'ready');
    const last = resumed.body.state_history.at(-1);
    assert.equal(last.reason_code, 'memory_lost');
    assert.match(last.reason, /over its files only: .*the image is damaged/);
    // The next pause keeps memory again, and its resume restores it.
    await call('POST', `${room('a')}/pause`);
    assert.equal((await call('POST', `${room('a')}/resume`)).body.state_history.at(-1).reason_code, 'resumed');
  });

  it('refuses a pause of an instance that is not ready', async () => {
    assert.equal((await call('POST', `${room('nobody')}/pause`)).body.error, 'instance_not_found');
    // A paused instance holds no memory: the starting one below fits the quota.
    assert.equal((await call('POST', `${room('a')}/pause`)).body.state, 'paused');
    runtime.options = { holdAt: 'vm_booted' };
    try {
      const starting = await call('POST', room('slow'), { wait: false });
      assert.equal(starting.status, 202, JSON.stringify(starting.body));
      const refused = await call('POST', `${room('slow')}/pause`);
      assert.equal(refused.status, 409);
      assert.equal(refused.body.error, 'instance_state_conflict');
      assert.match(refused.body.message, /still starting/);
    } finally {
      runtime.options = {};
      runtime.release();
    }
    await call('DELETE', room('slow'));
  });

  it('an idle instance is paused, and removed once paused longer than its retention', async () => {
    const created = await call('POST', '/api/profiles', { name: 'idle', idle_timeout_s: 60, paused_retention_s: 120 });
    const profile = created.body.profile_id;
    await call('DELETE', room('a'));
    const { instance_id: id } = (await call('POST', room('idle', profile))).body;
    const now = Date.now();
    assert.deepEqual(await t.services.instances.expire(now + 61_000), [id]);
    const paused = (await call('GET', room('idle', profile))).body;
    assert.equal(paused.state, 'paused');
    assert.deepEqual(codes(paused), ['pausing:idle', 'paused:idle']);
    assert.ok(runtime.paused.has(id));
    assert.equal(paused.pause.memory_kept, true, 'idle_action: pause keeps memory');
    // Not yet past its retention; then past it.
    assert.deepEqual(await t.services.instances.expire(Date.now() + 60_000), []);
    assert.deepEqual(await t.services.instances.expire(Date.now() + 121_000), [id]);
    const list = (await call('GET', '/api/instances?limit=100')).body.instances as Json[];
    const stopped = list.find((i) => i.instance_id === id);
    assert.equal(stopped.state, 'stopped');
    assert.deepEqual(codes(stopped), ['pausing:idle', 'paused:idle', 'stopping:retention', 'stopped:retention']);
    assert.ok(!runtime.paused.has(id) && !runtime.live.has(id), 'its machine and files are gone');
    // The room's 404 says that its instance expired, when and why.
    const gone = await call('GET', room('idle', profile));
    assert.equal(gone.status, 404);
    assert.equal(gone.body.error, 'instance_not_found');
    assert.equal(gone.body.details.reason_code, 'retention');
    assert.equal(gone.body.details.last_instance_id, id);
    assert.match(gone.body.message, /stopped at .+ \(retention: /);
  });

  it('a start keeps paused instances paused, and settles one caught pausing or resuming as paused', async () => {
    const kept = (await call('POST', room('kept'))).body.instance_id;
    await call('POST', `${room('kept')}/pause`);
    const two = (await call('POST', '/api/profiles', { name: 'two', memory_mb: 128 })).body.profile_id;
    const half = (await call('POST', room('half', two))).body.instance_id;
    // As a kill -9 during a pause leaves it: the row says pausing.
    await t.services.db.updateTable('instances').set({ state: 'pausing' }).where('id', '=', half).execute();
    const reconciled = await t.services.instances.reconcile();
    assert.deepEqual([...reconciled.paused].sort(), [kept, half].sort());
    const settled = (await call('GET', room('half', two))).body;
    assert.equal(settled.state, 'paused');
    assert.equal(settled.state_history.at(-1).reason_code, 'service_stopped');
    assert.ok(settled.pause, 'a pause record was made for it');
    assert.equal((await call('GET', room('kept'))).body.state, 'paused');
    assert.ok(runtime.paused.has(half) && !runtime.live.has(half));
    // What a paused instance says it kept is what the runtime holds after the start: a
    // saved memory a crash cut short is not claimed.
    assert.equal((await call('GET', room('kept'))).body.pause.memory_kept, true);
    runtime.paused.set(kept, { memoryKept: false });
    await t.services.instances.reconcile();
    assert.equal((await call('GET', room('kept'))).body.pause.memory_kept, false);
    await call('DELETE', room('kept'));
    await call('DELETE', room('half', two));
  });
});

describe('pause with a runtime that cannot', () => {
  let t: TestApp;
  let org: TestOrg;
  before(async () => {
    t = await startTestApp({ fake: new FakeRuntime() });
    org = await t.newOrg();
  });
  after(() => t.close());

  it('refuses a pause with feature_unavailable, and stops an idle instance instead of pausing it', async () => {
    const profile = await t.createProfile(org, { name: 'idle', idle_timeout_s: 60 });
    const url = `/api/profile/${profile}/room/r`;
    const { instance_id: id } = (await t.app.inject({ method: 'POST', url, headers: org.headers })).json();
    const refused = await t.app.inject({ method: 'POST', url: `${url}/pause`, headers: org.headers });
    assert.equal(refused.statusCode, 409);
    assert.equal(refused.json().error, 'feature_unavailable');
    assert.match(refused.json().message, /cannot pause/);
    assert.deepEqual(await t.services.instances.expire(Date.now() + 61_000), [id]);
    const list = (await t.app.inject({ method: 'GET', url: '/api/instances', headers: org.headers })).json().instances as Json[];
    assert.deepEqual(codes(list.find((i) => i.instance_id === id)), ['stopping:idle', 'stopped:idle']);
  });
});

describe('sumResources', () => {
  it('counts a paused instance for its disk alone', () => {
    const resources = { memory_mb: 1024, vcpus: 2, disk_mb: 2048 };
    assert.deepEqual(sumResources([{ resources, state: 'ready' }, { resources, state: 'paused' }]), { instances: 1, memory_mb: 1024, vcpus: 2, disk_mb: 4096 });
  });

  it('counts the saved memory of a paused instance whose pause kept it as its disk', () => {
    const resources = { memory_mb: 1024, vcpus: 2, disk_mb: 2048 };
    assert.deepEqual(sumResources([{ resources, state: 'paused', memoryKept: true }, { resources, state: 'paused', memoryKept: false }]), {
      instances: 0, memory_mb: 0, vcpus: 0, disk_mb: 2048 + 1024 + 2048,
    });
  });
});
