// API keys: the format, randomness, hashing, and that only a hash is stored.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { API_KEY_PATTERN, generateApiKey, hashApiKey, keyPrefix, parseApiKey, sameHash } from '../../src/core/apikeys.ts';
import { startTestApp, type TestApp } from '../support/app.ts';

describe('API key format', () => {
  it('is rk_<env>_ and 32 lowercase hex characters', () => {
    for (const env of ['live', 'test'] as const) {
      const key = generateApiKey(env);
      assert.match(key, new RegExp(`^rk_${env}_[0-9a-f]{32}$`));
      assert.equal(parseApiKey(key), env);
    }
  });

  it('is random: 2000 keys are all different and use every hex digit', () => {
    const keys = new Set(Array.from({ length: 2000 }, () => generateApiKey('live')));
    assert.equal(keys.size, 2000);
    const digits = new Set([...keys].join('').replace(/rk_live_/g, ''));
    assert.equal(digits.size, 16);
  });

  it('rejects near misses', () => {
    const hex = 'a'.repeat(32);
    for (const bad of [
      `rk_prod_${hex}`,
      `rk_live_${hex.slice(1)}`,
      `rk_live_${hex}0`,
      `rk_live_${'A'.repeat(32)}`,
      `rk_live_${'g'.repeat(32)}`,
      `RK_LIVE_${hex}`,
      ` rk_live_${hex}`,
      '',
    ]) {
      assert.equal(parseApiKey(bad), null, bad);
      assert.doesNotMatch(bad, API_KEY_PATTERN);
    }
  });

  it('hashes with SHA-256 and compares hashes exactly', () => {
    const key = generateApiKey('test');
    const expected = createHash('sha256').update(key).digest('hex');
    assert.equal(hashApiKey(key), expected);
    assert.ok(sameHash(expected, hashApiKey(key)));
    assert.ok(!sameHash(expected, hashApiKey(generateApiKey('test'))));
    assert.ok(!sameHash(expected, expected.slice(0, 62)));
  });

  it('shows a prefix of the env and 8 hex characters', () => {
    const key = generateApiKey('live');
    assert.equal(keyPrefix(key), key.slice(0, 16));
    assert.match(keyPrefix(key), /^rk_live_[0-9a-f]{8}$/);
    assert.match(keyPrefix(generateApiKey('test')), /^rk_test_[0-9a-f]{8}$/);
  });
});

describe('API key storage', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
  });
  after(() => t.close());

  it('stores the hash and prefix, never the key', async () => {
    const org = await t.newOrg();
    const rows = await t.services.db.selectFrom('api_keys').selectAll().where('organization_id', '=', org.organizationId).execute();
    assert.equal(rows.length, 1);
    const row = rows[0]!;
    assert.equal(row.hash, hashApiKey(org.apiKey));
    assert.equal(row.prefix, keyPrefix(org.apiKey));
    assert.equal(row.env, 'test');
    assert.ok(!Object.values(row).some((v) => typeof v === 'string' && v.includes(org.apiKey.slice(16))));
  });

  it('creates, lists and revokes keys over the API; the key is shown once', async () => {
    const org = await t.newOrg();
    const created = await t.app.inject({ method: 'POST', url: '/api/keys', headers: org.headers, payload: { name: 'ci', env: 'live' } });
    assert.equal(created.statusCode, 201);
    const key = created.json();
    assert.match(key.api_key, API_KEY_PATTERN);
    assert.equal(key.env, 'live');
    assert.equal(key.name, 'ci');
    assert.equal(key.prefix, keyPrefix(key.api_key));

    const list = await t.app.inject({ method: 'GET', url: '/api/keys', headers: org.headers });
    assert.equal(list.statusCode, 200);
    const listed = list.json().keys;
    assert.equal(listed.length, 2);
    assert.ok(!list.body.includes(key.api_key), 'a listing never shows a key');
    const entry = listed.find((k: { key_id: string }) => k.key_id === key.key_id);
    assert.deepEqual(Object.keys(entry).sort(), ['created_at', 'env', 'key_id', 'last_used_at', 'name', 'prefix']);
    // The calling key was just used, so its last_used_at is set.
    const caller = listed.find((k: { key_id: string }) => k.key_id !== key.key_id);
    assert.ok(caller.last_used_at);

    const newHeaders = { authorization: `Bearer ${key.api_key}` };
    assert.equal((await t.app.inject({ method: 'GET', url: '/api/profiles', headers: newHeaders })).statusCode, 200);
    const revoke = await t.app.inject({ method: 'DELETE', url: `/api/keys/${key.key_id}`, headers: org.headers });
    assert.equal(revoke.statusCode, 204);
    assert.equal(revoke.body, '');
    const after = await t.app.inject({ method: 'GET', url: '/api/profiles', headers: newHeaders });
    assert.equal(after.statusCode, 401);
    assert.equal(after.json().error, 'invalid_api_key');
    const again = await t.app.inject({ method: 'DELETE', url: `/api/keys/${key.key_id}`, headers: org.headers });
    assert.equal(again.statusCode, 404);
    assert.equal(again.json().error, 'key_not_found');
  });

  it('defaults a new key to the environment of the calling key', async () => {
    const org = await t.newOrg();
    const created = await t.app.inject({ method: 'POST', url: '/api/keys', headers: org.headers });
    assert.equal(created.statusCode, 201);
    assert.match(created.json().api_key, /^rk_test_/);
  });
});
