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
    assert.deepEqual(
      [config.rateLimitKeyRequests, config.rateLimitOrgRequests, config.rateLimitRawClientRequests, config.rateLimitRawInstanceRequests, config.rateLimitWindowS],
      [600, 1800, 300, 600, 60],
    );
    assert.deepEqual(config.trustProxy, []);
    assert.equal(config.metricsToken, undefined);
    assert.ok(Object.isFrozen(config));
  });

  it('reads ROOMKIT_* variables, and flags win over them', () => {
    const env = { ROOMKIT_PORT: '9000', ROOMKIT_MAX_OUTPUT_BYTES: '4096', ROOMKIT_PUBLIC_URL: 'https://rk.example.com/base/' };
    const config = loadConfig({ port: 9100 }, env);
    assert.equal(config.port, 9100);
    assert.equal(config.maxOutputBytes, 4096);
    assert.equal(config.publicUrl, 'https://rk.example.com/base');
    assert.deepEqual(loadConfig({}, { ROOMKIT_TRUST_PROXY: '127.0.0.1, 10.0.0.0/8,::1,fd00::/8' }).trustProxy, ['127.0.0.1', '10.0.0.0/8', '::1', 'fd00::/8']);
  });

  it('refuses bad values, naming the variable and the form it takes', () => {
    const cases: [Record<string, string>, RegExp][] = [
      [{ ROOMKIT_PORT: 'eighty' }, /ROOMKIT_PORT/],
      [{ ROOMKIT_PUBLIC_URL: 'not a url' }, /ROOMKIT_PUBLIC_URL must be a URL such as https:\/\//],
      [{ ROOMKIT_PUBLIC_URL: 'ftp://host' }, /ROOMKIT_PUBLIC_URL must be an http\(s\) URL/],
      [{ ROOMKIT_PUBLIC_URL: 'https://user:pw@host' }, /without credentials/],
      [{ ROOMKIT_NETWORK_POOL: '10.0.0.0/30' }, /ROOMKIT_NETWORK_POOL must be an IPv4 range/],
      [{ ROOMKIT_RATE_LIMIT_KEY_REQUESTS: '-1' }, /ROOMKIT_RATE_LIMIT_KEY_REQUESTS must be a whole number from 0/],
      [{ ROOMKIT_RATE_LIMIT_WINDOW_S: '0' }, /ROOMKIT_RATE_LIMIT_WINDOW_S must be a whole number from 1/],
      [{ ROOMKIT_TRUST_PROXY: '10.0.0.1,proxy.local' }, /ROOMKIT_TRUST_PROXY must be addresses or CIDR ranges .*"proxy.local"/],
      [{ ROOMKIT_TRUST_PROXY: '10.0.0.0/33' }, /ROOMKIT_TRUST_PROXY/],
      [{ ROOMKIT_METRICS_TOKEN: 'short' }, /ROOMKIT_METRICS_TOKEN must be 16 to 256 printable characters/],
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
