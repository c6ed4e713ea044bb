// The port proxy's HTTP layer against real servers on 127.0.0.1 that stand in for the
// programs of an instance (the runtime double puts every instance's ports there): what
// reaches the program and what comes back (headers, streaming both ways, WebSocket),
// refusals as Error bodies, signed URLs in the path and host forms, the connection
// limit. test/host/ports.test.ts does the same against real instances.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { WebSocketServer } from 'ws';
import { FakeRuntime } from '../support/fake-runtime.ts';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';
import { rawGet as rawGetAt } from '../support/raw-get.ts';
import { untilTrue } from '../support/until.ts';

const DOMAIN = 'preview.test';
let t: TestApp;
let org: TestOrg;
let base: string;
let upstream: Server;
let upstreamPort: number;
let silentPort: number;
let instanceId: string;
/** What the stand-in program saw of the last request. */
let seen: { method: string; url: string; headers: IncomingMessage['headers']; bodyBytes: number } | undefined;
const servers: { close(): void }[] = [];

const ROOM = 'web';
const portPath = (port: number | string, rest = '/') => `/api/profile/${org.defaultProfileId}/room/${ROOM}/ports/${port}${rest}`;

async function listen(server: Server): Promise<number> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  servers.push(server);
  return (server.address() as AddressInfo).port;
}

before(async () => {
  upstream = createServer((req, res) => {
    let bodyBytes = 0;
    req.on('data', (d: Buffer) => (bodyBytes += d.length));
    req.on('end', () => {
      seen = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, bodyBytes };
      if (req.url?.startsWith('/slow')) {
        // The first half now, the rest later: a proxy that buffers shows neither until the end.
        res.writeHead(200, { 'content-type': 'text/plain', 'x-app': 'yes', connection: 'close, x-hop', 'x-hop': 'dropped' });
        res.write('first-half\n');
        setTimeout(() => res.end('second-half\n'), 1500);
        return;
      }
      res.writeHead(201, { 'content-type': 'application/json', 'set-cookie': 'app=1; Path=/', 'keep-alive': 'timeout=5' });
      res.end(JSON.stringify({ method: req.method, url: req.url, bodyBytes }));
    });
  });
  upstreamPort = await listen(upstream);
  // Accepts and never answers.
  silentPort = await listen(createServer(() => {}));
  const wss = new WebSocketServer({ port: 0, host: '127.0.0.1' });
  await once(wss, 'listening');
  servers.push(wss);
  wss.on('connection', (socket, req) => {
    socket.send(`hello ${req.url}`);
    socket.on('message', (data, binary) => socket.send(data, { binary }));
  });
  const wsPort = (wss.address() as AddressInfo).port;
  process.env.ROOMKIT_TEST_WS_PORT = String(wsPort);

  t = await startTestApp({
    fake: new FakeRuntime({ portHost: '127.0.0.1', reservedPorts: [905] }),
    config: { previewDomain: DOMAIN, reservedPorts: '22,6000-6001', portProxyTimeoutS: 1, maxPortConnectionsPerInstance: 2 },
  });
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  org = await t.newOrg();
  const created = await t.app.inject({ method: 'POST', url: `/api/profile/${org.defaultProfileId}/room/${ROOM}`, headers: org.headers, payload: {} });
  assert.equal(created.statusCode, 201, created.body);
  instanceId = (created.json() as { instance_id: string }).instance_id;
});

after(async () => {
  for (const s of servers) s.close();
  await t?.close();
});

const wsPort = () => Number(process.env.ROOMKIT_TEST_WS_PORT);

