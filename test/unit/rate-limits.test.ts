// Rate limits: per API key and per organization on the authenticated API, per client
// address and per instance on the unauthenticated raw file endpoint. A request over a
// limit gets 429 rate_limited naming the limit, with Retry-After; every counted
// response carries the RateLimit-Policy and RateLimit fields
// (draft-ietf-httpapi-ratelimit-headers-11).
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import type { ConfigOverrides } from '../../src/config.ts';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';

const apps: TestApp[] = [];
after(async () => {
  for (const t of apps) await t.close();
});

async function appWith(config: ConfigOverrides): Promise<TestApp> {
  const t = await startTestApp({ config });
  apps.push(t);
  return t;
}

/** A second key of the same organization. */
async function secondKey(t: TestApp, org: TestOrg): Promise<Record<string, string>> {
  const { secret } = await t.services.organizations.createKey(org.organizationId, { env: 'test' });
  return { authorization: `Bearer ${secret}` };
}

const list = (t: TestApp, headers: Record<string, string>) => t.app.inject({ method: 'GET', url: '/api/profiles', headers });

/** The parameters of one item of a RateLimit or RateLimit-Policy field, by the item's name. */
function item(field: unknown, name: string): Record<string, number> | undefined {
  for (const part of String(field ?? '').split(',')) {
    const [label, ...params] = part.trim().split(';');
    if (label !== `"${name}"`) continue;
    return Object.fromEntries(params.map((p) => p.split('=') as [string, string]).map(([k, v]) => [k, Number(v)]));
  }
  return undefined;
}

function assertRateLimited(res: { statusCode: number; headers: Record<string, unknown>; json(): any }, limit: string, max: number) {
  assert.equal(res.statusCode, 429);
  const body = res.json();
  assert.equal(body.error, 'rate_limited');
  assert.equal(body.details.limit, limit);
  assert.equal(body.details.limit_requests, max);
  assert.equal(body.details.window_s, 60);
  assert.match(body.message, new RegExp(`"${limit}" limit`));
  const retryAfter = Number(res.headers['retry-after']);
  assert.ok(retryAfter >= 1 && retryAfter <= 60, `Retry-After ${String(res.headers['retry-after'])}`);
  assert.equal(body.details.retry_after_s, retryAfter);
  assert.deepEqual(item(res.headers.ratelimit, limit), { r: 0, t: retryAfter });
  assert.equal(body.request_id, res.headers['x-request-id']);
}

describe('the per-key limit', () => {
  it('answers 429 on exactly the request past it, with the headers; other keys and organizations go on', async () => {
    const t = await appWith({ rateLimitKeyRequests: 5, rateLimitOrgRequests: 1000 });
    const org = await t.newOrg();
    for (let i = 1; i <= 5; i++) {
      const res = await list(t, org.headers);
      assert.equal(res.statusCode, 200, `request ${i}: ${res.body}`);
      assert.deepEqual(item(res.headers['ratelimit-policy'], 'api_key'), { q: 5, w: 60 });
      assert.deepEqual(item(res.headers['ratelimit-policy'], 'organization'), { q: 1000, w: 60 });
      assert.equal(item(res.headers.ratelimit, 'api_key')?.r, 5 - i);
      assert.equal(item(res.headers.ratelimit, 'organization')?.r, 1000 - i);
      const reset = item(res.headers.ratelimit, 'api_key')?.t ?? 0;
      assert.ok(reset >= 1 && reset <= 60, `t=${reset}`);
    }
    assertRateLimited(await list(t, org.headers), 'api_key', 5);
    // Every route of the API counts, not only the one that filled the window.
    assertRateLimited(await t.app.inject({ method: 'GET', url: '/api/instances', headers: org.headers }), 'api_key', 5);

    const sameOrg = await list(t, await secondKey(t, org));
    assert.equal(sameOrg.statusCode, 200, sameOrg.body);
    assert.equal(item(sameOrg.headers.ratelimit, 'api_key')?.r, 4);
    // The refused request did not reach the organization's count.
    assert.equal(item(sameOrg.headers.ratelimit, 'organization')?.r, 1000 - 6);
    const otherOrg = await list(t, (await t.newOrg()).headers);
    assert.equal(otherOrg.statusCode, 200, otherOrg.body);
  });

  it('does not count requests that fail authentication', async () => {
    const t = await appWith({ rateLimitKeyRequests: 2 });
    const org = await t.newOrg();
    for (let i = 0; i < 5; i++) assert.equal((await list(t, { authorization: 'Bearer rk_test_nope' })).statusCode, 401);
    assert.equal((await list(t, org.headers)).statusCode, 200);
    assert.equal((await list(t, org.headers)).statusCode, 200);
    assert.equal((await list(t, org.headers)).statusCode, 429);
  });

  it('starts a new window once the last one has passed', async () => {
    const t = await appWith({ rateLimitKeyRequests: 2, rateLimitWindowS: 1 });
    const org = await t.newOrg();
    assert.equal((await list(t, org.headers)).statusCode, 200);
    assert.equal((await list(t, org.headers)).statusCode, 200);
    assert.equal((await list(t, org.headers)).statusCode, 429);
    await new Promise((r) => setTimeout(r, 1100));
    assert.equal((await list(t, org.headers)).statusCode, 200);
  });
});

