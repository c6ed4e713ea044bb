// Authentication and organization scoping. The route walk covers every route the app
// registers under /api/, so a new route that skips authentication or scoping fails here.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { generateApiKey } from '../../src/core/apikeys.ts';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';

let t: TestApp;
let a: TestOrg;
let b: TestOrg;
let aKeyId: string;
let aCommandId: string;
let aSnapshotId: string;
let aTemplate: { template_id: string; build_id: string };
const ROOM = 'walk-room';

before(async () => {
  t = await startTestApp();
  a = await t.newOrg();
  b = await t.newOrg();
  const key = await t.app.inject({ method: 'POST', url: '/api/keys', headers: a.headers, payload: { name: 'spare' } });
  aKeyId = key.json().key_id;
  const created = await t.app.inject({ method: 'POST', url: `/api/profile/${a.defaultProfileId}/room/${ROOM}`, headers: a.headers });
  assert.equal(created.statusCode, 201);
  const command = await t.app.inject({ method: 'POST', url: `/api/profile/${a.defaultProfileId}/room/${ROOM}/command`, headers: a.headers, payload: { command: 'id' } });
  assert.equal(command.statusCode, 200);
  aCommandId = command.json().command_id;
  // The test runtime takes no snapshots: A's is a record, as a real one leaves.
  aSnapshotId = randomUUID();
  await t.services.db
    .insertInto('snapshots')
    .values({
      id: aSnapshotId,
      organization_id: a.organizationId,
      name: 'a-only',
      state: 'ready',
      source_instance_id: created.json().instance_id,
      profile_id: a.defaultProfileId,
      room_id: ROOM,
      runtime: 'test',
      // A snapshot keeps its source instance's whole spec.
      spec: (await t.services.db.selectFrom('instances').select('spec').where('id', '=', created.json().instance_id).executeTakeFirstOrThrow()).spec ?? '',
      memory_kept: 0,
      disk_bytes: 4096,
      created_at: new Date().toISOString(),
      deleted_at: null,
    })
    .execute();
  // A template of A's, built with no step that needs a sandbox.
  const template = await t.app.inject({ method: 'POST', url: '/api/templates', headers: a.headers, payload: { name: 'a-template', dockerfile: 'FROM debian:bookworm\nENV A=1\n' } });
  assert.equal(template.statusCode, 202, template.body);
  aTemplate = template.json();
});
after(() => t.close());

function fill(url: string, ids: { profile_id: string; room_id: string; key_id: string; command_id: string; port: string; snapshot_id: string; context_id: string; name_or_id: string; build_id: string }): string {
  return url.replace(/\*$/, 'notes.txt').replace(/:(\w+)/g, (_, name: string) => {
    const value = (ids as Record<string, string>)[name];
    if (value === undefined) throw new Error(`the route walk does not know how to fill :${name} in ${url}; add it`);
    return value;
  });
}

/** A body that passes each route's validation, so a request reaches the scoping check. */
const BODIES: Record<string, unknown> = {
  'POST /api/keys': { name: 'x' },
  'POST /api/profiles': { name: 'walk-profile' },
  'PATCH /api/profiles/:profile_id': { name: 'hijacked' },
  'POST /api/profile/:profile_id/room/:room_id': { wait: true },
  'POST /api/profile/:profile_id/room/:room_id/command': { command: 'id' },
  'POST /api/profile/:profile_id/room/:room_id/fork': { rooms: ['fork-1'] },
  'PUT /api/profile/:profile_id/room/:room_id/file/*': { content: 'x' },
  'POST /api/profile/:profile_id/room/:room_id/tools/call': { name: 'list_files', arguments: {} },
  'POST /api/profile/:profile_id/room/:room_id/contexts': {},
  'POST /api/profile/:profile_id/room/:room_id/contexts/:context_id/run': { code: '1' },
  'PUT /api/profile/:profile_id/room/:room_id/network': { egress: 'none' },
};

