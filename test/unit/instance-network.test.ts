// An instance's egress policy through the API, over the runtime test double: a create's
// own `network` over the profile's (kept with the instance, compared when a create is
// answered by the live instance), PUT …/network on a running and a paused instance and
// its refusals, and egress decisions the runtime reports landing in the audit trail.
// Enforcement itself is test/host/egress.test.ts's.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { NO_KEY_ID } from '../../src/core/egress-audit.ts';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';
import { PausableFakeRuntime } from '../support/fake-runtime.ts';
import { until } from '../support/until.ts';

type Json = any;

describe('an instance\'s network', () => {
  let t: TestApp;
  let org: TestOrg;
  let profile: string;
  const runtime = new PausableFakeRuntime();
  const room = (name: string) => `/api/profile/${profile}/room/${name}`;
  const call = async (method: 'GET' | 'POST' | 'PUT', url: string, payload?: unknown) => {
    const res = await t.app.inject({ method, url, headers: org.headers, ...(payload === undefined ? {} : { payload: payload as Record<string, unknown> }) });
    return { status: res.statusCode, body: res.json() as Json, text: res.body };
  };
  const specNetwork = async (instanceId: string) => {
    const row = await t.services.db.selectFrom('instances').select('spec').where('id', '=', instanceId).executeTakeFirstOrThrow();
    return JSON.parse(row.spec ?? '{}').network;
  };

  before(async () => {
    t = await startTestApp({ fake: runtime, config: { expiryCheckIntervalMs: 3_600_000 } });
    org = await t.newOrg();
    profile = await t.createProfile(org, { name: 'net', network: { egress: 'none' } });
  });
  after(() => t.close());

  it('takes a create\'s own network over the profile\'s, and refuses a live instance\'s create with another', async () => {
    const network = { egress: 'allowlist', allow: ['pypi.org', '*.pythonhosted.org'] };
    const created = await call('POST', room('own'), { network });
    assert.equal(created.status, 201, created.text);
    assert.deepEqual(await specNetwork(created.body.instance_id), { ...network, deny: [] });
    assert.equal((await call('POST', room('own'), { network })).status, 200);
    const other = await call('POST', room('own'), { network: { egress: 'internet' } });
    assert.equal(other.status, 409, other.text);
    assert.deepEqual(other.body.details.fields, ['network']);
    const bad = await call('POST', room('bad'), { network: { egress: 'allowlist', allow: ['169.254.169.254'] } });
    assert.equal(bad.status, 400, bad.text);
    assert.match(bad.body.message, /^network\.allow\[0\]: "169\.254\.169\.254" is inside 169\.254\.0\.0\/16/);
  });

  it('changes a running instance\'s network at once, and a paused one\'s for its resume', async () => {
    const created = await call('POST', room('live'));
    assert.equal(created.status, 201, created.text);
    const id = created.body.instance_id;
    const policy = { egress: 'allowlist', allow: ['github.com'], deny: [] };
    const put = await call('PUT', `${room('live')}/network`, { egress: 'allowlist', allow: ['github.com'] });
    assert.equal(put.status, 200, put.text);
    assert.deepEqual(put.body, policy);
    assert.deepEqual(runtime.networks.get(id), policy);
    assert.deepEqual(await specNetwork(id), policy);

    assert.equal((await call('POST', `${room('live')}/pause`)).status, 200);
    runtime.networks.delete(id);
    const paused = await call('PUT', `${room('live')}/network`, { egress: 'internet' });
    assert.equal(paused.status, 200, paused.text);
    assert.equal(runtime.networks.has(id), false, 'a paused instance\'s machine is not told');
    assert.deepEqual(await specNetwork(id), { egress: 'internet', allow: [], deny: [] });
  });

  it('refuses a bad policy, a missing egress, and a room without an instance', async () => {
    const bad = await call('PUT', `${room('own')}/network`, { egress: 'allowlist', allow: ['example.com:25'] });
    assert.equal(bad.status, 400, bad.text);
    assert.equal(bad.body.details.errors[0].field, 'network.allow[0]');
    const lists = await call('PUT', `${room('own')}/network`, { egress: 'none', allow: ['example.com'] });
    assert.equal(lists.status, 400, lists.text);
    assert.equal((await call('PUT', `${room('own')}/network`, { allow: [] })).status, 400);
    const none = await call('PUT', `${room('nobody')}/network`, { egress: 'none' });
    assert.equal(none.status, 404, none.text);
    assert.equal(none.body.error, 'instance_not_found');
  });

  it('records the runtime\'s egress decisions in the audit trail, and the change itself', async () => {
    const created = await call('POST', room('audited'));
    const id = created.body.instance_id;
    runtime.emit({ type: 'egress', instanceId: id, decision: { instanceId: id, kind: 'connect', name: 'evil.test', port: 443, allowed: false, rule: 'default', count: 3 } });
    const events = await until('the egress record', async () => {
      const page = await call('GET', `/api/audit?instance_id=${id}&action=egress.connect`);
      return page.body.events.length > 0 ? page.body.events : undefined;
    });
    assert.equal(events[0].via, 'egress');
    assert.equal(events[0].key_id, NO_KEY_ID);
    assert.equal(events[0].decision, 'denied_egress');
    assert.deepEqual(events[0].egress, { name: 'evil.test', address: null, port: 443, rule: 'default', count: 3 });
    await call('PUT', `${room('audited')}/network`, { egress: 'none' });
    const changed = await call('GET', `/api/audit?instance_id=${id}&action=instance.network`);
    assert.equal(changed.body.events.length, 1);
    assert.equal(changed.body.events[0].decision, 'allowed');
  });
});