describe('the per-organization limit', () => {
  it('counts every key of the organization together, and no other organization', async () => {
    const t = await appWith({ rateLimitKeyRequests: 100, rateLimitOrgRequests: 6 });
    const org = await t.newOrg();
    const keys = [org.headers, await secondKey(t, org), await secondKey(t, org)];
    for (let i = 0; i < 6; i++) {
      const res = await list(t, keys[i % 3]!);
      assert.equal(res.statusCode, 200, `request ${i + 1}: ${res.body}`);
    }
    for (const headers of keys) assertRateLimited(await list(t, headers), 'organization', 6);
    assert.equal((await list(t, (await t.newOrg()).headers)).statusCode, 200);
  });
});

describe('the raw file endpoint', () => {
  /** An organization with a ready instance (on the runtime double); its id. */
  async function instance(t: TestApp, room: string): Promise<string> {
    const org = await t.newOrg();
    const res = await t.app.inject({ method: 'POST', url: `/api/profile/${org.defaultProfileId}/room/${room}`, headers: org.headers });
    assert.equal(res.statusCode, 201, res.body);
    return res.json().instance_id;
  }
  const raw = (t: TestApp, instanceId: string, from: string) =>
    t.app.inject({ method: 'GET', url: `/vm/${instanceId}/file/home/user/missing.txt`, remoteAddress: from });

  it('limits each client address, and not the others', async () => {
    const t = await appWith({ rateLimitRawClientRequests: 3, rateLimitRawInstanceRequests: 100 });
    const id = await instance(t, 'raw-client');
    for (let i = 0; i < 3; i++) {
      const res = await raw(t, id, '192.0.2.1');
      assert.equal(res.statusCode, 404, res.body);
      assert.deepEqual(item(res.headers['ratelimit-policy'], 'client_address'), { q: 3, w: 60 });
      assert.equal(item(res.headers.ratelimit, 'client_address')?.r, 2 - i);
    }
    assertRateLimited(await raw(t, id, '192.0.2.1'), 'client_address', 3);
    assert.equal((await raw(t, id, '192.0.2.2')).statusCode, 404);
    // An IPv6 client is counted by its /64, as the library does.
    for (let i = 0; i < 3; i++) assert.equal((await raw(t, id, `2001:db8::${i + 1}`)).statusCode, 404);
    assertRateLimited(await raw(t, id, '2001:db8::ffff'), 'client_address', 3);
  });

  it('limits each instance across all clients, and not the others', async () => {
    const t = await appWith({ rateLimitRawClientRequests: 100, rateLimitRawInstanceRequests: 4 });
    const id = await instance(t, 'raw-instance');
    for (let i = 0; i < 4; i++) assert.equal((await raw(t, id, `198.51.100.${i + 1}`)).statusCode, 404);
    assertRateLimited(await raw(t, id, '198.51.100.99'), 'instance', 4);
    assert.equal((await raw(t, await instance(t, 'raw-other'), '198.51.100.99')).statusCode, 404);
  });
});

describe('turned off', () => {
  it('sends no RateLimit fields and refuses nothing when every limit is 0', async () => {
    const t = await appWith({ rateLimitKeyRequests: 0, rateLimitOrgRequests: 0 });
    const org = await t.newOrg();
    for (let i = 0; i < 20; i++) {
      const res = await list(t, org.headers);
      assert.equal(res.statusCode, 200);
      assert.equal(res.headers['ratelimit-policy'], undefined);
      assert.equal(res.headers.ratelimit, undefined);
    }
  });
});

describe('the defaults', () => {
  it('are far above what an agent loop sends: 600 per key and 1800 per organization a minute', async () => {
    const t = await appWith({});
    const org = await t.newOrg();
    const res = await list(t, org.headers);
    assert.equal(res.headers['ratelimit-policy'], '"api_key";q=600;w=60, "organization";q=1800;w=60');
    // An error answer is counted and carries the fields too.
    const missing = await t.app.inject({ method: 'GET', url: `/api/profiles/${crypto.randomUUID()}`, headers: org.headers });
    assert.equal(missing.statusCode, 404);
    assert.equal(item(missing.headers.ratelimit, 'api_key')?.r, 598);
  });
});
