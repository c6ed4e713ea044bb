// The web console's session: signing in with a key gives an httpOnly, SameSite=Strict
// cookie that the REST API accepts only beside the session's CSRF token; signing out, a
// revoked key and the session's age end it. And the console's pages carry their CSP.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import Fastify from 'fastify';
import { CONSOLE_SESSION_TTL_MS } from '../../src/core/console-sessions.ts';
import { pageRoutes } from '../../src/adapters/console/pages.ts';
import { createLogger } from '../../src/log.ts';
import type { App } from '../../src/http/types.ts';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';

let t: TestApp;
let a: TestOrg;
let b: TestOrg;

before(async () => {
  t = await startTestApp();
  a = await t.newOrg();
  b = await t.newOrg();
});
after(() => t.close());

interface Signed {
  cookie: string;
  csrf: string;
  keyId: string;
}

async function signIn(apiKey: string): Promise<Signed> {
  const res = await t.app.inject({ method: 'POST', url: '/console/session', payload: { api_key: apiKey } });
  assert.equal(res.statusCode, 201, res.body);
  const set = String(res.headers['set-cookie']);
  const cookie = /^(roomkit_session=[^;]+);/.exec(set)?.[1];
  assert.ok(cookie, set);
  return { cookie, csrf: res.json().csrf_token, keyId: res.json().key_id };
}

/** The session's headers; `csrf` null leaves the token out. */
const withSession = (s: Signed, csrf: string | null = s.csrf) => ({ cookie: s.cookie, ...(csrf === null ? {} : { 'x-roomkit-csrf': csrf }) });

describe('signing in', () => {
  it('sets an httpOnly, SameSite=Strict cookie for the whole site and answers who is signed in', async () => {
    const res = await t.app.inject({ method: 'POST', url: '/console/session', payload: { api_key: a.apiKey } });
    assert.equal(res.statusCode, 201, res.body);
    const set = String(res.headers['set-cookie']);
    assert.match(set, /^roomkit_session=rks_[A-Za-z0-9_-]{43}; Path=\/; Max-Age=43200; HttpOnly; SameSite=Strict$/);
    assert.equal(res.headers['cache-control'], 'no-store');
    const body = res.json();
    assert.equal(body.organization_id, a.organizationId);
    assert.equal(body.env, a.apiKey.split('_')[1]);
    assert.match(body.csrf_token, /^[A-Za-z0-9_-]{43}$/);
    assert.ok(Math.abs(Date.parse(body.expires_at) - (Date.now() + CONSOLE_SESSION_TTL_MS)) < 60_000, body.expires_at);
    assert.ok(!JSON.stringify(body).includes(a.apiKey), 'the key is not echoed');
  });

  it('marks the cookie Secure when the console is reached over https', async () => {
    const proxied = await startTestApp({ config: { trustProxy: '127.0.0.1' } });
    try {
      const org = await proxied.newOrg();
      const res = await proxied.app.inject({ method: 'POST', url: '/console/session', payload: { api_key: org.apiKey }, headers: { 'x-forwarded-proto': 'https' } });
      assert.equal(res.statusCode, 201, res.body);
      assert.match(String(res.headers['set-cookie']), /; HttpOnly; SameSite=Strict; Secure$/);
    } finally {
      await proxied.close();
    }
    const behind = await startTestApp({ config: { publicUrl: 'https://rk.example' } });
    try {
      const org = await behind.newOrg();
      const res = await behind.app.inject({ method: 'POST', url: '/console/session', payload: { api_key: org.apiKey } });
      assert.match(String(res.headers['set-cookie']), /; Secure$/, 'an https public URL: the browser reaches it over TLS');
    } finally {
      await behind.close();
    }
  });

  it('refuses an unknown key and a malformed body, setting no cookie', async () => {
    for (const [payload, code] of [
      [{ api_key: 'rk_live_' + '0'.repeat(32) }, 'invalid_api_key'],
      [{ api_key: 'nope' }, 'invalid_api_key'],
      [{ key: a.apiKey }, 'validation_error'],
    ] as const) {
      const res = await t.app.inject({ method: 'POST', url: '/console/session', payload });
      assert.equal(res.json().error, code, res.body);
      assert.equal(res.headers['set-cookie'], undefined);
    }
  });

  it('takes JSON only, so a form posted by another site signs no one in', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/console/session',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: `api_key=${a.apiKey}`,
    });
    assert.equal(res.statusCode, 415);
    assert.equal(res.headers['set-cookie'], undefined);
  });
});

