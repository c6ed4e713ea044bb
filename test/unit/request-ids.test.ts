// Request ids: one per request, in the X-Request-Id header, in every Error body and on
// every log line written while the request is answered (the services' own included). A
// trusted proxy's X-Request-Id is kept when it is a short plain token; anyone else's is not.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { after, describe, it } from 'node:test';
import { type ConfigOverrides, loadConfig } from '../../src/config.ts';
import { buildApp } from '../../src/app.ts';
import type { App } from '../../src/http/types.ts';
import { loggedUrl } from '../../src/http/request-log.ts';
import { createLogger } from '../../src/log.ts';
import { createServices, type Services } from '../../src/services.ts';
import { FakeRuntime } from '../support/fake-runtime.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const closers: (() => Promise<void>)[] = [];
after(async () => {
  for (const close of closers) await close();
});

/** An app on the runtime double whose log lines (raw JSON text) are kept. */
async function logged(config: ConfigOverrides = {}): Promise<{ app: App; services: Services; lines: string[]; headers: Record<string, string>; profileId: string }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'roomkit-test-'));
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk, _encoding, done) {
      lines.push(...String(chunk).split('\n').filter(Boolean));
      done();
    },
  });
  const services = await createServices(loadConfig({ dataDir, logLevel: 'info', ...config }, {}), createLogger('info', sink), {
    runtime: { runtime: new FakeRuntime() },
  });
  const app = await buildApp(services);
  closers.push(async () => {
    await app.close();
    await services.close();
    rmSync(dataDir, { recursive: true, force: true });
  });
  const { organization } = await services.organizations.ensure('ids');
  const { secret } = await services.organizations.createKey(organization.organization_id, { env: 'test' });
  const [profile] = await services.profiles.list(organization.organization_id);
  return { app, services, lines, headers: { authorization: `Bearer ${secret}` }, profileId: profile!.profile_id };
}

const ofRequest = (lines: string[], id: string) => lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.requestId === id);

describe('log lines', () => {
  it('show no secret a URL carries: a preview token, a terminal ticket', () => {
    assert.equal(loggedUrl('/p/v2.c2VjcmV0/index.html?x=1'), '/p/…/index.html?x=1');
    assert.equal(loggedUrl('/api/profile/p/room/r/terminal?cols=80&ticket=abc&rows=24'), '/api/profile/p/room/r/terminal?cols=80&ticket=…&rows=24');
    assert.equal(loggedUrl('/?roomkit_token=v2.abc'), '/?roomkit_token=…');
    assert.equal(loggedUrl('/api/profiles?limit=5'), '/api/profiles?limit=5');
  });

  it('carry the request id on the request\'s own lines and on those the services write for it, once each', async () => {
    const { app, lines, headers, profileId } = await logged();
    const created = await app.inject({ method: 'POST', url: `/api/profile/${profileId}/room/logs`, headers });
    assert.equal(created.statusCode, 201, created.body);
    const id = String(created.headers['x-request-id']);
    const messages = ofRequest(lines, id).map((l) => l.msg);
    // One line for the request itself, at its end, with its status and time.
    const own = ofRequest(lines, id).filter((l) => l.msg === 'request');
    assert.equal(own.length, 1, messages.join(', '));
    assert.deepEqual([own[0]!.method, own[0]!.statusCode, typeof own[0]!.responseTimeMs], ['POST', 201, 'number']);
    assert.ok(!messages.includes('incoming request') && !messages.includes('request completed'), messages.join(', '));
    // Written by core/instances.ts with its own logger, not the request's.
    assert.ok(messages.includes('instance provisioning started'), messages.join(', '));
    assert.ok(messages.includes('instance state'), messages.join(', '));
    for (const line of lines) assert.ok((line.match(/"requestId":/g) ?? []).length <= 1, `one requestId per line: ${line}`);

    const ran = await app.inject({ method: 'POST', url: `/api/profile/${profileId}/room/logs/command`, headers, payload: { command: 'echo hi' } });
    assert.equal(ran.statusCode, 200, ran.body);
    assert.ok(ofRequest(lines, String(ran.headers['x-request-id'])).some((l) => l.msg === 'command finished'));
  });

  it('name the request on the log line of an unexpected error, as the Error body does', async () => {
    const { app, services, lines, headers } = await logged();
    services.profiles.list = async () => {
      throw new Error('boom');
    };
    const res = await app.inject({ method: 'GET', url: '/api/profiles', headers });
    assert.equal(res.statusCode, 500);
    assert.equal(res.json().request_id, res.headers['x-request-id']);
    const failed = ofRequest(lines, String(res.headers['x-request-id'])).find((l) => l.msg === 'request failed');
    assert.ok(failed, 'the error is logged under the request id');
  });
});

describe('an incoming X-Request-Id', () => {
  it('is ignored when no proxy is trusted', async () => {
    const { app } = await logged();
    const res = await app.inject({ method: 'GET', url: '/nope', headers: { 'x-request-id': 'from-the-client-1' } });
    assert.match(String(res.headers['x-request-id']), UUID);
    assert.equal(res.json().request_id, res.headers['x-request-id']);
  });

  it('is kept from a trusted proxy when it is a short plain token, in the header, the Error body and the log', async () => {
    const { app, lines } = await logged({ trustProxy: '127.0.0.1' });
    const res = await app.inject({ method: 'GET', url: '/nope', headers: { 'x-request-id': 'edge-7f3a.42:b_c' } });
    assert.equal(res.headers['x-request-id'], 'edge-7f3a.42:b_c');
    assert.equal(res.json().request_id, 'edge-7f3a.42:b_c');
    assert.ok(ofRequest(lines, 'edge-7f3a.42:b_c').some((l) => l.msg === 'request'));
  });

  it('is replaced when it is not a short plain token, even from a trusted proxy', async () => {
    const { app } = await logged({ trustProxy: '127.0.0.0/8' });
    for (const bad of ['has space', 'quote"d', 'x'.repeat(129), '-leading-dash', 'a\u00e9b', '{"json":1}']) {
      const res = await app.inject({ method: 'GET', url: '/nope', headers: { 'x-request-id': bad } });
      assert.match(String(res.headers['x-request-id']), UUID, JSON.stringify(bad));
    }
  });

  it('is ignored from an address that is not a trusted proxy', async () => {
    const { app } = await logged({ trustProxy: '10.0.0.0/8' });
    const res = await app.inject({ method: 'GET', url: '/nope', remoteAddress: '192.0.2.7', headers: { 'x-request-id': 'spoofed-id' } });
    assert.match(String(res.headers['x-request-id']), UUID);
  });
});