// The runtime double runs no interpreter: A's context id is one no context has, behind A's room.
const aContextId = randomUUID();
const A_IDS = () => ({
  profile_id: a.defaultProfileId,
  room_id: ROOM,
  key_id: aKeyId,
  command_id: aCommandId,
  port: '8000',
  snapshot_id: aSnapshotId,
  context_id: aContextId,
  name_or_id: aTemplate.template_id,
  build_id: aTemplate.build_id,
});
const MISSING_IDS = () => ({
  profile_id: randomUUID(),
  room_id: 'no-such-room',
  key_id: randomUUID(),
  command_id: randomUUID(),
  port: '8000',
  snapshot_id: randomUUID(),
  context_id: randomUUID(),
  name_or_id: randomUUID(),
  build_id: randomUUID(),
});

describe('authentication', () => {
  const cases: [string, Record<string, string>, string][] = [
    ['no Authorization header', {}, 'missing_api_key'],
    ['an empty header', { authorization: '' }, 'missing_api_key'],
    ['the Basic scheme', { authorization: 'Basic dXNlcjpwYXNz' }, 'invalid_api_key'],
    ['Bearer without a key', { authorization: 'Bearer' }, 'invalid_api_key'],
    ['a malformed key', { authorization: 'Bearer rk_live_123' }, 'invalid_api_key'],
    ['a key of an unknown environment', { authorization: `Bearer rk_prod_${'a'.repeat(32)}` }, 'invalid_api_key'],
    ['a well-formed unknown key', { authorization: `Bearer ${generateApiKey('live')}` }, 'invalid_api_key'],
  ];
  for (const [what, headers, code] of cases) {
    it(`answers 401 ${code} for ${what}`, async () => {
      const res = await t.app.inject({ method: 'GET', url: '/api/profiles', headers });
      assert.equal(res.statusCode, 401);
      assert.equal(res.json().error, code);
      assert.ok(res.json().message.length > 10);
      assert.match(String(res.headers['www-authenticate']), /^Bearer realm="roomkit"/);
    });
  }

  it('accepts the scheme name in any case', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/api/profiles', headers: { authorization: `bearer ${a.apiKey}` } });
    assert.equal(res.statusCode, 200);
  });

  it('leaves the unauthenticated endpoints open', async () => {
    for (const url of ['/healthz', '/readyz', '/openapi.json', '/metrics']) {
      assert.equal((await t.app.inject({ method: 'GET', url })).statusCode, 200, url);
    }
  });
});

