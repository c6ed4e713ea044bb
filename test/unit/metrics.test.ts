// GET /metrics without a runtime: open by default, behind ROOMKIT_METRICS_TOKEN when
// set, absent when `off`; each app has its own registry; refusals are counted by kind.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import type { ConfigOverrides } from '../../src/config.ts';
import { Metrics } from '../../src/metrics.ts';
import { startTestApp, type TestApp } from '../support/app.ts';
import { scrape } from '../support/metrics.ts';

const apps: TestApp[] = [];
after(async () => {
  for (const t of apps) await t.close();
});

async function appWith(config: ConfigOverrides = {}): Promise<TestApp> {
  const t = await startTestApp({ config });
  apps.push(t);
  return t;
}

const TOKEN = 'metrics-token-0123456789';

describe('GET /metrics', () => {
  it('answers without a key by default, in the Prometheus text format', async () => {
    const t = await appWith();
    const now = await scrape(t.app);
    assert.ok(now.value('process_resident_memory_bytes') > 0);
    assert.equal(now.value('roomkit_instances', { state: 'ready' }), 0);
  });

  it('needs the bearer token when ROOMKIT_METRICS_TOKEN is set', async () => {
    const t = await appWith({ metricsToken: TOKEN });
    for (const headers of [{}, { authorization: 'Bearer wrong-token-0123456789' }, { authorization: TOKEN }]) {
      const res = await t.app.inject({ method: 'GET', url: '/metrics', headers });
      assert.equal(res.statusCode, 401, JSON.stringify(headers));
      assert.equal(res.json().error, 'invalid_api_key');
      assert.doesNotMatch(res.body, /roomkit_/);
    }
    await scrape(t.app, { authorization: `Bearer ${TOKEN}` });
  });

  it('is not there when ROOMKIT_METRICS_TOKEN is off', async () => {
    const t = await appWith({ metricsToken: 'off' });
    assert.equal((await t.app.inject({ method: 'GET', url: '/metrics' })).statusCode, 404);
  });

  it('keeps each app\'s figures apart', async () => {
    const [a, b] = [await appWith(), await appWith()];
    for (let i = 0; i < 3; i++) await a.app.inject({ method: 'GET', url: '/healthz' });
    const labels = { method: 'GET', route: '/healthz', status: '200' };
    assert.equal((await scrape(a.app)).value('roomkit_http_requests_total', labels), 3);
    assert.equal((await scrape(b.app)).value('roomkit_http_requests_total', labels), 0);
  });

  it('counts rate-limit refusals by limit, and error bodies by code', async () => {
    const t = await appWith({ rateLimitKeyRequests: 1 });
    const org = await t.newOrg();
    for (let i = 0; i < 3; i++) await t.app.inject({ method: 'GET', url: '/api/profiles', headers: org.headers });
    const now = await scrape(t.app);
    assert.equal(now.value('roomkit_rate_limit_rejections_total', { limit: 'api_key' }), 2);
    assert.equal(now.value('roomkit_http_errors_total', { code: 'rate_limited' }), 2);
    assert.equal(now.value('roomkit_http_requests_total', { method: 'GET', route: '/api/profiles', status: '429' }), 2);
  });
});

describe('requests no route matched', () => {
  it('are counted as `unmatched`, router errors included, never by their URL', async () => {
    const t = await appWith();
    await t.app.inject({ method: 'GET', url: '/nope/secret-looking-path' });
    await t.app.inject({ method: 'GET', url: '/api/profiles/%zz' });
    const now = await scrape(t.app);
    assert.equal(now.value('roomkit_http_requests_total', { method: 'GET', route: 'unmatched', status: '404' }), 1);
    assert.equal(now.value('roomkit_http_requests_total', { method: 'GET', route: 'unmatched', status: '400' }), 1);
    assert.equal(now.value('roomkit_http_errors_total', { code: 'invalid_url' }), 1);
    assert.ok(!now.text.includes('secret-looking-path'));
  });
});

describe('Metrics', () => {
  it('counts quota and capacity refusals apart from other errors, by their code', async () => {
    const metrics = new Metrics();
    for (const code of ['quota_exceeded', 'quota_exceeded', 'capacity_exhausted', 'file_not_found']) metrics.errorSent(code);
    const text = (await metrics.scrape()).body;
    assert.match(text, /^roomkit_quota_rejections_total\{code="quota_exceeded"\} 2$/m);
    assert.match(text, /^roomkit_quota_rejections_total\{code="capacity_exhausted"\} 1$/m);
    assert.doesNotMatch(text, /roomkit_quota_rejections_total\{code="file_not_found"\}/);
    assert.match(text, /^roomkit_http_errors_total\{code="file_not_found"\} 1$/m);
  });
});
