// The web console's operator session: signing in with the operator token gives a session
// of its own kind, which reaches the operator API (beside its CSRF token) and never an
// organization's; a wrong token is refused and counted by the auth throttle; a changed
// token, signing out and the session's age end it.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { CONSOLE_SESSION_TTL_MS } from '../../src/core/console-sessions.ts';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';

const TOKEN = 'operator-token-of-the-console-tests-0123456789';

let t: TestApp;
let org: TestOrg;

before(async () => {
  t = await startTestApp({ config: { operatorToken: TOKEN, authFailureBurst: 3, authFailureWindowS: 60 } });
  org = await t.newOrg();
});
after(() => t.close());

interface Signed {
  cookie: string;
  csrf: string;
}

async function signIn(app: TestApp, payload: Record<string, string>, remoteAddress = '127.0.0.1'): Promise<Signed> {
  const res = await app.app.inject({ method: 'POST', url: '/console/session', payload, remoteAddress });
  assert.equal(res.statusCode, 201, res.body);
  const cookie = /^(roomkit_session=[^;]+);/.exec(String(res.headers['set-cookie']))?.[1];
  assert.ok(cookie);
  return { cookie, csrf: res.json().csrf_token };
}

const withSession = (s: Signed, csrf: string | null = s.csrf) => ({ cookie: s.cookie, ...(csrf === null ? {} : { 'x-roomkit-csrf': csrf }) });

describe('the operator in the console', () => {
  it('signs in with the operator token and reaches the operator API with the session and its token', async () => {
    const res = await t.app.inject({ method: 'POST', url: '/console/session', payload: { operator_token: TOKEN }, remoteAddress: '127.0.0.10' });
    assert.equal(res.statusCode, 201, res.body);
    assert.match(String(res.headers['set-cookie']), /^roomkit_session=rko_[A-Za-z0-9_-]{43}; Path=\/; Max-Age=43200; HttpOnly; SameSite=Strict$/);
    const body = res.json();
    assert.deepEqual([body.kind, body.organization_id, body.key_id, body.env], ['operator', null, null, null]);
    assert.ok(Math.abs(Date.parse(body.expires_at) - (Date.now() + CONSOLE_SESSION_TTL_MS)) < 60_000);
    assert.ok(!JSON.stringify(body).includes(TOKEN), 'the token is not echoed');

    const s = await signIn(t, { operator_token: TOKEN }, '127.0.0.10');
    const who = await t.app.inject({ method: 'GET', url: '/console/session', headers: { cookie: s.cookie } });
    assert.equal(who.json().kind, 'operator');
    assert.equal(who.json().csrf_token, s.csrf);
    const usage = await t.app.inject({ method: 'GET', url: `/operator/orgs/${org.organizationId}/usage`, headers: withSession(s) });
    assert.equal(usage.statusCode, 200, usage.body);
    assert.equal(usage.json().organization_id, org.organizationId);
    const set = await t.app.inject({ method: 'PUT', url: `/operator/orgs/${org.organizationId}/quotas`, headers: withSession(s), payload: { instances: 7 } });
    assert.equal(set.json().quotas.instances.limit, 7, set.body);
    for (const csrf of [null, 'x'.repeat(43)]) {
      const refused = await t.app.inject({ method: 'PUT', url: `/operator/orgs/${org.organizationId}/quotas`, headers: withSession(s, csrf), payload: { instances: 9 } });
      assert.equal(refused.statusCode, 403, refused.body);
      assert.equal(refused.json().error, 'invalid_csrf_token');
    }
    const after = await t.app.inject({ method: 'GET', url: `/operator/orgs/${org.organizationId}/usage`, headers: { authorization: `Bearer ${TOKEN}` } });
    assert.equal(after.json().quotas.instances.limit, 7, 'the refused change changed nothing');
  });

  it('reaches no organization with an operator session, and no operator route with a key session', async () => {
    const operator = await signIn(t, { operator_token: TOKEN }, '127.0.0.11');
    const api = await t.app.inject({ method: 'GET', url: '/api/profiles', headers: withSession(operator) });
    assert.equal(api.statusCode, 401, api.body);
    assert.equal(api.json().error, 'invalid_api_key');
    const key = await signIn(t, { api_key: org.apiKey }, '127.0.0.11');
    assert.equal((await t.app.inject({ method: 'GET', url: '/console/session', headers: { cookie: key.cookie } })).json().kind, 'key');
    const op = await t.app.inject({ method: 'GET', url: '/operator/capacity', headers: withSession(key) });
    assert.equal(op.statusCode, 401, op.body);
    assert.equal(op.json().error, 'invalid_operator_token');
  });

  it('refuses a wrong token, and both fields or neither; a burst of wrong tokens is throttled', async () => {
    for (const [payload, code] of [
      [{ operator_token: 'not-the-token' }, 'invalid_operator_token'],
      [{ operator_token: TOKEN, api_key: org.apiKey }, 'validation_error'],
      [{}, 'validation_error'],
    ] as const) {
      const res = await t.app.inject({ method: 'POST', url: '/console/session', payload, remoteAddress: '127.0.0.12' });
      assert.equal(res.json().error, code, res.body);
      assert.equal(res.headers['set-cookie'], undefined);
    }
    for (let i = 0; i < 2; i++) await t.app.inject({ method: 'POST', url: '/console/session', payload: { operator_token: `wrong-${i}` }, remoteAddress: '127.0.0.12' });
    const throttled = await t.app.inject({ method: 'POST', url: '/console/session', payload: { operator_token: TOKEN }, remoteAddress: '127.0.0.12' });
    assert.equal(throttled.statusCode, 429, throttled.body);
    assert.equal(throttled.json().error, 'auth_throttled');
  });

  it('refuses the operator sign-in where the server has no operator token', async () => {
    const plain = await startTestApp();
    try {
      const res = await plain.app.inject({ method: 'POST', url: '/console/session', payload: { operator_token: TOKEN } });
      assert.equal(res.statusCode, 401, res.body);
      assert.equal(res.json().error, 'invalid_operator_token');
      assert.match(res.json().message, /no operator token/);
    } finally {
      await plain.close();
    }
  });

  it('ends with signing out, with the session’s age, and when the operator token changes', async () => {
    const s = await signIn(t, { operator_token: TOKEN }, '127.0.0.13');
    const out = await t.app.inject({ method: 'DELETE', url: '/console/session', headers: withSession(s) });
    assert.equal(out.statusCode, 204, out.body);
    const gone = await t.app.inject({ method: 'GET', url: '/operator/capacity', headers: withSession(s) });
    assert.equal(gone.json().error, 'invalid_operator_token');

    const sessions = t.services.consoleSessions;
    const made = await sessions.createOperator(TOKEN);
    assert.ok(await sessions.findOperator(made.sessionId, TOKEN));
    assert.equal(await sessions.findOperator(made.sessionId, 'another-operator-token-0123456789abcdef'), undefined, 'a changed token ends it');
    assert.equal(await sessions.findOperator(made.sessionId, undefined), undefined, 'no token on the server: no operator');
    assert.equal(await sessions.findOperator(made.sessionId, TOKEN, Date.now() + CONSOLE_SESSION_TTL_MS + 1), undefined, 'expired');
    assert.equal(await sessions.find(made.sessionId), undefined, 'not a key session');
  });
});