describe('every /api/ route', () => {
  const apiRoutes = () => t.app.routeTable.filter((r) => r.url.startsWith('/api/'));

  it('is walked: the app has the routes this test expects at least', () => {
    const names = apiRoutes().map((r) => `${r.method} ${r.url}`);
    for (const expected of ['POST /api/keys', 'GET /api/profiles', 'POST /api/profile/:profile_id/room/:room_id', 'GET /api/instances']) {
      assert.ok(names.includes(expected), expected);
    }
  });

  it('answers 401 without a key and 401 with a malformed one, and does nothing', async () => {
    for (const route of apiRoutes()) {
      const url = fill(route.url, A_IDS());
      const payload = BODIES[`${route.method} ${route.url}`];
      for (const [headers, code] of [
        [{}, 'missing_api_key'],
        [{ authorization: 'Bearer not-a-key' }, 'invalid_api_key'],
      ] as const) {
        const res = await t.app.inject({ method: route.method as 'GET', url, headers, ...(payload ? { payload } : {}) });
        assert.equal(res.statusCode, 401, `${route.method} ${route.url}`);
        assert.equal(res.json().error, code, `${route.method} ${route.url}`);
      }
    }
  });

  it('hides another organization\'s objects: 404, the same as for objects that do not exist', async () => {
    for (const route of apiRoutes()) {
      if (!route.url.includes(':')) continue;
      const payload = BODIES[`${route.method} ${route.url}`];
      const request = (url: string) =>
        t.app.inject({ method: route.method as 'GET', url, headers: b.headers, ...(payload ? { payload } : {}) });
      const foreign = await request(fill(route.url, A_IDS()));
      const missing = await request(fill(route.url, MISSING_IDS()));
      const name = `${route.method} ${route.url}`;
      assert.equal(foreign.statusCode, 404, `${name}: ${foreign.body}`);
      assert.equal(missing.statusCode, 404, `${name}: ${missing.body}`);
      assert.equal(foreign.json().error, missing.json().error, name);
      const anonymise = (text: string) =>
        text.replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, 'ID').replace(/walk-room|no-such-room/g, 'ROOM');
      assert.equal(anonymise(foreign.json().message), anonymise(missing.json().message), name);
    }
  });

  it('scopes every route without ids to the caller\'s organization', async () => {
    // Routes with no id in the path act on or list the caller's own organization only.
    const checks: Record<string, () => Promise<void>> = {
      'GET /api/profiles': async () => {
        const res = await t.app.inject({ method: 'GET', url: '/api/profiles', headers: b.headers });
        const ids: string[] = res.json().profiles.map((p: { profile_id: string }) => p.profile_id);
        assert.ok(ids.includes(b.defaultProfileId));
        const owners = await t.services.db.selectFrom('profiles').select('organization_id').where('id', 'in', ids).execute();
        assert.deepEqual(new Set(owners.map((o) => o.organization_id)), new Set([b.organizationId]));
      },
      'POST /api/profiles': async () => {
        const res = await t.app.inject({ method: 'POST', url: '/api/profiles', headers: b.headers, payload: { name: 'b-only' } });
        assert.equal(res.statusCode, 201);
        const aSees = await t.app.inject({ method: 'GET', url: `/api/profiles/${res.json().profile_id}`, headers: a.headers });
        assert.equal(aSees.statusCode, 404);
      },
      'GET /api/keys': async () => {
        const res = await t.app.inject({ method: 'GET', url: '/api/keys', headers: b.headers });
        const ids = res.json().keys.map((k: { key_id: string }) => k.key_id);
        assert.ok(ids.length >= 1);
        const owners = await t.services.db.selectFrom('api_keys').select('organization_id').where('id', 'in', ids).execute();
        assert.deepEqual(new Set(owners.map((o) => o.organization_id)), new Set([b.organizationId]));
      },
      'POST /api/keys': async () => {
        const res = await t.app.inject({ method: 'POST', url: '/api/keys', headers: b.headers, payload: {} });
        const key = res.json().api_key;
        const seen = await t.app.inject({ method: 'GET', url: '/api/profiles', headers: { authorization: `Bearer ${key}` } });
        assert.ok(seen.json().profiles.every((p: { profile_id: string }) => p.profile_id !== a.defaultProfileId));
      },
      'GET /api/instances': async () => {
        const res = await t.app.inject({ method: 'GET', url: '/api/instances', headers: b.headers });
        assert.deepEqual(res.json().instances, []);
        const filtered = await t.app.inject({ method: 'GET', url: `/api/instances?profile_id=${a.defaultProfileId}`, headers: b.headers });
        assert.deepEqual(filtered.json().instances, []);
        const own = await t.app.inject({ method: 'GET', url: '/api/instances', headers: a.headers });
        assert.equal(own.json().instances.length, 1);
      },
      'GET /api/snapshots': async () => {
        const res = await t.app.inject({ method: 'GET', url: '/api/snapshots', headers: b.headers });
        assert.deepEqual(res.json().snapshots, []);
        const byInstance = await t.app.inject({ method: 'GET', url: `/api/snapshots?instance_id=${(await aInstanceId())}`, headers: b.headers });
        assert.deepEqual(byInstance.json().snapshots, []);
        const own = await t.app.inject({ method: 'GET', url: '/api/snapshots', headers: a.headers });
        assert.deepEqual(own.json().snapshots.map((s: { snapshot_id: string }) => s.snapshot_id), [aSnapshotId]);
      },
      'GET /api/templates': async () => {
        const res = await t.app.inject({ method: 'GET', url: '/api/templates', headers: b.headers });
        const ids: string[] = res.json().templates.map((x: { template_id: string }) => x.template_id);
        const owners = await t.services.db.selectFrom('templates').select('organization_id').where('id', 'in', ids.length > 0 ? ids : ['none']).execute();
        assert.ok(owners.every((o) => o.organization_id === b.organizationId));
        assert.ok(!ids.includes(aTemplate.template_id));
        const own = await t.app.inject({ method: 'GET', url: '/api/templates', headers: a.headers });
        assert.deepEqual(own.json().templates.map((x: { template_id: string }) => x.template_id), [aTemplate.template_id]);
      },
      'POST /api/templates': async () => {
        // B's template of the same name is B's own; A's stays as it was.
        const res = await t.app.inject({ method: 'POST', url: '/api/templates', headers: b.headers, payload: { name: 'a-template', dockerfile: 'FROM debian:bookworm\n' } });
        assert.equal(res.statusCode, 202);
        assert.notEqual(res.json().template_id, aTemplate.template_id);
        const aSees = await t.app.inject({ method: 'GET', url: `/api/templates/${res.json().template_id}`, headers: a.headers });
        assert.equal(aSees.statusCode, 404);
        const own = await t.app.inject({ method: 'GET', url: '/api/templates/a-template', headers: a.headers });
        assert.equal(own.json().template_id, aTemplate.template_id);
      },
      'GET /api/usage': async () => {
        // A has a live instance; B's usage counts none of it.
        const res = await t.app.inject({ method: 'GET', url: '/api/usage', headers: b.headers });
        assert.equal(res.json().organization_id, b.organizationId);
        assert.equal(res.json().quotas.instances.used, 0);
        const own = await t.app.inject({ method: 'GET', url: '/api/usage', headers: a.headers });
        assert.equal(own.json().quotas.instances.used, 1);
      },
      'GET /api/audit': async () => {
        // A made a key, an instance and a command in before(); B sees none of it, only its own requests.
        const aSees = await t.app.inject({ method: 'GET', url: '/api/audit?limit=200', headers: a.headers });
        assert.ok(aSees.json().events.some((e: { action: string }) => e.action === 'command.run'));
        const res = await t.app.inject({ method: 'GET', url: '/api/audit?limit=200', headers: b.headers });
        const ids = res.json().events.map((e: { event_id: string }) => e.event_id);
        const owners = await t.services.db.selectFrom('audit_events').select('organization_id').where('id', 'in', ids.length > 0 ? ids : ['none']).execute();
        assert.ok(owners.every((o) => o.organization_id === b.organizationId));
        const aEvents = aSees.json().events.map((e: { event_id: string }) => e.event_id);
        assert.ok(aEvents.every((id: string) => !ids.includes(id)));
        const filtered = await t.app.inject({ method: 'GET', url: `/api/audit?key_id=${aKeyId}`, headers: b.headers });
        assert.deepEqual(filtered.json().events, []);
      },
    };
    for (const route of apiRoutes()) {
      if (route.url.includes(':')) continue;
      const name = `${route.method} ${route.url}`;
      const check = checks[name];
      assert.ok(check, `${name} has no cross-organization check in this test; add one`);
      await check();
    }
  });

  async function aInstanceId(): Promise<string> {
    const res = await t.app.inject({ method: 'GET', url: `/api/profile/${a.defaultProfileId}/room/${ROOM}`, headers: a.headers });
    return res.json().instance_id;
  }

  it('left organization A untouched after B\'s attempts', async () => {
    const instance = await t.app.inject({ method: 'GET', url: `/api/profile/${a.defaultProfileId}/room/${ROOM}`, headers: a.headers });
    assert.equal(instance.statusCode, 200);
    assert.equal(instance.json().state, 'ready');
    const profile = await t.app.inject({ method: 'GET', url: `/api/profiles/${a.defaultProfileId}`, headers: a.headers });
    assert.equal(profile.json().name, 'default');
    const keys = await t.app.inject({ method: 'GET', url: '/api/keys', headers: a.headers });
    assert.ok(keys.json().keys.some((k: { key_id: string }) => k.key_id === aKeyId));
    const snapshot = await t.app.inject({ method: 'GET', url: `/api/snapshots/${aSnapshotId}`, headers: a.headers });
    assert.equal(snapshot.json().name, 'a-only');
  });
});
