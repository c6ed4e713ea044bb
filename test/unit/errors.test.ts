// Every failure answers with the Error body ({error, message}) as JSON: bad bodies,
// unknown routes and methods, router errors and bugs. Never HTML, never a stack trace,
// and every response carries the security headers.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';

let t: TestApp;
let org: TestOrg;

before(async () => {
  t = await startTestApp();
  org = await t.newOrg();
});
after(() => t.close());

interface Response {
  statusCode: number;
  headers: Record<string, string | string[] | number | undefined>;
  body: string;
  json(): any;
}

/** Asserts `res` is an Error body with this status and code, and answers the body. */
function assertError(res: Response, status: number, code: string): { error: string; message: string } {
  assert.equal(res.statusCode, status, res.body);
  assert.match(String(res.headers['content-type']), /^application\/json\b/);
  assertNoLeak(res);
  const body = res.json();
  assert.equal(body.error, code);
  assert.equal(typeof body.message, 'string');
  assert.ok(body.message.length > 0);
  for (const key of Object.keys(body)) assert.ok(['error', 'message', 'details', 'request_id'].includes(key), `unexpected field ${key}`);
  assert.equal(res.headers['x-content-type-options'], 'nosniff');
  assert.equal(typeof res.headers['x-request-id'], 'string');
  // The body names the request, as the header and the log do.
  assert.equal(body.request_id, res.headers['x-request-id']);
  return body;
}

/** No HTML page and no stack trace, in the body or a header. */
function assertNoLeak(res: Response) {
  const everything = `${res.body}\n${JSON.stringify(res.headers)}`;
  assert.doesNotMatch(everything, /<html/i);
  assert.doesNotMatch(everything, /^\s*at /m, 'no stack trace lines');
  assert.doesNotMatch(everything, /\bat .*\.(ts|js|mjs):\d+/, 'no stack frames');
  assert.doesNotMatch(everything, /node_modules|\/work\/|file:\/\//, 'no file paths');
}

const post = (payload: string | undefined, contentType: string | undefined, url = '/api/profiles') =>
  t.app.inject({
    method: 'POST',
    url,
    headers: { ...org.headers, ...(contentType === undefined ? {} : { 'content-type': contentType }) },
    ...(payload === undefined ? {} : { payload }),
  });

describe('request bodies', () => {
  it('answers malformed JSON with 400 invalid_json', async () => {
    for (const payload of ['{"name":', '{name: "x"}', "{'name':'x'}", '{"name":"x"}}']) {
      assertError(await post(payload, 'application/json'), 400, 'invalid_json');
    }
  });

  it('answers a body with a __proto__ key with 400 invalid_json', async () => {
    const body = assertError(await post('{"name":"proto","__proto__":{"x":1}}', 'application/json'), 400, 'invalid_json');
    assert.match(body.message, /JSON/);
  });

  it('answers a non-JSON content type with 415 unsupported_media_type', async () => {
    const body = assertError(await post('{"name":"plain"}', 'text/plain'), 415, 'unsupported_media_type');
    assert.match(body.message, /application\/json/);
    assertError(await post('name=form', 'application/x-www-form-urlencoded'), 415, 'unsupported_media_type');
    assertError(await post('<name>x</name>', 'application/xml'), 415, 'unsupported_media_type');
  });

  it('takes JSON with a charset parameter', async () => {
    const res = await post('{"name":"charset"}', 'application/json; charset=utf-8');
    assert.equal(res.statusCode, 201, res.body);
  });

  it('answers a body over the limit with 413 body_too_large, and takes one at the limit', async () => {
    const limit = t.services.config.bodyLimitBytes;
    assert.equal(limit, 1024 * 1024, 'the default limit');
    // A valid create body padded with spaces to exactly `size` bytes.
    const sized = (size: number, name: string) => {
      const json = JSON.stringify({ name });
      return json + ' '.repeat(size - json.length);
    };
    const over = sized(limit + 1, 'too-big');
    assert.equal(Buffer.byteLength(over), limit + 1);
    assertError(await post(over, 'application/json'), 413, 'body_too_large');
    const exact = await post(sized(limit, 'just-fits'), 'application/json');
    assert.equal(exact.statusCode, 201, exact.body);
  });

  it('takes an empty JSON body as {} and says name is required', async () => {
    for (const payload of [undefined, '', '  \n']) {
      const body = assertError(await post(payload, 'application/json'), 400, 'validation_error');
      assert.match(body.message, /\bname is required\b/);
    }
  });

  it('answers a JSON body of the wrong shape with 400 validation_error', async () => {
    for (const payload of ['null', '"name"', '42', '[]']) {
      assertError(await post(payload, 'application/json'), 400, 'validation_error');
    }
  });
});

describe('routes', () => {
  it('answers an unknown route with 404 not_found', async () => {
    for (const url of ['/nope', '/api/nope', '/api/profiles/x/y/z', '/api']) {
      const body = assertError(await t.app.inject({ method: 'GET', url, headers: org.headers }), 404, 'not_found');
      assert.ok(body.message.includes(url), body.message);
    }
    assertError(await t.app.inject({ method: 'GET', url: '/api/nope' }), 404, 'not_found');
  });

  it('answers a wrong method with 405 method_not_allowed and an Allow header', async () => {
    const res = await t.app.inject({ method: 'PUT', url: '/api/profiles', headers: org.headers, payload: {} });
    const body = assertError(res, 405, 'method_not_allowed');
    assert.equal(res.headers.allow, 'GET, POST');
    assert.match(body.message, /PUT/);

    const one = await t.app.inject({ method: 'POST', url: `/api/profiles/${org.defaultProfileId}`, headers: org.headers, payload: {} });
    assertError(one, 405, 'method_not_allowed');
    assert.deepEqual(String(one.headers.allow).split(', ').sort(), ['DELETE', 'GET', 'PATCH']);

    const collection = await t.app.inject({ method: 'DELETE', url: '/api/profiles/', headers: org.headers });
    assertError(collection, 405, 'method_not_allowed');
    assert.equal(collection.headers.allow, 'GET, POST');
  });

  it('answers a badly percent-encoded URL with 400 invalid_url', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/api/profiles/%E0%A4%A', headers: org.headers });
    assertError(res, 400, 'invalid_url');
  });

  it('answers an overlong path segment with 414 uri_too_long', async () => {
    const res = await t.app.inject({ method: 'GET', url: `/api/profiles/${'a'.repeat(5000)}`, headers: org.headers });
    assertError(res, 414, 'uri_too_long');
  });

  it('answers a missing API key with 401 in the same shape', async () => {
    assertError(await t.app.inject({ method: 'GET', url: '/api/profiles' }), 401, 'missing_api_key');
  });
});