async function signed(port: number, body: Record<string, unknown> = {}) {
  const res = await fetch(`${base}${portPath(port, '/url')}`, { method: 'POST', headers: { ...org.headers, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  assert.equal(res.status, 201, await res.clone().text());
  return (await res.json()) as { url: string; path_url: string; host_url?: string; expires_at: string; instance_id: string; port: number };
}

function rawGet(path: string, headers: Record<string, string>) {
  return rawGetAt(base, path, headers);
}

/** Opens a WebSocket and collects its first `count` messages. */
async function wsMessages(url: string, headers: Record<string, string>, send: string[], count: number): Promise<string[]> {
  const ws = new WebSocket(url, { headers } as unknown as string[]);
  const got: string[] = [];
  const done = new Promise<string[]>((resolve, reject) => {
    ws.addEventListener('message', (e) => {
      got.push(String(e.data));
      if (got.length === count) resolve(got);
    });
    ws.addEventListener('error', () => reject(new Error(`the WebSocket failed after ${JSON.stringify(got)}`)));
  });
  await new Promise<void>((resolve, reject) => {
    ws.addEventListener('open', () => resolve());
    ws.addEventListener('error', () => reject(new Error('the WebSocket did not open')));
  });
  for (const m of send) ws.send(m);
  try {
    return await done;
  } finally {
    ws.close();
  }
}

describe('the path form, with the API key', () => {
  it('passes method, path, query and body on, and the answer back, less hop-by-hop headers and the key', async () => {
    const res = await fetch(`${base}${portPath(upstreamPort, '/a/b%20c?x=1&y=2')}`, {
      method: 'PUT',
      headers: { ...org.headers, 'content-type': 'text/plain', 'x-custom': 'kept', 'x-forwarded-for': '6.6.6.6' },
      body: 'z'.repeat(12345),
    });
    assert.equal(res.status, 201);
    assert.deepEqual(await res.json(), { method: 'PUT', url: '/a/b%20c?x=1&y=2', bodyBytes: 12345 });
    assert.equal(seen?.headers.authorization, undefined, 'the API key must not reach the instance');
    assert.equal(seen?.headers['x-custom'], 'kept');
    assert.equal(seen?.headers['x-forwarded-for'], '127.0.0.1', 'an untrusted client\'s X-Forwarded-For is replaced');
    assert.equal(seen?.headers['x-forwarded-proto'], 'http');
    assert.equal(seen?.headers['x-forwarded-prefix'], `/api/profile/${org.defaultProfileId}/room/${ROOM}/ports/${upstreamPort}`);
    assert.equal(res.headers.get('set-cookie'), 'app=1; Path=/');
    assert.notEqual(res.headers.get('keep-alive'), 'timeout=5', 'hop-by-hop headers of the answer are dropped');
    assert.match(res.headers.get('content-security-policy') ?? '', /^sandbox /);
  });

  it('streams the answer as it comes (first half long before the end) and drops headers the Connection header names', async () => {
    const started = Date.now();
    const res = await fetch(`${base}${portPath(upstreamPort, '/slow')}`, { headers: org.headers });
    assert.equal(res.headers.get('x-app'), 'yes');
    assert.equal(res.headers.get('x-hop'), null);
    const reader = res.body!.getReader();
    const first = await reader.read();
    const firstAt = Date.now() - started;
    assert.match(Buffer.from(first.value!).toString(), /^first-half/);
    assert.ok(firstAt < 1200, `the first half came after ${firstAt} ms: the answer was buffered`);
    let rest = '';
    for (let r = await reader.read(); !r.done; r = await reader.read()) rest += Buffer.from(r.value).toString();
    assert.match(rest, /second-half/);
  });

  it('streams a request body of 20 MiB through without holding it (more than the body limit of JSON routes)', async () => {
    const chunk = Buffer.alloc(1024 * 1024, 7);
    const body = new ReadableStream({
      start(controller) {
        for (let i = 0; i < 20; i++) controller.enqueue(chunk);
        controller.close();
      },
    });
    const res = await fetch(`${base}${portPath(upstreamPort, '/upload')}`, {
      method: 'POST',
      headers: { ...org.headers, 'content-type': 'application/octet-stream' },
      body,
      duplex: 'half',
    } as RequestInit);
    assert.equal(res.status, 201);
    assert.equal(((await res.json()) as { bodyBytes: number }).bodyBytes, 20 * 1024 * 1024);
  });

  it('refuses with Error bodies: no key, another organization, bad and reserved ports, nothing listening, no answer in time', async () => {
    const expect = async (path: string, headers: Record<string, string>, status: number, error: string) => {
      const res = await fetch(`${base}${path}`, { headers });
      const body = (await res.json()) as { error: string; message: string };
      assert.equal(res.status, status, JSON.stringify(body));
      assert.equal(body.error, error);
      return body;
    };
    await expect(portPath(upstreamPort), {}, 401, 'missing_api_key');
    const other = await t.newOrg();
    await expect(portPath(upstreamPort), other.headers, 404, 'profile_not_found');
    await expect(`/api/profile/${other.defaultProfileId}/room/${ROOM}/ports/${upstreamPort}/`, other.headers, 404, 'instance_not_found');
    await expect(portPath(0), org.headers, 400, 'invalid_port');
    await expect(portPath(65536), org.headers, 400, 'invalid_port');
    await expect(portPath('http'), org.headers, 400, 'invalid_port');
    assert.match((await expect(portPath(905), org.headers, 400, 'invalid_port')).message, /roomkit's own/);
    assert.match((await expect(portPath(6001), org.headers, 400, 'invalid_port')).message, /ROOMKIT_RESERVED_PORTS/);
    // A port nothing listens on: one just freed.
    const closed = createServer();
    const freePort = await listen(closed);
    closed.close();
    await once(closed, 'close');
    assert.match((await expect(portPath(freePort), org.headers, 502, 'port_not_listening')).message, /0\.0\.0\.0/);
    await expect(portPath(silentPort), org.headers, 504, 'port_timeout');
    assert.equal(t.services.ports.countIn(instanceId), 0, 'every refused request gave its connection back');
  });

  it('carries a WebSocket both ways', async () => {
    const url = `${base.replace(/^http/, 'ws')}${portPath(wsPort(), '/echo?q=1')}`;
    assert.deepEqual(await wsMessages(url, org.headers, ['one', 'two'], 3), ['hello /echo?q=1', 'one', 'two']);
  });

  it('refuses past ROOMKIT_MAX_PORT_CONNECTIONS_PER_INSTANCE with 429, and takes requests again after', async () => {
    // The WebSocket of the test before goes away as its close reaches both ends.
    await untilTrue('the instance\'s proxied connections to be gone', () => t.services.ports.countIn(instanceId) === 0, { everyMs: 50 });
    const slow = () => fetch(`${base}${portPath(upstreamPort, '/slow')}`, { headers: org.headers });
    const held = await Promise.all([slow(), slow()]);
    assert.deepEqual(held.map((r) => r.status), [200, 200]);
    const refused = await fetch(`${base}${portPath(upstreamPort)}`, { headers: org.headers });
    assert.equal(refused.status, 429);
    assert.equal(((await refused.json()) as { error: string }).error, 'too_many_port_connections');
    await Promise.all(held.map((r) => r.text()));
    await untilTrue('the instance\'s proxied connections to be gone', () => t.services.ports.countIn(instanceId) === 0, { everyMs: 50 });
    assert.equal((await fetch(`${base}${portPath(upstreamPort)}`, { headers: org.headers })).status, 201);
  });
});

describe('the audit trail', () => {
  it('records state-changing requests and WebSockets with the key, and signed URLs made; not GETs', async () => {
    const since = new Date().toISOString();
    await (await fetch(`${base}${portPath(upstreamPort, '/audited')}`, { method: 'DELETE', headers: org.headers })).text();
    await (await fetch(`${base}${portPath(upstreamPort, '/not-audited')}`, { headers: org.headers })).text();
    await wsMessages(`${base.replace(/^http/, 'ws')}${portPath(wsPort(), '/')}`, org.headers, [], 1);
    await signed(upstreamPort);
    await new Promise((r) => setTimeout(r, 200));
    await t.services.audit.flush();
    const res = await t.app.inject({ method: 'GET', url: `/api/audit?since=${encodeURIComponent(since)}`, headers: org.headers });
    const events = (res.json() as { events: { action: string; method: string; status: number; instance_id: string | null }[] }).events;
    const seenActions = events.map((e) => `${e.action} ${e.method} ${e.status}`).sort();
    assert.deepEqual(seenActions, ['port.request DELETE 201', 'port.url POST 201', 'port.websocket GET 101']);
    assert.ok(events.every((e) => e.instance_id === instanceId));
  });
});

describe('signed URLs', () => {
  it('path form: works without a key until it expires; altered, expired or for a revoked key refused', async () => {
    const made = await signed(upstreamPort, { expires_in_s: 60 });
    assert.equal(made.url, made.host_url, 'with a preview domain, url is the host form');
    assert.match(made.path_url, new RegExp(`^${base}/p/v2\\.[^/]+/$`));
    const ok = await fetch(`${made.path_url}dir/x?k=v`, { headers: { authorization: 'Bearer app-token' } });
    assert.equal(ok.status, 201);
    assert.equal(seen?.url, '/dir/x?k=v');
    assert.equal(seen?.headers.authorization, 'Bearer app-token', 'an Authorization that is not a roomkit key goes to the program');
    const withKey = await fetch(made.path_url, { headers: org.headers });
    assert.equal(withKey.status, 201);
    assert.equal(seen?.headers.authorization, undefined, 'a roomkit key never reaches the program');
    // Without its trailing slash: redirected to it, so relative links resolve.
    const bare = await fetch(made.path_url.slice(0, -1), { redirect: 'manual' });
    assert.equal(bare.status, 308);

    const token = made.path_url.split('/p/')[1]!.slice(0, -1);
    // Whoever holds the URL learns nothing from its token: not the instance's id (which
    // reaches its raw file endpoint), nor the organization's or the key's.
    const readable = token.split('.').map((part) => Buffer.from(part, 'base64url').toString('latin1')).join(' ') + ` ${token}`;
    for (const secret of [instanceId, org.organizationId, (await keyOf(org)).key_id]) {
      assert.ok(!readable.includes(secret), `the token reveals ${secret}`);
      assert.ok(!readable.includes(secret.replaceAll('-', '')), `the token reveals ${secret}`);
    }
    const altered = token.slice(0, -2) + (token.endsWith('AA') ? 'BB' : 'AA');
    const bad = await fetch(`${base}/p/${altered}/`);
    assert.equal(bad.status, 401);
    assert.equal(((await bad.json()) as { error: string }).error, 'invalid_preview_token');
    // The readable tokens of earlier versions are refused, saying to sign again.
    const readableToken = `v1.${Buffer.from(JSON.stringify({ i: instanceId, p: upstreamPort, e: 9999999999 })).toString('base64url')}.mac`;
    const old = await fetch(`${base}/p/${readableToken}/`);
    assert.equal(old.status, 401);
    assert.match(((await old.json()) as { message: string }).message, /earlier version of roomkit.*sign it again/);

    const past = await t.services.ports.sign(
      { organizationId: org.organizationId, keyId: (await keyOf(org)).key_id, env: 'test' },
      org.defaultProfileId,
      ROOM,
      upstreamPort,
      60,
      Date.now() - 3600_000,
    );
    const expired = await fetch(`${base}/p/${past.token}/`);
    assert.equal(expired.status, 401);
    assert.equal(((await expired.json()) as { error: string }).error, 'preview_url_expired');

    // A URL signed by a key that is revoked afterwards stops working (positive control first).
    const spare = await t.app.inject({ method: 'POST', url: '/api/keys', headers: org.headers, payload: { name: 'spare' } });
    const spareKey = spare.json() as { key_id: string; api_key: string };
    const bySpare = await fetch(`${base}${portPath(upstreamPort, '/url')}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${spareKey.api_key}`, 'content-type': 'application/json' },
      body: '{}',
    });
    const spareUrl = ((await bySpare.json()) as { path_url: string }).path_url;
    assert.equal((await fetch(spareUrl)).status, 201);
    assert.equal((await t.app.inject({ method: 'DELETE', url: `/api/keys/${spareKey.key_id}`, headers: org.headers })).statusCode, 204);
    const revoked = await fetch(spareUrl);
    assert.equal(revoked.status, 401);
    assert.equal(((await revoked.json()) as { error: string }).error, 'invalid_preview_token');

    const tooLong = await fetch(`${base}${portPath(upstreamPort, '/url')}`, {
      method: 'POST',
      headers: { ...org.headers, 'content-type': 'application/json' },
      body: JSON.stringify({ expires_in_s: 10 * 24 * 3600 }),
    });
    assert.equal(tooLong.status, 400);
  });

  it('never passes the console session cookie on: it is sent to signed URLs of the console\'s host too', async () => {
    const made = await signed(upstreamPort);
    const res = await fetch(made.path_url, { headers: { cookie: 'app=1; roomkit_session=rks_secret; other=2' } });
    assert.equal(res.status, 201);
    assert.equal(seen?.headers.cookie, 'app=1; other=2');
    const alone = await fetch(made.path_url, { headers: { cookie: 'roomkit_session=rks_secret' } });
    assert.equal(alone.status, 201);
    assert.equal(seen?.headers.cookie, undefined);
    await fetch(made.path_url, { headers: { cookie: 'a=1;b=2' } });
    assert.equal(seen?.headers.cookie, 'a=1;b=2', 'a Cookie header without it goes on as it came');
  });

  it('host form: the token once in the query becomes a cookie of that host, then the program gets requests without it', async () => {
    const made = await signed(upstreamPort);
    const hostUrl = new URL(made.host_url!);
    assert.equal(hostUrl.hostname, `${upstreamPort}-${instanceId}.${DOMAIN}`);
    const host = hostUrl.host;
    const none = await rawGet('/', { host });
    assert.equal(none.status, 401);
    assert.equal(JSON.parse(none.body).error, 'invalid_preview_token');

    const first = await rawGet(`/page?a=1&roomkit_token=${hostUrl.searchParams.get('roomkit_token')}`, { host });
    assert.equal(first.status, 303);
    assert.equal(first.headers.location, '/page?a=1');
    const setCookie = String(first.headers['set-cookie']);
    assert.match(setCookie, /^roomkit_preview=v2\.[^;]+; Path=\/; Max-Age=\d+; HttpOnly; SameSite=Lax$/);
    const cookie = setCookie.split(';')[0]!;

    const next = await rawGet('/page?a=1', { host, cookie: `other=1; ${cookie}` });
    assert.equal(next.status, 201, next.body);
    assert.equal(seen?.url, '/page?a=1');
    assert.equal(seen?.headers.cookie, 'other=1', 'roomkit\'s cookie is not passed on');
    assert.equal(next.headers['content-security-policy'], undefined, 'a preview host is an origin of its own: not sandboxed');

    // A token of one port does not open another port's (or instance's) host.
    const wrongHost = await rawGet('/', { host: `${silentPort}-${instanceId}.${DOMAIN}`, cookie });
    assert.equal(wrongHost.status, 401);
    // The API is not reachable under a preview host.
    const api = await rawGet('/api/profiles', { host, cookie, ...org.headers });
    assert.equal(api.status, 201);
    assert.equal(seen?.url, '/api/profiles');

    const ws = await wsMessagesWithHost(made);
    assert.deepEqual(ws, ['hello /live', 'ping']);
  });
});

/** A WebSocket to a preview host, its token in the query (the `ws` client, which lets the Host header be set). */
async function wsMessagesWithHost(made: { instance_id: string }): Promise<string[]> {
  const grant = await signed(wsPort());
  const token = new URL(grant.host_url!).searchParams.get('roomkit_token');
  const host = `${wsPort()}-${made.instance_id}.${DOMAIN}`;
  const { WebSocket: WsClient } = await import('ws');
  const url = new URL(base);
  const client = new WsClient(`ws://${url.host}/live?roomkit_token=${token}`, { headers: { host } });
  const got: string[] = [];
  await new Promise<void>((resolve, reject) => {
    client.on('message', (data) => {
      got.push(String(data));
      if (got.length === 1) client.send('ping');
      if (got.length === 2) resolve();
    });
    client.on('error', reject);
  });
  client.close();
  return got;
}

async function keyOf(who: TestOrg): Promise<{ key_id: string }> {
  const res = await t.app.inject({ method: 'GET', url: '/api/keys', headers: who.headers });
  return (res.json() as { keys: { key_id: string }[] }).keys[0]!;
}

