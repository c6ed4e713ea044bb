// A room's instance over HTTP: creation (waiting, not waiting, idempotent, concurrent,
// failing), reading, deleting, listing, and room id validation. The runtime is the
// test double; the store and the state machine are the real ones.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { PROVISION_STATES } from '../../src/core/lifecycle.ts';
import { ROOM_ID_PATTERN } from '../../src/http/schemas.ts';
import { FakeRuntime } from '../support/fake-runtime.ts';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';
import { until } from '../support/until.ts';

let t: TestApp;
let org: TestOrg;

before(async () => {
  t = await startTestApp();
  org = await t.newOrg();
});
after(() => t.close());

const roomUrl = (room: string, profileId = org.defaultProfileId) => `/api/profile/${profileId}/room/${room}`;
const create = (room: string, payload?: object) =>
  t.app.inject({ method: 'POST', url: roomUrl(room), headers: org.headers, ...(payload ? { payload } : {}) });
const get = (room: string) => t.app.inject({ method: 'GET', url: roomUrl(room), headers: org.headers });
const del = (room: string) => t.app.inject({ method: 'DELETE', url: roomUrl(room), headers: org.headers });

describe('creating an instance', () => {
  it('waits until ready by default and answers 201 with every state in order', async () => {
    const res = await create('first');
    assert.equal(res.statusCode, 201);
    const instance = res.json();
    assert.match(instance.instance_id, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.equal(instance.state, 'ready');
    assert.equal(instance.profile_id, org.defaultProfileId);
    assert.equal(instance.room_id, 'first');
    assert.equal(instance.runtime, 'fake');
    assert.deepEqual(instance.resources, { memory_mb: 1024, vcpus: 1, disk_mb: 2048 });
    assert.deepEqual(instance.state_history.map((s: { state: string }) => s.state), PROVISION_STATES);
    const times = instance.state_history.map((s: { at: string }) => Date.parse(s.at));
    assert.deepEqual(times, [...times].sort((x: number, y: number) => x - y));
    assert.equal(instance.failure_reason, null);
  });

  it('is idempotent: a second create answers 200 with the same instance', async () => {
    const first = await create('idem');
    const second = await create('idem');
    assert.equal(first.statusCode, 201);
    assert.equal(second.statusCode, 200);
    assert.equal(second.json().instance_id, first.json().instance_id);
    assert.equal(t.runtime.live.has(first.json().instance_id), true);
  });

  it('makes one machine when many creates race for the same room', async () => {
    const results = await Promise.all(Array.from({ length: 8 }, () => create('race')));
    const ids = new Set(results.map((r) => r.json().instance_id));
    assert.equal(ids.size, 1);
    assert.deepEqual(results.map((r) => r.statusCode).sort(), [200, 200, 200, 200, 200, 200, 200, 201]);
    const rows = await t.services.db.selectFrom('instances').select('id').where('room_id', '=', 'race').execute();
    assert.equal(rows.length, 1);
  });

  it('with "wait": false answers 202 at once; GET then shows it reach ready', async () => {
    t.runtime.options = { holdAt: 'vm_started' };
    try {
      const res = await create('nowait', { wait: false });
      assert.equal(res.statusCode, 202);
      assert.notEqual(res.json().state, 'ready');
      const during = await until('vm_started to be held', async () => {
        const r = (await get('nowait')).json();
        return r.state === 'image_generated' ? r : undefined;
      });
      assert.equal(during.instance_id, res.json().instance_id);
      t.runtime.release();
      const ready = await until('ready', async () => {
        const r = (await get('nowait')).json();
        return r.state === 'ready' ? r : undefined;
      });
      assert.equal(ready.state_history.length, PROVISION_STATES.length);
    } finally {
      t.runtime.options = {};
      t.runtime.release();
    }
  });

  it('reports a failed start as instance_start_failed, tears down, and shows the reason', async () => {
    t.runtime.options = { failAt: { step: 'vm_booted', message: 'init did not answer within 10 s' } };
    try {
      const res = await create('broken');
      assert.equal(res.statusCode, 500);
      const body = res.json();
      assert.equal(body.error, 'instance_start_failed');
      assert.match(body.message, /init did not answer within 10 s/);
      const id = body.details.instance_id;
      assert.ok(t.runtime.destroyed.includes(id), 'the runtime undid its steps');
      const shown = (await get('broken')).json();
      assert.equal(shown.state, 'failed');
      assert.equal(shown.failure_reason, 'init did not answer within 10 s');
      assert.deepEqual(shown.state_history.map((s: { state: string }) => s.state), [
        'active', 'network_allocated', 'ftap_created', 'image_generated', 'vm_started', 'failed',
      ]);
      // The room is free again: a new create makes a new instance.
      t.runtime.options = {};
      const retry = await create('broken');
      assert.equal(retry.statusCode, 201);
      assert.notEqual(retry.json().instance_id, id);
    } finally {
      t.runtime.options = {};
    }
  });

  it('answers 404 profile_not_found for an unknown profile', async () => {
    const res = await t.app.inject({ method: 'POST', url: roomUrl('x', randomUUID()), headers: org.headers });
    assert.equal(res.statusCode, 404);
    assert.equal(res.json().error, 'profile_not_found');
  });

  it('refuses unknown body fields', async () => {
    const res = await create('fields', { wait: true, size: 'xl' });
    assert.equal(res.statusCode, 400);
    assert.equal(res.json().error, 'validation_error');
    assert.match(res.json().message, /size/);
  });
});

describe('room ids', () => {
  for (const good of ['a', 'A.b_c-1', 'x'.repeat(128)]) {
    it(`accepts "${good.length > 20 ? `${good.slice(0, 5)}...(${good.length})` : good}"`, async () => {
      const res = await get(good);
      assert.equal(res.statusCode, 404);
      assert.equal(res.json().error, 'instance_not_found');
    });
  }
  it('never lets "." or ".." name a room', async () => {
    for (const name of ['.', '..', '%2E', '%2E%2E']) {
      const res = await t.app.inject({ method: 'POST', url: roomUrl(name), headers: org.headers });
      assert.ok([400, 404].includes(res.statusCode), `${name}: ${res.statusCode}`);
    }
    assert.ok(!new RegExp(ROOM_ID_PATTERN).test('..'));
    assert.ok(!new RegExp(ROOM_ID_PATTERN).test('.'));
    assert.ok(new RegExp(ROOM_ID_PATTERN).test('...'));
  });
  for (const bad of ['x'.repeat(129), 'has space', 'slash%2Fin', 'ünï', 'semi;colon', '%00']) {
    it(`refuses "${bad.length > 20 ? `${bad.slice(0, 5)}...(${bad.length})` : bad}" with 400`, async () => {
      const res = await t.app.inject({ method: 'POST', url: roomUrl(encodeURIComponent(bad).replace(/%25/g, '%')), headers: org.headers });
      assert.equal(res.statusCode, 400, res.body);
      assert.equal(res.json().error, 'validation_error');
      assert.match(res.json().message, /room_id/);
    });
  }
});

describe('reading and deleting', () => {
  it('GET answers 404 instance_not_found for an empty room and says how to create one', async () => {
    const res = await get('empty');
    assert.equal(res.statusCode, 404);
    assert.equal(res.json().error, 'instance_not_found');
    assert.match(res.json().message, /POST \/api\/profile\//);
  });

  it('DELETE stops and removes the instance; GET is 404 afterwards; a new create makes a new one', async () => {
    const id = (await create('gone')).json().instance_id;
    const res = await del('gone');
    assert.equal(res.statusCode, 200);
    const final = res.json();
    assert.equal(final.state, 'stopped');
    assert.deepEqual(final.state_history.slice(-2).map((s: { state: string }) => s.state), ['stopping', 'stopped']);
    assert.ok(!t.runtime.live.has(id));
    const after = await get('gone');
    assert.equal(after.statusCode, 404);
    // The room had an instance: the 404 says which, when it stopped and why.
    assert.equal(after.json().error, 'instance_not_found');
    assert.deepEqual(after.json().details, { last_instance_id: id, stopped_at: final.updated_at, reason_code: 'deleted' });
    assert.match(after.json().message, new RegExp(`its last one \\(${id}\\) stopped at .+ \\(deleted: deleted through the API`));
    assert.equal((await del('gone')).statusCode, 404);
    const again = await create('gone');
    assert.equal(again.statusCode, 201);
    assert.notEqual(again.json().instance_id, id);
  });

  it('DELETE during provisioning cancels it and leaves nothing behind', async () => {
    t.runtime.options = { holdAt: 'vm_booted' };
    try {
      const id = (await create('cancel', { wait: false })).json().instance_id;
      await until('provisioning to reach vm_started', async () => ((await get('cancel')).json().state === 'vm_started' ? true : undefined));
      const res = await del('cancel');
      assert.equal(res.statusCode, 200);
      assert.equal(res.json().state, 'stopped');
      const states = res.json().state_history.map((s: { state: string }) => s.state);
      assert.deepEqual(states.slice(-2), ['stopping', 'stopped']);
      assert.ok(!states.includes('ready'));
      assert.ok(!t.runtime.live.has(id));
    } finally {
      t.runtime.options = {};
      t.runtime.release();
    }
  });

  it('DELETE of a failed instance hides it from the room', async () => {
    t.runtime.options = { failAt: { step: 'network_allocated', message: 'address pool exhausted' } };
    try {
      assert.equal((await create('failed-del')).statusCode, 500);
    } finally {
      t.runtime.options = {};
    }
    assert.equal((await get('failed-del')).json().state, 'failed');
    const res = await del('failed-del');
    assert.equal(res.statusCode, 200);
    assert.equal(res.json().state, 'failed');
    assert.equal((await get('failed-del')).statusCode, 404);
  });
});

describe('listing instances', () => {
  it('pages through the organization\'s instances, newest first, with filters', async () => {
    const own = await t.newOrg();
    const ids: string[] = [];
    for (const room of ['l1', 'l2', 'l3', 'l4', 'l5']) {
      const res = await t.app.inject({ method: 'POST', url: `/api/profile/${own.defaultProfileId}/room/${room}`, headers: own.headers });
      ids.push(res.json().instance_id);
    }
    await t.app.inject({ method: 'DELETE', url: `/api/profile/${own.defaultProfileId}/room/l5`, headers: own.headers });

    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const query: string = `limit=2${cursor ? `&cursor=${cursor}` : ''}`;
      const res = await t.app.inject({ method: 'GET', url: `/api/instances?${query}`, headers: own.headers });
      assert.equal(res.statusCode, 200);
      const page = res.json();
      assert.ok(page.instances.length <= 2);
      seen.push(...page.instances.map((i: { instance_id: string }) => i.instance_id));
      cursor = page.next_cursor;
      pages++;
    } while (cursor);
    assert.equal(pages, 3);
    assert.deepEqual(seen, [...ids].reverse());

    const ready = await t.app.inject({ method: 'GET', url: '/api/instances?state=ready', headers: own.headers });
    assert.deepEqual(ready.json().instances.map((i: { room_id: string }) => i.room_id).sort(), ['l1', 'l2', 'l3', 'l4']);
    const stopped = await t.app.inject({ method: 'GET', url: '/api/instances?state=stopped', headers: own.headers });
    assert.deepEqual(stopped.json().instances.map((i: { room_id: string }) => i.room_id), ['l5']);
    const byProfile = await t.app.inject({ method: 'GET', url: `/api/instances?profile_id=${randomUUID()}`, headers: own.headers });
    assert.deepEqual(byProfile.json().instances, []);
  });

  it('refuses a bad cursor, limit or state with 400', async () => {
    for (const [query, code] of [
      ['cursor=not-a-cursor', 'invalid_cursor'],
      ['limit=0', 'validation_error'],
      ['limit=201', 'validation_error'],
      ['limit=ten', 'validation_error'],
      ['state=running', 'validation_error'],
      ['colour=blue', 'validation_error'],
    ]) {
      const res = await t.app.inject({ method: 'GET', url: `/api/instances?${query}`, headers: org.headers });
      assert.equal(res.statusCode, 400, query);
      assert.equal(res.json().error, code, query);
    }
  });
});

describe('without a runtime', () => {
  it('answers creates with 503 runtime_unavailable saying why, and records nothing', async () => {
    const none = await startTestApp({ selection: { unavailable: { reason: 'runsc (gVisor) is not installed' } } });
    try {
      const o = await none.newOrg();
      const res = await none.app.inject({ method: 'POST', url: `/api/profile/${o.defaultProfileId}/room/r`, headers: o.headers });
      assert.equal(res.statusCode, 503);
      assert.equal(res.json().error, 'runtime_unavailable');
      assert.match(res.json().message, /runsc \(gVisor\) is not installed/);
      const rows = await none.services.db.selectFrom('instances').selectAll().execute();
      assert.equal(rows.length, 0);
      const health = (await none.app.inject({ method: 'GET', url: '/healthz' })).json();
      assert.deepEqual(health.runtime, { available: false, reason: 'runsc (gVisor) is not installed' });
    } finally {
      await none.close();
    }
  });
});

describe('shutting down', () => {
  it('cancels provisioning under way, and the runtime undoes it', async () => {
    const fake = new FakeRuntime({ holdAt: 'ready' });
    const own = await startTestApp({ fake });
    const o = await own.newOrg();
    const res = await own.app.inject({ method: 'POST', url: `/api/profile/${o.defaultProfileId}/room/r`, headers: o.headers, payload: { wait: false } });
    assert.equal(res.statusCode, 202);
    await until('provisioning to be held', async () => (fake.live.size === 1 ? true : undefined));
    const db = own.services.db;
    await own.app.close();
    await own.services.instances.close();
    assert.equal(fake.live.size, 0);
    assert.deepEqual(fake.destroyed, [res.json().instance_id]);
    const row = await db.selectFrom('instances').selectAll().where('id', '=', res.json().instance_id).executeTakeFirstOrThrow();
    assert.equal(row.state, 'failed');
    assert.equal(row.failure_reason, 'the service shut down while the instance was starting');
    await own.close();
  });
});

describe('idle and lifetime limits', () => {
  // expire() is called with a clock moved forward, so other tests' instances may expire
  // too; each test only looks at its own.
  async function profileWith(fields: object): Promise<string> {
    const res = await t.app.inject({ method: 'POST', url: '/api/profiles', headers: org.headers, payload: { name: `p-${randomUUID().slice(0, 8)}`, ...fields } });
    assert.equal(res.statusCode, 201, res.body);
    return res.json().profile_id;
  }
  const lastReason = (instance: { state_history: { state: string; reason?: string }[] }) =>
    instance.state_history.find((s) => s.state === 'stopping')?.reason;
  const endCodes = (instance: { state_history: { state: string; reason_code?: string }[] }) =>
    instance.state_history.filter((s) => s.reason_code !== undefined).map((s) => `${s.state}:${s.reason_code}`);

  it('stops an instance idle for longer than idle_timeout_s, and says why', async () => {
    const profile = await profileWith({ idle_timeout_s: 60, max_lifetime_s: 0 });
    const res = await t.app.inject({ method: 'POST', url: roomUrl('idle', profile), headers: org.headers });
    const id = res.json().instance_id;
    assert.ok(!(await t.services.instances.expire(Date.now() + 30_000)).includes(id));
    // Activity resets the idle clock.
    await new Promise((r) => setTimeout(r, 20));
    await t.services.instances.touch(id);
    const touchedAt = Date.now();
    assert.ok(!(await t.services.instances.expire(touchedAt + 59_000)).includes(id));
    assert.ok((await t.services.instances.expire(touchedAt + 61_000)).includes(id));
    assert.ok(!t.runtime.live.has(id));
    assert.equal((await t.app.inject({ method: 'GET', url: roomUrl('idle', profile), headers: org.headers })).statusCode, 404);
    const listed = await t.app.inject({ method: 'GET', url: `/api/instances?profile_id=${profile}`, headers: org.headers });
    const instance = listed.json().instances[0];
    assert.equal(instance.state, 'stopped');
    assert.equal(lastReason(instance), 'idle for 60 s');
    assert.deepEqual(endCodes(instance), ['stopping:idle', 'stopped:idle']);
  });

  it('stops an instance older than max_lifetime_s even while it is busy', async () => {
    const profile = await profileWith({ idle_timeout_s: 0, max_lifetime_s: 3600 });
    const res = await t.app.inject({ method: 'POST', url: roomUrl('old', profile), headers: org.headers });
    const id = res.json().instance_id;
    const createdAt = Date.parse(res.json().created_at);
    await t.services.instances.touch(id);
    assert.ok(!(await t.services.instances.expire(createdAt + 3_599_000)).includes(id));
    assert.ok((await t.services.instances.expire(createdAt + 3_600_000)).includes(id));
    const listed = await t.app.inject({ method: 'GET', url: `/api/instances?profile_id=${profile}`, headers: org.headers });
    assert.equal(lastReason(listed.json().instances[0]), 'reached its lifetime limit of 3600 s');
    assert.deepEqual(endCodes(listed.json().instances[0]), ['stopping:lifetime', 'stopped:lifetime']);
  });

  it('never expires instances whose limits are 0', async () => {
    const profile = await profileWith({ idle_timeout_s: 0, max_lifetime_s: 0 });
    const res = await t.app.inject({ method: 'POST', url: roomUrl('forever', profile), headers: org.headers });
    const expired = await t.services.instances.expire(Date.now() + 10 * 365 * 86_400_000);
    assert.ok(!expired.includes(res.json().instance_id));
  });
});