describe('internal errors', () => {
  it('answers 500 internal_error naming the request id and hiding the cause', async () => {
    const original = t.services.profiles.list;
    t.services.profiles.list = async () => {
      throw new Error('boom secret');
    };
    try {
      const res = await t.app.inject({ method: 'GET', url: '/api/profiles', headers: org.headers });
      const body = assertError(res, 500, 'internal_error');
      assert.doesNotMatch(res.body, /boom|secret/);
      const requestId = res.headers['x-request-id'];
      assert.equal(typeof requestId, 'string');
      assert.ok(body.message.includes(String(requestId)), `message "${body.message}" should name ${String(requestId)}`);
    } finally {
      t.services.profiles.list = original;
    }
    assert.equal((await t.app.inject({ method: 'GET', url: '/api/profiles', headers: org.headers })).statusCode, 200);
  });

  it('hides a thrown non-Error value too', async () => {
    const original = t.services.profiles.get;
    t.services.profiles.get = async () => {
      throw 'a string secret';
    };
    try {
      const res = await t.app.inject({ method: 'GET', url: `/api/profiles/${org.defaultProfileId}`, headers: org.headers });
      assertError(res, 500, 'internal_error');
      assert.doesNotMatch(res.body, /secret/);
    } finally {
      t.services.profiles.get = original;
    }
  });

  it('gives each request its own id', async () => {
    const a = await t.app.inject({ method: 'GET', url: '/nope' });
    const b = await t.app.inject({ method: 'GET', url: '/nope' });
    assert.notEqual(a.headers['x-request-id'], b.headers['x-request-id']);
  });
});

describe('security headers', () => {
  it('sets X-Content-Type-Options: nosniff on every response', async () => {
    const created = await post('{"name":"headers"}', 'application/json');
    assert.equal(created.statusCode, 201);
    const responses = [
      created,
      await t.app.inject({ method: 'DELETE', url: `/api/profiles/${created.json().profile_id}`, headers: org.headers }),
      await t.app.inject({ method: 'GET', url: '/api/profiles', headers: org.headers }),
      await t.app.inject({ method: 'GET', url: '/healthz' }),
      await t.app.inject({ method: 'GET', url: '/openapi.json' }),
      await t.app.inject({ method: 'GET', url: '/docs/' }),
      await t.app.inject({ method: 'GET', url: '/nope' }),
      await t.app.inject({ method: 'GET', url: '/api/profiles' }),
      await t.app.inject({ method: 'PUT', url: '/api/profiles', headers: org.headers }),
      await post('{', 'application/json'),
      await t.app.inject({ method: 'GET', url: '/api/profiles/%zz', headers: org.headers }),
    ];
    assert.deepEqual(
      responses.map((r) => r.statusCode),
      [201, 204, 200, 200, 200, 200, 404, 401, 405, 400, 400],
    );
    for (const res of responses) {
      assert.equal(res.headers['x-content-type-options'], 'nosniff', `${res.statusCode} ${res.body.slice(0, 80)}`);
    }
  });
});
