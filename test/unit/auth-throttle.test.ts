// Failed authentication throttled per client address: a burst of rejected keys from one
// address gets 429 auth_throttled with Retry-After, for any key it sends until the
// window ends (a valid one too); other addresses, with good keys or bad, are not
// affected; the window ends; /metrics counts failures and refusals.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import type { FastifyRequest } from 'fastify';
import type { ConfigOverrides } from '../../src/config.ts';
import { AuthThrottle } from '../../src/http/auth-throttle.ts';
import { Metrics } from '../../src/metrics.ts';
import { startTestApp, type TestApp } from '../support/app.ts';

const apps: TestApp[] = [];
after(async () => {
  for (const t of apps) await t.close();
});

async function appWith(config: ConfigOverrides): Promise<TestApp> {
  const t = await startTestApp({ config });
  apps.push(t);
  return t;
}

const BAD = { authorization: 'Bearer rk_live_notarealkeyatallnotarealkeyatall' };
const list = (t: TestApp, remoteAddress: string, headers: Record<string, string>) =>
  t.app.inject({ method: 'GET', url: '/api/profiles', headers, remoteAddress });

async function metric(t: TestApp, name: string): Promise<number> {
  const text = await t.services.metrics.registry.metrics();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return Number(line?.split(' ')[1] ?? NaN);
}

describe('failed authentication, throttled per client address', () => {
  it('refuses an address after its burst of bad keys, its valid key too, and leaves other addresses alone', async () => {
    const t = await appWith({ authFailureBurst: 3, authFailureWindowS: 60 });
    const org = await t.newOrg();
    for (let i = 0; i < 3; i++) {
      const res = await list(t, '198.51.100.7', BAD);
      assert.equal(res.statusCode, 401, res.body);
      assert.equal(res.json().error, 'invalid_api_key');
    }
    const refused = await list(t, '198.51.100.7', BAD);
    assert.equal(refused.statusCode, 429, refused.body);
    const body = refused.json();
    assert.equal(body.error, 'auth_throttled');
    assert.match(body.message, /ROOMKIT_AUTH_FAILURE_BURST/);
    const retryAfter = Number(refused.headers['retry-after']);
    assert.ok(retryAfter >= 1 && retryAfter <= 60, `Retry-After ${String(refused.headers['retry-after'])}`);
    assert.equal(body.details.retry_after_s, retryAfter);
    assert.equal(body.details.window_s, 60);

    // The throttled address's valid key is refused as well.
    const validThere = await list(t, '198.51.100.7', org.headers);
    assert.equal(validThere.statusCode, 429, validThere.body);
    assert.equal(validThere.json().error, 'auth_throttled');
    // Another address: its valid key works, and its bad keys are its own count.
    const validElsewhere = await list(t, '203.0.113.9', org.headers);
    assert.equal(validElsewhere.statusCode, 200, validElsewhere.body);
    const badElsewhere = await list(t, '203.0.113.9', BAD);
    assert.equal(badElsewhere.statusCode, 401, badElsewhere.body);

    assert.equal(await metric(t, 'roomkit_auth_failures_total'), 4);
    assert.equal(await metric(t, 'roomkit_auth_throttled_total'), 2);
  });

  it('does not count a request without a key, nor a valid one', async () => {
    const t = await appWith({ authFailureBurst: 2, authFailureWindowS: 60 });
    const org = await t.newOrg();
    for (let i = 0; i < 5; i++) {
      assert.equal((await list(t, '198.51.100.8', {})).statusCode, 401);
      assert.equal((await list(t, '198.51.100.8', org.headers)).statusCode, 200);
    }
    assert.equal(await metric(t, 'roomkit_auth_failures_total'), 0);
  });

  it('counts rejected keys on the E2B adapter\'s X-API-KEY as well', async () => {
    const t = await appWith({ authFailureBurst: 1, authFailureWindowS: 60 });
    const bad = await t.app.inject({ method: 'GET', url: '/e2b/v2/sandboxes', headers: { 'x-api-key': 'rk_live_wrong' }, remoteAddress: '198.51.100.9' });
    assert.equal(bad.statusCode, 401, bad.body);
    const refused = await t.app.inject({ method: 'GET', url: '/e2b/v2/sandboxes', headers: { 'x-api-key': 'rk_live_wrong' }, remoteAddress: '198.51.100.9' });
    assert.equal(refused.statusCode, 429, refused.body);
    assert.ok(Number(refused.headers['retry-after']) >= 1);
  });

  it('is off with a burst of 0, and still counts rejected keys', async () => {
    const t = await appWith({ authFailureBurst: 0 });
    for (let i = 0; i < 30; i++) assert.equal((await list(t, '198.51.100.10', BAD)).statusCode, 401);
    assert.equal(await metric(t, 'roomkit_auth_failures_total'), 30);
    assert.equal(await metric(t, 'roomkit_auth_throttled_total'), 0);
  });

  it('lets an address in again once its window ends', () => {
    let now = 1_000_000;
    const throttle = new AuthThrottle({ burst: 2, windowS: 10 }, new Metrics(), () => now);
    const from = { ip: '2001:db8::1' } as FastifyRequest;
    const sameNetwork = { ip: '2001:db8::2' } as FastifyRequest;
    throttle.failed(from);
    throttle.failed(sameNetwork);
    assert.throws(() => throttle.check(from), (err: { code?: string; details?: { retry_after_s?: number } }) => err.code === 'auth_throttled' && err.details?.retry_after_s === 10);
    now += 9_000;
    assert.throws(() => throttle.check(from), (err: { details?: { retry_after_s?: number } }) => err.details?.retry_after_s === 1);
    now += 1_000;
    throttle.check(from);
    throttle.check(sameNetwork);
  });
});
