// The OpenAPI document and the meta endpoints: /openapi.json describes every /api/
// route with its method and bearer security and the Error schema; /docs serves the
// browsable UI; /healthz reports the service and its runtime.
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type TestApp } from '../support/app.ts';

let t: TestApp;
let doc: any;

before(async () => {
  t = await startTestApp();
  const res = await t.app.inject({ method: 'GET', url: '/openapi.json' });
  assert.equal(res.statusCode, 200, res.body);
  doc = res.json();
});
after(() => t.close());

const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];
// A wildcard (the file path) appears as the parameter `*`.
const toOpenApiPath = (url: string) => url.replace(/:([A-Za-z0-9_]+)/g, '{$1}').replace(/\*$/, '{*}');
const apiRoutes = () => t.app.routeTable.filter((r) => r.url.startsWith('/api/'));

/** Every operation of the document under /api/, as [path, method, operation]. */
function apiOperations(): [string, string, any][] {
  return Object.entries<any>(doc.paths)
    .filter(([path]) => path.startsWith('/api/'))
    .flatMap(([path, item]) =>
      Object.entries<any>(item)
        .filter(([method]) => HTTP_METHODS.includes(method))
        .map(([method, op]): [string, string, any] => [path, method, op]),
    );
}

/** The schema a local `$ref` points at. */
function resolve(ref: string): any {
  assert.match(ref, /^#\//);
  return ref
    .slice(2)
    .split('/')
    .reduce((node: any, part) => node?.[part.replaceAll('~1', '/').replaceAll('~0', '~')], doc);
}

describe('/openapi.json', () => {
  it('is served without authentication as OpenAPI 3.1.0, version 1.0.0', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/openapi.json' });
    assert.equal(res.statusCode, 200);
    assert.match(String(res.headers['content-type']), /^application\/json\b/);
    assert.equal(doc.openapi, '3.1.0');
    assert.equal(doc.info.version, '1.0.0');
    assert.equal(typeof doc.info.title, 'string');
  });

  it('describes every /api/ route with its method', () => {
    const routes = apiRoutes();
    assert.ok(routes.length >= 10, `only ${routes.length} /api/ routes in the route table`);
    for (const { method, url } of routes) {
      const path = toOpenApiPath(url);
      assert.ok(doc.paths[path], `${path} missing from paths`);
      assert.ok(doc.paths[path][method.toLowerCase()], `${method} ${path} missing from paths`);
    }
  });

  it('describes no /api/ operation that is not a route', () => {
    const routes = new Set(apiRoutes().map((r) => `${r.method} ${toOpenApiPath(r.url)}`));
    for (const [path, method] of apiOperations()) {
      assert.ok(routes.has(`${method.toUpperCase()} ${path}`), `${method} ${path} is not a route`);
    }
  });

  it('declares bearer security on every /api/ operation', () => {
    const schemes = doc.components?.securitySchemes ?? {};
    const operations = apiOperations();
    assert.ok(operations.length > 0);
    for (const [path, method, op] of operations) {
      assert.ok(Array.isArray(op.security) && op.security.length > 0, `${method} ${path} declares no security`);
      for (const requirement of op.security) {
        for (const name of Object.keys(requirement)) {
          assert.equal(schemes[name]?.type, 'http', `${method} ${path}: scheme ${name}`);
          assert.equal(String(schemes[name]?.scheme).toLowerCase(), 'bearer', `${method} ${path}: scheme ${name}`);
        }
      }
    }
  });

  it('declares no security on /healthz, which needs none', async () => {
    assert.ok(doc.paths['/healthz']?.get, '/healthz is described');
    assert.equal(doc.paths['/healthz'].get.security, undefined);
    assert.equal((await t.app.inject({ method: 'GET', url: '/healthz' })).statusCode, 200);
  });

  it('has the Error schema, with error and message required', () => {
    const error = doc.components?.schemas?.Error;
    assert.ok(error, `no components.schemas.Error; schemas: ${Object.keys(doc.components?.schemas ?? {}).join(', ')}`);
    assert.equal(error.type, 'object');
    assert.equal(error.properties?.error?.type, 'string');
    assert.equal(error.properties?.message?.type, 'string');
    assert.deepEqual([...error.required].sort(), ['error', 'message']);
  });

  it('answers every error response of an /api/ operation with the Error schema', () => {
    for (const [path, method, op] of apiOperations()) {
      const statuses = Object.keys(op.responses ?? {}).filter((s) => Number(s) >= 400);
      assert.ok(statuses.includes('401'), `${method} ${path} does not document 401`);
      for (const status of statuses) {
        const schema = op.responses[status]?.content?.['application/json']?.schema;
        assert.ok(schema?.$ref, `${method} ${path} ${status} has no schema reference`);
        assert.equal(schema.$ref, '#/components/schemas/Error', `${method} ${path} ${status}`);
        assert.ok(resolve(schema.$ref), `${method} ${path} ${status}: ${schema.$ref} resolves to nothing`);
      }
    }
  });

  it('describes the profile create body with its required name and no extra fields', () => {
    const schema = doc.paths['/api/profiles']?.post?.requestBody?.content?.['application/json']?.schema;
    assert.ok(schema);
    assert.deepEqual(schema.required, ['name']);
    assert.equal(schema.additionalProperties, false);
    assert.equal(schema.properties.memory_mb.minimum, 128);
    assert.equal(schema.properties.memory_mb.maximum, t.services.config.maxMemoryMb);
  });
});

