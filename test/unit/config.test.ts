// Configuration: defaults that work for a newcomer, flags over environment variables,
// and a clear error naming the setting for a bad value.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { startTestApp } from '../support/app.ts';

describe('loadConfig', () => {
  it('has defaults for everything', () => {
    const config = loadConfig({}, {});
    assert.equal(config.host, '127.0.0.1');
    assert.equal(config.port, 8080);
    assert.equal(config.maxOutputBytes, 1024 * 1024);
    assert.equal(config.commandOutputRetainBytes, 64 * 1024 * 1024);
    assert.equal(config.publicUrl, undefined);
    assert.ok(Object.isFrozen(config));
  });

  it('reads ROOMKIT_* variables, and flags win over them', () => {
    const env = { ROOMKIT_PORT: '9000', ROOMKIT_MAX_OUTPUT_BYTES: '4096', ROOMKIT_PUBLIC_URL: 'https://rk.example.com/base/' };
    const config = loadConfig({ port: 9100 }, env);
    assert.equal(config.port, 9100);
    assert.equal(config.maxOutputBytes, 4096);
    assert.equal(config.publicUrl, 'https://rk.example.com/base');
  });

  it('refuses bad values, naming the variable and the form it takes', () => {
    const cases: [Record<string, string>, RegExp][] = [
      [{ ROOMKIT_PORT: 'eighty' }, /ROOMKIT_PORT/],
      [{ ROOMKIT_PUBLIC_URL: 'not a url' }, /ROOMKIT_PUBLIC_URL must be a URL such as https:\/\//],
      [{ ROOMKIT_PUBLIC_URL: 'ftp://host' }, /ROOMKIT_PUBLIC_URL must be an http\(s\) URL/],
      [{ ROOMKIT_PUBLIC_URL: 'https://user:pw@host' }, /without credentials/],
      [{ ROOMKIT_NETWORK_POOL: '10.0.0.0/30' }, /ROOMKIT_NETWORK_POOL must be an IPv4 range/],
    ];
    for (const [env, message] of cases) {
      assert.throws(() => loadConfig({}, env), (err: unknown) => err instanceof ConfigError && message.test(err.message), JSON.stringify(env));
    }
  });
});

describe('ROOMKIT_PUBLIC_URL', () => {
  it('makes the URLs in tool results whole with the public address instead of the request\'s', async () => {
    const t = await startTestApp({ config: { publicUrl: 'https://rk.example.com' } });
    try {
      const org = await t.newOrg();
      const room = `/api/profile/${org.defaultProfileId}/room/public`;
      assert.equal((await t.app.inject({ method: 'POST', url: room, headers: org.headers })).statusCode, 201);
      const res = await t.app.inject({
        method: 'POST',
        url: `${room}/tools/call`,
        headers: { ...org.headers, host: 'internal:8080' },
        payload: { name: 'write_file', arguments: { path: 'a.txt', content: 'x' } },
      });
      assert.equal(res.statusCode, 200, res.body);
      assert.match(res.json().content[0].text, /URL: https:\/\/rk\.example\.com\/vm\/[0-9a-f-]{36}\/file\/home\/user\/a\.txt$/);
    } finally {
      await t.close();
    }
  });
});