describe('sign-in, audited and throttled', () => {
  it('records signing in and out in the audit trail, under the key', async () => {
    const s = await signIn(a.apiKey);
    const out = await t.app.inject({ method: 'DELETE', url: '/console/session', headers: withSession(s) });
    assert.equal(out.statusCode, 204, out.body);
    for (const [action, status] of [
      ['console.sign_in', 201],
      ['console.sign_out', 204],
    ] as const) {
      const res = await t.app.inject({ method: 'GET', url: `/api/audit?action=${action}`, headers: a.headers });
      assert.equal(res.statusCode, 200, res.body);
      const event = res.json().events[0];
      assert.ok(event, `no ${action} event`);
      assert.equal(event.key_id, s.keyId);
      assert.equal(event.route, '/console/session');
      assert.equal(event.status, status);
      assert.equal(event.decision, 'allowed');
    }
    const theirs = await t.app.inject({ method: 'GET', url: '/api/audit?action=console.sign_in', headers: b.headers });
    assert.deepEqual(theirs.json().events, [], 'another organization sees none of them');
  });

  it('counts rejected keys against the address and then refuses its sign-ins, a valid key too, with 429', async () => {
    const throttled = await startTestApp({ config: { authFailureBurst: 3, authFailureWindowS: 60 } });
    try {
      const org = await throttled.newOrg();
      for (let i = 0; i < 3; i++) {
        const res = await throttled.app.inject({ method: 'POST', url: '/console/session', payload: { api_key: 'rk_live_' + String(i).repeat(32) } });
        assert.equal(res.json().error, 'invalid_api_key', res.body);
      }
      const refused = await throttled.app.inject({ method: 'POST', url: '/console/session', payload: { api_key: org.apiKey } });
      assert.equal(refused.statusCode, 429, refused.body);
      assert.equal(refused.json().error, 'auth_throttled');
      assert.ok(Number(refused.headers['retry-after']) > 0, JSON.stringify(refused.headers));
      assert.equal(refused.headers['set-cookie'], undefined);
      const api = await throttled.app.inject({ method: 'GET', url: '/api/profiles', headers: org.headers });
      assert.equal(api.json().error, 'auth_throttled', 'the same count as the API: the address is refused there too');
      const other = await throttled.app.inject({ method: 'POST', url: '/console/session', payload: { api_key: org.apiKey }, remoteAddress: '127.0.0.2' });
      assert.equal(other.statusCode, 201, 'another address signs in');
    } finally {
      await throttled.close();
    }
  });
});

/** The profile ids a GET /api/profiles answer lists. */
const profileIds = (res: { json(): { profiles: { profile_id: string }[] } }) => res.json().profiles.map((p) => p.profile_id);
/** The organization's profiles, as its own key lists them (every organization has `default` and `code-interpreter`). */
const profileIdsOf = async (org: { headers: Record<string, string> }) => profileIds(await t.app.inject({ method: 'GET', url: '/api/profiles', headers: org.headers }));