/** GET `url`, following up to three redirects as a browser would. */
async function getFollowing(url: string) {
  let res = await t.app.inject({ method: 'GET', url });
  for (let hops = 0; res.statusCode >= 300 && res.statusCode < 400 && hops < 3; hops++) {
    const next = new URL(String(res.headers.location), new URL(url, 'http://localhost'));
    res = await t.app.inject({ method: 'GET', url: next.pathname + next.search });
  }
  return res;
}

describe('/docs', () => {
  for (const url of ['/docs', '/docs/', '/docs/static/index.html']) {
    it(`serves the API browser as HTML at ${url}`, async () => {
      const res = await getFollowing(url);
      assert.equal(res.statusCode, 200, res.body.slice(0, 200));
      assert.match(String(res.headers['content-type']), /^text\/html\b/);
      assert.match(res.body, /<html/i);
      assert.match(res.body, /swagger/i);
    });
  }
});

describe('/healthz', () => {
  it('answers ok, the version, and the fake runtime as available, without authentication', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/healthz' });
    assert.equal(res.statusCode, 200);
    const body = res.json();
    assert.equal(body.status, 'ok');
    assert.equal(body.version, '1.0.0');
    assert.equal(body.runtime.available, true);
    assert.equal(body.runtime.name, 'fake');
    assert.equal(body.runtime.reason, undefined);
  });
});

describe('/readyz', () => {
  it('answers 200 ready, without authentication, when the store answers and a runtime is available', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/readyz' });
    assert.equal(res.statusCode, 200, res.body);
    assert.deepEqual(res.json(), { status: 'ready', store: 'ok', runtime: 'fake' });
  });

  it('answers 503 not_ready with Retry-After, saying what is missing: no runtime, or a store that does not answer', async () => {
    const none = await startTestApp({ selection: { unavailable: { reason: 'runsc (gVisor) is not installed' } } });
    try {
      const res = await none.app.inject({ method: 'GET', url: '/readyz' });
      assert.equal(res.statusCode, 503, res.body);
      assert.equal(res.json().error, 'not_ready');
      assert.match(res.json().message, /runsc \(gVisor\) is not installed/);
      assert.equal(res.headers['retry-after'], '5');
      // A store that no longer answers (closed under the running app).
      await none.services.db.destroy();
      const closed = await none.app.inject({ method: 'GET', url: '/readyz' });
      assert.equal(closed.statusCode, 503, closed.body);
      assert.match(closed.json().message, /the store does not answer/);
    } finally {
      // Its store is gone, so the services cannot close normally: the app and its directory go.
      await none.app.close();
      rmSync(none.dataDir, { recursive: true, force: true });
    }
  });
});
