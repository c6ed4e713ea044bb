// Code contexts' REST routes on the runtime double, which runs no interpreter: the
// refusals before one would start (a language it does not speak, a body that is not
// one, a room without an instance, a runtime that keeps no stdin open) and the 404 of a
// context that is not there, for every route; and the run_code tool of `roomkit mcp`
// reaching those routes over HTTP. What a context does is tested on real instances
// (test/host/code-contexts.test.ts).
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { RemoteToolBackend } from '../../src/adapters/tools/remote-backend.ts';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';

let t: TestApp;
let org: TestOrg;

before(async () => {
  t = await startTestApp();
  org = await t.newOrg();
  const created = await t.app.inject({ method: 'POST', url: `/api/profile/${org.defaultProfileId}/room/ctx`, headers: org.headers });
  assert.equal(created.statusCode, 201, created.body);
});
after(() => t.close());

const contexts = (room = 'ctx') => `/api/profile/${org.defaultProfileId}/room/${room}/contexts`;
const call = (method: 'GET' | 'POST' | 'DELETE', url: string, payload?: object) =>
  t.app.inject({ method, url, headers: org.headers, ...(payload ? { payload } : {}) });

describe('code context routes', () => {
  it('refuse a language no context speaks, saying which it speaks', async () => {
    const res = await call('POST', contexts(), { language: 'cobol' });
    assert.equal(res.statusCode, 400);
    assert.equal(res.json().error, 'validation_error');
    assert.equal(res.json().message, 'unknown language "cobol": a context runs "python", "javascript", "bash"');
  });

  it('refuse fields a context does not take', async () => {
    const res = await call('POST', contexts(), { language: 'python', kernel: 'x' });
    assert.equal(res.statusCode, 400);
    assert.equal(res.json().error, 'validation_error');
  });

  it('answer instance_not_found for a room without an instance', async () => {
    const res = await call('POST', contexts('empty'), {});
    assert.equal(res.statusCode, 404);
    assert.equal(res.json().error, 'instance_not_found');
  });

  it('answer feature_unavailable where the runtime keeps no stdin open', async () => {
    const res = await call('POST', contexts(), {});
    assert.equal(res.statusCode, 409);
    assert.equal(res.json().error, 'feature_unavailable');
    assert.match(res.json().message, /cannot run code contexts/);
  });

  it('list none at first', async () => {
    const res = await call('GET', contexts());
    assert.equal(res.statusCode, 200);
    assert.deepEqual(res.json(), { contexts: [] });
  });

  it('answer context_not_found for a context that is not there, on every route', async () => {
    const id = randomUUID();
    for (const [method, path, body] of [
      ['GET', '', undefined],
      ['DELETE', '', undefined],
      ['POST', '/restart', undefined],
      ['POST', '/interrupt', undefined],
      ['POST', '/run', { code: '1 + 1' }],
      ['POST', '/run', { code: '1 + 1', stream: true }],
    ] as const) {
      const res = await call(method, `${contexts()}/${id}${path}`, body);
      assert.equal(res.statusCode, 404, `${method} ${path}: ${res.body}`);
      assert.equal(res.json().error, 'context_not_found');
      assert.equal(res.json().details.context_id, id);
    }
  });

  it('refuse a run without code, or with a time limit under a second', async () => {
    const id = randomUUID();
    for (const body of [{}, { code: '1', timeout_s: 0 }]) {
      const res = await call('POST', `${contexts()}/${id}/run`, body);
      assert.equal(res.statusCode, 400, res.body);
      assert.equal(res.json().error, 'validation_error');
    }
  });
});

describe('run_code over the HTTP API (roomkit mcp\'s backend)', () => {
  it('makes the room\'s context through the API and answers its refusal as the API\'s error', async () => {
    const base = await t.app.listen({ host: '127.0.0.1', port: 0 });
    const backend = new RemoteToolBackend({ baseUrl: base, apiKey: org.apiKey, maxRetries: 0 });
    await assert.rejects(backend.runCode({ profile: 'default', room: 'ctx' }, { code: '1 + 1' }), (err: Error & { code?: string; status?: number }) => {
      assert.equal(err.code, 'feature_unavailable', err.message);
      assert.match(err.message, /cannot run code contexts/);
      return true;
    });
    await assert.rejects(backend.runCode({ profile: 'default', room: 'empty' }, { code: '1' }), (err: Error & { code?: string }) => err.code === 'instance_not_found');
  });
});