describe('the REST API with a session', () => {
  it('answers as the key the session was made with, and only with the CSRF token', async () => {
    const s = await signIn(a.apiKey);
    const ok = await t.app.inject({ method: 'GET', url: '/api/profiles', headers: withSession(s) });
    assert.equal(ok.statusCode, 200, ok.body);
    assert.deepEqual(profileIds(ok), await profileIdsOf(a));
    assert.ok(profileIds(ok).includes(a.defaultProfileId));
    for (const csrf of [null, '', 'x'.repeat(43), (await signIn(a.apiKey)).csrf]) {
      for (const [method, url] of [
        ['GET', '/api/profiles'],
        ['POST', `/api/profile/${a.defaultProfileId}/room/csrf-room`],
        ['DELETE', `/api/keys/${s.keyId}`],
      ] as const) {
        const res = await t.app.inject({ method, url, headers: withSession(s, csrf) });
        assert.equal(res.statusCode, 403, `${method} ${url} with ${JSON.stringify(csrf)}: ${res.body}`);
        assert.equal(res.json().error, 'invalid_csrf_token');
        assert.match(res.json().message, /x-roomkit-csrf/);
      }
    }
    const rooms = await t.app.inject({ method: 'GET', url: `/api/profile/${a.defaultProfileId}/room/csrf-room`, headers: a.headers });
    assert.equal(rooms.json().error, 'instance_not_found', 'the refused create made nothing');
    const key = await t.app.inject({ method: 'GET', url: '/api/keys', headers: a.headers });
    assert.ok(key.json().keys.some((k: { key_id: string }) => k.key_id === s.keyId), 'the refused revoke revoked nothing');
  });

  it('opens no terminal on the cookie alone: a WebSocket from another site carries it but no token', async () => {
    const s = await signIn(a.apiKey);
    const res = await t.app.inject({
      method: 'GET',
      url: `/api/profile/${a.defaultProfileId}/room/any/terminal`,
      headers: { cookie: s.cookie, connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==' },
    });
    assert.equal(res.statusCode, 403);
    assert.equal(res.json().error, 'invalid_csrf_token');
  });

  it('never shows another organization what it has', async () => {
    const s = await signIn(b.apiKey);
    const res = await t.app.inject({ method: 'GET', url: `/api/profiles/${a.defaultProfileId}`, headers: withSession(s) });
    assert.equal(res.json().error, 'profile_not_found');
  });

  it('prefers the Authorization header when a request carries both', async () => {
    const s = await signIn(b.apiKey);
    const res = await t.app.inject({ method: 'GET', url: '/api/profiles', headers: { ...a.headers, cookie: s.cookie } });
    assert.equal(res.statusCode, 200);
    assert.deepEqual(profileIds(res), await profileIdsOf(a));
    assert.ok(profileIds(res).includes(a.defaultProfileId));
  });

  it('answers GET /console/session with the same CSRF token, and 401 without a session', async () => {
    const s = await signIn(a.apiKey);
    const res = await t.app.inject({ method: 'GET', url: '/console/session', headers: { cookie: s.cookie } });
    assert.equal(res.statusCode, 200);
    assert.equal(res.json().csrf_token, s.csrf);
    assert.equal(res.json().key_id, s.keyId);
    const none = await t.app.inject({ method: 'GET', url: '/console/session' });
    assert.equal(none.statusCode, 401);
    assert.equal(none.json().error, 'missing_api_key');
    const unknown = await t.app.inject({ method: 'GET', url: '/console/session', headers: { cookie: 'roomkit_session=rks_nothing' } });
    assert.equal(unknown.json().error, 'invalid_api_key');
  });
});

describe('the end of a session', () => {
  it('signs out: the cookie is cleared and the session no longer works; not without the token', async () => {
    const s = await signIn(a.apiKey);
    const refused = await t.app.inject({ method: 'DELETE', url: '/console/session', headers: { cookie: s.cookie } });
    assert.equal(refused.statusCode, 403);
    assert.equal(refused.json().error, 'invalid_csrf_token');
    assert.equal((await t.app.inject({ method: 'GET', url: '/api/profiles', headers: withSession(s) })).statusCode, 200);
    const out = await t.app.inject({ method: 'DELETE', url: '/console/session', headers: withSession(s) });
    assert.equal(out.statusCode, 204);
    assert.match(String(out.headers['set-cookie']), /^roomkit_session=; Path=\/; Max-Age=0; HttpOnly; SameSite=Strict$/);
    const after = await t.app.inject({ method: 'GET', url: '/api/profiles', headers: withSession(s) });
    assert.equal(after.statusCode, 401);
    assert.equal(after.json().error, 'invalid_api_key');
    assert.match(after.json().message, /console session is over/);
  });

  it('ends with its key: a revoked key signs its sessions out at their next request', async () => {
    const made = await t.app.inject({ method: 'POST', url: '/api/keys', headers: a.headers, payload: { name: 'console' } });
    const s = await signIn(made.json().api_key);
    assert.equal((await t.app.inject({ method: 'GET', url: '/api/instances', headers: withSession(s) })).statusCode, 200);
    const revoked = await t.app.inject({ method: 'DELETE', url: `/api/keys/${s.keyId}`, headers: a.headers });
    assert.equal(revoked.statusCode, 204, revoked.body);
    for (const url of ['/api/instances', '/console/session']) {
      const res = await t.app.inject({ method: 'GET', url, headers: withSession(s) });
      assert.equal(res.statusCode, 401, url);
      assert.equal(res.json().error, 'invalid_api_key');
    }
  });

  it('expires a session made longer ago than it lasts', async () => {
    const caller = await t.services.organizations.authenticate(a.apiKey);
    const old = await t.services.consoleSessions.create(caller, Date.now() - CONSOLE_SESSION_TTL_MS - 1000);
    const res = await t.app.inject({
      method: 'GET',
      url: '/api/profiles',
      headers: { cookie: `roomkit_session=${old.sessionId}`, 'x-roomkit-csrf': old.csrfToken },
    });
    assert.equal(res.statusCode, 401);
    assert.equal(res.json().error, 'invalid_api_key');
  });
});

describe('the session id in logs', () => {
  it('is redacted wherever a Cookie header is logged', () => {
    const lines: string[] = [];
    const log = createLogger('info', { write: (line: string) => void lines.push(line) });
    log.info({ req: { headers: { cookie: 'roomkit_session=rks_secret' } }, headers: { cookie: 'roomkit_session=rks_secret' }, cookie: 'roomkit_session=rks_secret' }, 'a request');
    assert.equal(lines.length, 1);
    assert.doesNotMatch(lines[0] as string, /rks_secret/);
    assert.match(lines[0] as string, /\[redacted\]/);
  });
});

describe('the console pages', () => {
  let dir: string;
  let app: App;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'roomkit-console-'));
    writeFileSync(join(dir, 'index.html'), '<!doctype html><title>console</title>');
    writeFileSync(join(dir, 'console.js'), 'console.log(1)');
    app = Fastify() as unknown as App;
    pageRoutes(app, dir);
    await app.ready();
  });
  after(async () => {
    await app.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('serves the one page under every console path, with a strict CSP', async () => {
    for (const url of ['/console', '/console/', '/console/profile/x/room/y']) {
      const res = await app.inject({ method: 'GET', url, headers: { host: 'rk.example:8080' } });
      assert.equal(res.statusCode, 200, url);
      assert.match(String(res.headers['content-type']), /^text\/html/);
      const csp = String(res.headers['content-security-policy']);
      assert.match(csp, /(^|; )default-src 'self'(;|$)/);
      assert.match(csp, /(^|; )script-src 'self'(;|$)/, 'no inline script');
      assert.match(csp, /(^|; )connect-src 'self' ws:\/\/rk\.example:8080 wss:\/\/rk\.example:8080(;|$)/);
      assert.match(csp, /(^|; )frame-ancestors 'none'(;|$)/);
      assert.equal(res.headers['x-frame-options'], 'DENY');
    }
  });

  it('puts no Host header into the policy but a plain host and port', async () => {
    const res = await app.inject({ method: 'GET', url: '/console', headers: { host: "evil; script-src 'unsafe-inline'" } });
    const csp = String(res.headers['content-security-policy']);
    assert.match(csp, /(^|; )connect-src 'self'(;|$)/);
    assert.doesNotMatch(csp, /evil|'unsafe-inline'; script|script-src 'unsafe-inline'/);
    const v6 = await app.inject({ method: 'GET', url: '/console', headers: { host: '[::1]:8080' } });
    assert.match(String(v6.headers['content-security-policy']), /connect-src 'self' ws:\/\/\[::1\]:8080 wss:\/\/\[::1\]:8080/);
  });

  it('serves the built assets with their types, and nothing else', async () => {
    const js = await app.inject({ method: 'GET', url: '/console/assets/console.js' });
    assert.equal(js.statusCode, 200);
    assert.match(String(js.headers['content-type']), /^text\/javascript/);
    assert.equal(js.body, 'console.log(1)');
    for (const name of ['missing.js', '..%2Fpackage.json']) {
      const res = await app.inject({ method: 'GET', url: `/console/assets/${name}` });
      assert.equal(res.statusCode, 404, name);
    }
  });

  it('says how to build the console when it was not built', async () => {
    const empty = Fastify() as unknown as App;
    empty.setErrorHandler((err, _request, reply) => reply.code(404).send({ message: (err as Error).message }));
    pageRoutes(empty, join(dir, 'nothing'));
    const res = await empty.inject({ method: 'GET', url: '/console' });
    assert.equal(res.statusCode, 404);
    assert.match(res.json().message, /scripts\/setup/);
    await empty.close();
  });
});
