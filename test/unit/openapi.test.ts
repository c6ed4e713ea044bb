// The OpenAPI document and the meta endpoints: /openapi.json describes every /api/
// route with its method and bearer security and the Error schema, and lints clean with
// @redocly/cli; /docs serves the reference page from this server alone, with roomkit's
// name and the API version; /healthz reports the service and its runtime.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { PACKAGE_ROOT } from '../../src/config.ts';
import { API_VERSION } from '../../src/app.ts';
import sdkPackage from '../../sdk/package.json' with { type: 'json' };
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
// A wildcard (the file path) appears as the parameter `path`.
const toOpenApiPath = (url: string) => url.replace(/:([A-Za-z0-9_]+)/g, '{$1}').replace(/\*$/, '{path}');
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

const REDOCLY = join(PACKAGE_ROOT, 'node_modules', '@redocly', 'cli', 'bin', 'cli.js');

interface LintReport {
  totals: { errors: number; warnings: number; ignored: number };
  problems: { ruleId: string; severity: string; message: string; location: { pointer?: string }[] }[];
}

/** `redocly lint` of the document a listening app serves, with the repository's redocly.yaml. */
async function lintServed(app: TestApp['app']): Promise<LintReport> {
  await app.listen({ host: '127.0.0.1', port: 0 });
  const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  const served = await fetch(`${base}/openapi.json`);
  assert.equal(served.status, 200);
  const dir = mkdtempSync(join(tmpdir(), 'roomkit-openapi-lint-'));
  try {
    const file = join(dir, 'openapi.json');
    writeFileSync(file, await served.text());
    const lint = await promisify(execFile)(process.execPath, [REDOCLY, 'lint', file, '--config', join(PACKAGE_ROOT, 'redocly.yaml'), '--format=json'], {
      cwd: dir,
      // No telemetry or update check: the linter works offline.
      env: { PATH: process.env.PATH ?? '', HOME: dir, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' },
      maxBuffer: 16 * 1024 * 1024,
    }).catch((err: { stdout?: string }) => ({ stdout: err.stdout ?? '' }));
    return JSON.parse(lint.stdout) as LintReport;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function describeProblems(report: LintReport): string {
  return report.problems.map((p) => `${p.severity} ${p.ruleId}: ${p.message} at ${p.location[0]?.pointer ?? '?'}`).join('\n');
}

/** Every operation of the document, as [path, method, operation]. */
function allOperations(): [string, string, any][] {
  return Object.entries<any>(doc.paths).flatMap(([path, item]) =>
    Object.entries<any>(item)
      .filter(([method]) => HTTP_METHODS.includes(method))
      .map(([method, op]): [string, string, any] => [path, method, op]),
  );
}

describe('/openapi.json', () => {
  it('lints clean with @redocly/cli: no error and no warning', async () => {
    const app = await startTestApp();
    try {
      const report = await lintServed(app.app);
      assert.deepEqual(report.totals, { errors: 0, warnings: 0, ignored: 0 }, describeProblems(report));
    } finally {
      await app.close();
    }
  });

  it('lints clean too when the operator API and the metrics token exist', async () => {
    const app = await startTestApp({ config: { operatorToken: 'o'.repeat(40), metricsToken: 'm'.repeat(24), publicUrl: 'https://roomkit.internal.test' } });
    try {
      const report = await lintServed(app.app);
      assert.deepEqual(report.totals, { errors: 0, warnings: 0, ignored: 0 }, describeProblems(report));
      const res = await app.app.inject({ method: 'GET', url: '/openapi.json' });
      const withTokens = res.json();
      assert.deepEqual(withTokens.servers, [{ url: 'https://roomkit.internal.test', description: 'This roomkit server' }]);
      assert.deepEqual(withTokens.paths['/metrics'].get.security, [{ metricsToken: [] }]);
      const operator = Object.entries<any>(withTokens.paths).filter(([path]) => path.startsWith('/operator/'));
      assert.ok(operator.length > 0, 'the operator API is described');
      for (const [, item] of operator) for (const op of Object.values<any>(item)) assert.deepEqual(op.security, [{ operatorToken: [] }]);
    } finally {
      await app.close();
    }
  });

  it('names every operation with a stable, unique operationId', () => {
    const ids = allOperations().map(([path, method, op]) => {
      assert.match(String(op.operationId), /^[a-z][A-Za-z]+$/, `${method} ${path} has no operationId`);
      return op.operationId as string;
    });
    assert.equal(new Set(ids).size, ids.length, 'operationIds repeat');
    // Names the SDKs and generated clients use: renaming one breaks them.
    const byRoute = Object.fromEntries(allOperations().map(([path, method, op]) => [`${method.toUpperCase()} ${path}`, op.operationId]));
    assert.equal(byRoute['POST /api/profile/{profile_id}/room/{room_id}'], 'createInstance');
    assert.equal(byRoute['POST /api/profile/{profile_id}/room/{room_id}/command'], 'runCommand');
    assert.equal(byRoute['GET /api/profile/{profile_id}/room/{room_id}/file/{path}'], 'readFile');
    assert.equal(byRoute['GET /vm/{instance_id}/file/{path}'], 'readRawFile');
  });

  it('gives every operation a 2XX answer but the WebSocket terminal, which documents 101', () => {
    for (const [path, method, op] of allOperations()) {
      const statuses = Object.keys(op.responses ?? {});
      if (path.endsWith('/terminal') && method === 'get') assert.ok(statuses.includes('101'), 'the terminal documents its upgrade');
      else assert.ok(statuses.some((s) => /^2\d\d$/.test(s)), `${method} ${path} documents no 2XX (has ${statuses.join(', ')})`);
    }
  });

  it('names the file path parameter `path`, declared and used in the path', () => {
    for (const path of ['/api/profile/{profile_id}/room/{room_id}/file/{path}', '/vm/{instance_id}/file/{path}']) {
      assert.ok(doc.paths[path], `${path} is described`);
      for (const op of Object.values<any>(doc.paths[path])) {
        const param = op.parameters.find((p: any) => p.in === 'path' && p.name === 'path');
        assert.ok(param?.required && param.description, `${path}: the path parameter is described`);
      }
    }
    assert.equal(JSON.stringify(doc.paths).includes('{*}'), false);
  });

  it('documents the event streams: a streamed command and /mcp answer text/event-stream, with an example', () => {
    const run = doc.paths['/api/profile/{profile_id}/room/{room_id}/command'].post.responses['200'].content;
    assert.ok(run['application/json'].schema, 'the CommandResult');
    assert.equal(run['text/event-stream'].schema.type, 'string');
    assert.match(run['text/event-stream'].example, /^event: started\ndata: \{/);
    assert.match(run['text/event-stream'].example, /\nevent: result\n/);
    assert.ok(doc.paths['/mcp'].post.responses['200'].content['text/event-stream']);
    assert.match(doc.info.description, /Server-Sent Events/);
  });

  it('declares security on every operation: none on the public ones', () => {
    for (const [path, method, op] of allOperations()) {
      assert.ok(Array.isArray(op.security), `${method} ${path} declares no security`);
      if (['/healthz', '/readyz', '/metrics', '/vm/{instance_id}/file/{path}'].includes(path)) assert.deepEqual(op.security, [], `${method} ${path} is public`);
    }
  });

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
    assert.deepEqual(doc.paths['/healthz'].get.security, []);
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
  for (const url of ['/docs', '/docs/']) {
    it(`serves the API reference as HTML at ${url}, titled with roomkit's name and the API version`, async () => {
      const res = await getFollowing(url);
      assert.equal(res.statusCode, 200, res.body.slice(0, 200));
      assert.match(String(res.headers['content-type']), /^text\/html\b/);
      assert.match(res.body, new RegExp(`<title>roomkit API ${API_VERSION.replaceAll('.', '\\.')}</title>`));
    });
  }

  it('loads only what this server serves: its script and /openapi.json, under a CSP that allows nothing else', async () => {
    const page = await getFollowing('/docs/');
    const csp = String(page.headers['content-security-policy']);
    assert.match(csp, /default-src 'self'/);
    assert.match(csp, /connect-src 'self'/);
    assert.match(csp, /font-src 'self' data:/);
    // Every script and stylesheet the page names is a path on this server.
    const sources = [...page.body.matchAll(/<(?:script|link)\b[^>]*\b(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
    assert.ok(sources.length > 0, 'the page loads a script');
    for (const source of sources) assert.doesNotMatch(source, /^(?:[a-z]+:)?\/\//i, `the page loads ${source} from elsewhere`);
    for (const source of sources) {
      const asset = await t.app.inject({ method: 'GET', url: new URL(source, 'http://localhost/docs/').pathname });
      assert.equal(asset.statusCode, 200, `${source}: ${asset.statusCode}`);
      assert.match(String(asset.headers['content-type']), /javascript|css/);
      assert.ok(asset.body.length > 100_000, `${source} is the reference's bundle`);
    }
    // The page reads the API's own document, which carries the same name and version.
    assert.match(page.body, /"url":\s*"\/openapi\.json"/);
    const document = (await t.app.inject({ method: 'GET', url: '/openapi.json' })).json();
    assert.equal(document.info.title, 'roomkit');
    assert.equal(document.info.version, API_VERSION);
  });

  it('names the same version as the TypeScript SDK package and /healthz', async () => {
    assert.equal(sdkPackage.version, API_VERSION);
    assert.equal((await t.app.inject({ method: 'GET', url: '/healthz' })).json().version, API_VERSION);
    assert.equal(JSON.parse(readFileSync(join(PACKAGE_ROOT, 'sdk', 'package.json'), 'utf8')).version, doc.info.version);
  });
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
