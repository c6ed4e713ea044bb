// Rate-limit counters in the store (SQLite, or PostgreSQL in a PostgreSQL run), with a
// clock of the test's: requests count up within a window and start again after it,
// reading counts nothing, requests racing are each counted once, ended windows are
// swept. On PostgreSQL, two nodes of one store count one key together: a limit of 3
// requests holds over requests spread across both.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type Db, openStore } from '../../src/store/db.ts';
import { RateLimitCounters } from '../../src/store/rate-limit-counters.ts';
import { startTestApp, type TestApp } from '../support/app.ts';
import { dropTestStore, TEST_STORE, testStoreConfig } from '../support/test-store.ts';

describe('rate-limit counters in the store', () => {
  let dataDir: string;
  let db: Db;
  let clock = Date.parse('2026-11-26T12:00:00.000Z');
  let counters: RateLimitCounters;

  before(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'roomkit-counters-'));
    db = await openStore({ dataDir, ...(await testStoreConfig(dataDir)) });
    counters = new RateLimitCounters(db, () => clock);
  });
  after(async () => {
    await db.destroy();
    await dropTestStore(dataDir);
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('counts within a window, and starts again after it', async () => {
    assert.deepEqual(await counters.increment('api_key:k1', 60_000), { current: 1, ttl: 60_000 });
    clock += 10_000;
    assert.deepEqual(await counters.increment('api_key:k1', 60_000), { current: 2, ttl: 50_000 });
    assert.deepEqual(await counters.read('api_key:k1'), { current: 2, ttl: 50_000 }, 'reading counts nothing');
    assert.equal((await counters.increment('api_key:k2', 60_000)).current, 1, 'another key counts apart');
    clock += 50_000;
    assert.deepEqual(await counters.increment('api_key:k1', 60_000), { current: 1, ttl: 60_000 }, 'a new window');
  });

  it('counts every one of racing requests', async () => {
    await Promise.all(Array.from({ length: 20 }, () => counters.increment('raced', 60_000)));
    assert.equal((await counters.read('raced')).current, 20);
  });

  it('sweeps ended windows', async () => {
    await counters.increment('old', 1_000);
    clock += 61_000;
    assert.ok((await counters.sweep()) >= 1);
    assert.deepEqual(await counters.read('old'), { current: 0, ttl: 0 });
    const left = await db.selectFrom('rate_limit_counters').select('key').execute();
    assert.deepEqual(left, [], 'every window had ended');
  });
});

describe('rate limits counted together by the nodes of a store', { skip: TEST_STORE !== 'postgres' && 'PostgreSQL: several nodes share only that store' }, () => {
  const dirs = { a: '', b: '' };
  let a: TestApp;
  let b: TestApp;

  before(async () => {
    dirs.a = mkdtempSync(join(tmpdir(), 'roomkit-limits-a-'));
    dirs.b = mkdtempSync(join(tmpdir(), 'roomkit-limits-b-'));
    const databaseUrl = (await testStoreConfig(dirs.a)).databaseUrl as string;
    a = await startTestApp({ config: { dataDir: dirs.a, databaseUrl, nodeHeartbeatMs: 60_000, rateLimitKeyRequests: 3 } });
    b = await startTestApp({ config: { dataDir: dirs.b, databaseUrl, nodeHeartbeatMs: 60_000, rateLimitKeyRequests: 3 } });
  });
  after(async () => {
    await a.close();
    await b.close();
    await dropTestStore(dirs.a);
    for (const dir of Object.values(dirs)) rmSync(dir, { recursive: true, force: true });
  });

  it('refuses the fourth request of a key limited to 3, wherever the requests went', async () => {
    const org = await a.newOrg();
    const get = (t: TestApp) => t.app.inject({ method: 'GET', url: '/api/profiles', headers: org.headers });
    const answers = [await get(a), await get(b), await get(a)];
    assert.deepEqual(answers.map((r) => r.statusCode), [200, 200, 200]);
    assert.match(String(answers[2]!.headers.ratelimit), /"api_key";r=0/);
    const fourth = await get(b);
    assert.equal(fourth.statusCode, 429, fourth.body);
    assert.equal(fourth.json().error, 'rate_limited');
  });
});
