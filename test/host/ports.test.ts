// Ports of real gVisor instances reached from outside: `python3 -m http.server` in an
// instance fetched through the API key's path form, a signed URL's path form and its
// host form (the Host header sent by hand to the service); a WebSocket echo server
// (Python's standard library, in the instance) through the proxy; refusals: an expired
// signature, another organization's key, the agent's port, nothing listening, a server
// bound to the instance's loopback only. The firewall still keeps another instance from
// the same server the proxy reaches (positive control: the proxy's own fetch).
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { Roomkit } from '../../sdk/src/index.ts';
import WebSocketClient from 'ws';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';
import { run as runCli } from '../support/cli.ts';
import { rawGet as rawGetAt } from '../support/raw-get.ts';

const DOMAIN = 'preview.test';
const ROOM = 'web';
const HTTP_PORT = 8000;
const WS_PORT = 8765;
const LOOPBACK_PORT = 8001;
const AGENT_PORT = 905;

let t: TestApp;
let org: TestOrg;
let base: string;
let profileId: string;
let instanceId: string;

const portPath = (port: number, rest = '/', room = ROOM, profile = profileId) => `/api/profile/${profile}/room/${room}/ports/${port}${rest}`;

/** A WebSocket echo server in Python's standard library: greets with the path, then echoes each message; 426 to plain HTTP. */
const ECHO_SERVER = String.raw`
import base64, hashlib, socket, struct, sys, threading
GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11'
def serve(c):
    data = b''
    while b'\r\n\r\n' not in data:
        chunk = c.recv(4096)
        if not chunk:
            return
        data += chunk
    head, rest = data.split(b'\r\n\r\n', 1)
    lines = head.decode().split('\r\n')
    keys = [l.split(':', 1)[1].strip() for l in lines if l.lower().startswith('sec-websocket-key:')]
    if not keys:
        c.sendall(b'HTTP/1.1 426 Upgrade Required\r\nContent-Length: 0\r\nConnection: close\r\n\r\n')
        c.close()
        return
    key = keys[0]
    accept = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
    c.sendall(('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n' % accept).encode())
    buf = [rest]
    def read(n):
        while len(buf[0]) < n:
            chunk = c.recv(65536)
            if not chunk:
                raise EOFError
            buf[0] += chunk
        out, buf[0] = buf[0][:n], buf[0][n:]
        return out
    def send(op, payload):
        n = len(payload)
        size = bytes([n]) if n < 126 else bytes([126]) + struct.pack('>H', n) if n < 65536 else bytes([127]) + struct.pack('>Q', n)
        c.sendall(bytes([0x80 | op]) + size + payload)
    send(1, ('hello ' + lines[0].split(' ')[1]).encode())
    try:
        while True:
            b1, b2 = read(2)
            op, n = b1 & 0x0f, b2 & 0x7f
            if n == 126:
                n = struct.unpack('>H', read(2))[0]
            elif n == 127:
                n = struct.unpack('>Q', read(8))[0]
            mask = read(4) if b2 & 0x80 else b'\0\0\0\0'
            payload = bytes(b ^ mask[i % 4] for i, b in enumerate(read(n)))
            if op == 8:
                send(8, payload[:2])
                break
            send(10 if op == 9 else op, payload)
    except EOFError:
        pass
    c.close()
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('0.0.0.0', int(sys.argv[1])))
s.listen(16)
while True:
    conn, _ = s.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
`;
import { untilTrue } from '../support/until.ts';

async function api(method: string, url: string, payload?: unknown, headers = org.headers) {
  const res = await t.app.inject({ method: method as 'GET', url, headers, ...(payload === undefined ? {} : { payload: payload as Record<string, unknown> }) });
  return { status: res.statusCode, body: res.body, json: () => res.json() as Record<string, unknown> };
}

async function run(command: string, room = ROOM, background = false) {
  const res = await api('POST', `/api/profile/${profileId}/room/${room}/command`, { command, ...(background ? { background: true } : {}) });
  assert.ok(res.status === 200 || res.status === 202, res.body);
  return res.json();
}

/** Waits until the port answers through the proxy with something other than port_not_listening. */
async function waitListening(port: number, timeoutMs = 20_000): Promise<void> {
  await untilTrue(
    `something to listen on port ${port} of the instance`,
    async () => {
      const res = await fetch(`${base}${portPath(port)}`, { headers: org.headers });
      await res.arrayBuffer();
      return res.status !== 502;
    },
    { timeoutMs, everyMs: 250 },
  );
}

function rawGet(path: string, headers: Record<string, string>) {
  return rawGetAt(base, path, headers);
}

/** A signed URL, asked over HTTP so that its path form names the address the service was reached at. */
async function signUrl(port: number, expiresInS?: number) {
  const res = await fetch(`${base}${portPath(port, '/url')}`, {
    method: 'POST',
    headers: { ...org.headers, 'content-type': 'application/json' },
    body: JSON.stringify(expiresInS === undefined ? {} : { expires_in_s: expiresInS }),
  });
  assert.equal(res.status, 201, await res.clone().text());
  return (await res.json()) as { url: string; path_url: string; host_url: string; expires_at: string };
}

/** Opens a WebSocket (the `ws` client, which may set any header) and trades messages: the greeting, then an echo of each. */
async function echo(url: string, headers: Record<string, string>, messages: string[]): Promise<string[]> {
  const ws = new WebSocketClient(url, { headers });
  const got: string[] = [];
  try {
    await new Promise<void>((resolve, reject) => {
      ws.on('message', (data) => {
        got.push(String(data));
        const next = messages[got.length - 1];
        if (next !== undefined) ws.send(next);
        else resolve();
      });
      ws.on('unexpected-response', (_req, res) => reject(new Error(`the handshake was answered ${res.statusCode}`)));
      ws.on('error', reject);
    });
  } finally {
    ws.close();
  }
  return got;
}

before(async () => {
  t = await startTestApp({ gvisorPool: '10.250.0.0/24', config: { previewDomain: DOMAIN } });
  assert.ok('runtime' in t.services.runtime, 'the gVisor runtime is not available');
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  org = await t.newOrg();
  profileId = await t.createProfile(org, { name: 'web', memory_mb: 512, disk_mb: 1024, network: { egress: 'none' } });
  const created = await api('POST', `/api/profile/${profileId}/room/${ROOM}`, {});
  assert.equal(created.status, 201, created.body);
  instanceId = created.json().instance_id as string;
  const wrote = await api('PUT', `/api/profile/${profileId}/room/${ROOM}/file/site/index.html`, { content: '<h1>served from the instance</h1>\n' });
  assert.equal(wrote.status, 201, wrote.body);
  const echoFile = await api('PUT', `/api/profile/${profileId}/room/${ROOM}/file/echo.py`, { content: ECHO_SERVER });
  assert.equal(echoFile.status, 201, echoFile.body);
  await run(`cd site && python3 -m http.server ${HTTP_PORT}`, ROOM, true);
  await run(`python3 echo.py ${WS_PORT}`, ROOM, true);
  await run(`python3 -m http.server ${LOOPBACK_PORT} --bind 127.0.0.1`, ROOM, true);
  await waitListening(HTTP_PORT);
  await waitListening(WS_PORT);
});

after(async () => {
  await t.closeLeavingNothing();
});

describe('a web server in an instance', () => {
  it('is fetched through the path form with the API key', async (ctx) => {
    const res = await fetch(`${base}${portPath(HTTP_PORT, '/index.html?x=1')}`, { headers: org.headers });
    assert.equal(res.status, 200);
    assert.equal(await res.text(), '<h1>served from the instance</h1>\n');
    assert.match(res.headers.get('server') ?? '', /SimpleHTTP/);
    // The port's root (index.html), with and without the trailing slash.
    for (const rest of ['', '/']) {
      const root = await fetch(`${base}${portPath(HTTP_PORT, rest)}`, { headers: org.headers });
      assert.equal(root.status, 200);
      assert.equal(await root.text(), '<h1>served from the instance</h1>\n');
    }
    // A request's round trip through the proxy, beside the same request from the host straight to the instance's address.
    const address = t.services.instances.activeRuntime().portEndpoint?.(instanceId)?.host;
    const p50 = async (url: string, headers: Record<string, string>) => {
      const times: number[] = [];
      for (let i = 0; i < 21; i++) {
        const started = performance.now();
        await (await fetch(url, { headers })).text();
        times.push(performance.now() - started);
      }
      return times.sort((a, b) => a - b)[10]!.toFixed(1);
    };
    const proxied = await p50(`${base}${portPath(HTTP_PORT, '/index.html')}`, org.headers);
    const direct = await p50(`http://${address}:${HTTP_PORT}/index.html`, {});
    ctx.diagnostic(`GET index.html, p50 of 21: ${proxied} ms through the proxy, ${direct} ms from the host straight to the instance`);
  });

  it('is fetched through a signed URL, path form and host form, without a key', async () => {
    const signed = await signUrl(HTTP_PORT);
    const viaPath = await fetch(`${signed.path_url}index.html`);
    assert.equal(viaPath.status, 200);
    assert.equal(await viaPath.text(), '<h1>served from the instance</h1>\n');

    const hostUrl = new URL(signed.host_url);
    assert.equal(hostUrl.hostname, `${HTTP_PORT}-${instanceId}.${DOMAIN}`);
    const host = hostUrl.host;
    const first = await rawGet(`/index.html${hostUrl.search}`, { host });
    assert.equal(first.status, 303, first.body);
    assert.equal(first.headers.location, '/index.html');
    const cookie = String(first.headers['set-cookie']).split(';')[0]!;
    const viaHost = await rawGet('/index.html', { host, cookie });
    assert.equal(viaHost.status, 200, viaHost.body);
    assert.equal(viaHost.body, '<h1>served from the instance</h1>\n');
    // Without the cookie, the host refuses.
    const bare = await rawGet('/index.html', { host });
    assert.equal(bare.status, 401);
    assert.equal(JSON.parse(bare.body).error, 'invalid_preview_token');
  });

  it('carries a WebSocket echo, with the key and through a preview host', async () => {
    const withKey = await echo(`${base.replace(/^http/, 'ws')}${portPath(WS_PORT, '/chat?room=1')}`, org.headers, ['one', 'two']);
    assert.deepEqual(withKey, ['hello /chat?room=1', 'one', 'two']);
    const signed = new URL((await signUrl(WS_PORT)).host_url);
    const viaHost = await echo(`${base.replace(/^http/, 'ws')}/live${signed.search}`, { host: signed.host }, ['three']);
    assert.deepEqual(viaHost, ['hello /live', 'three']);
  });
});

describe('the clients', () => {
  it('the SDK: room.ports.fetch with the key, room.ports.url and getHost', async () => {
    const room = new Roomkit({ baseUrl: base, apiKey: org.apiKey }).room('web', ROOM);
    const res = await room.ports.fetch(HTTP_PORT, '/index.html');
    assert.equal(res.status, 200);
    assert.equal(await res.text(), '<h1>served from the instance</h1>\n');
    const missing = await room.ports.fetch(HTTP_PORT, '/nothing-here');
    assert.equal(missing.status, 404, 'the program\'s own answer comes back as it is');
    const signed = await room.ports.url(HTTP_PORT, { expiresInS: 120 });
    assert.ok(Date.parse(signed.expires_at) - Date.now() <= 120_000);
    assert.equal((await fetch(signed.path_url)).status, 200);
    assert.equal(await room.ports.getHost(HTTP_PORT), `${HTTP_PORT}-${instanceId}.${DOMAIN}`);
  });

  it('the CLI: roomkit url ROOM PORT prints the signed URL', async () => {
    const env = { ROOMKIT_URL: base, ROOMKIT_API_KEY: org.apiKey };
    const out = await runCli(['url', '--profile', 'web', ROOM, String(HTTP_PORT)], { env });
    assert.equal(out.code, 0, out.stderr);
    assert.match(out.stdout.trim(), new RegExp(`^http://${HTTP_PORT}-${instanceId}\\.${DOMAIN.replace('.', '\\.')}/\\?roomkit_token=v2\\.`));
    const bad = await runCli(['url', '--profile', 'web', ROOM, String(AGENT_PORT)], { env });
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /invalid_port/);
  });
});

describe('refusals', () => {
  it('an expired signature', async () => {
    const signed = await signUrl(HTTP_PORT, 1);
    // Positive control: it works before it expires.
    assert.equal((await fetch(signed.path_url)).status, 200);
    await new Promise((r) => setTimeout(r, Math.max(0, Date.parse(signed.expires_at) - Date.now()) + 1100));
    const expired = await fetch(signed.path_url);
    assert.equal(expired.status, 401);
    assert.equal(((await expired.json()) as { error: string }).error, 'preview_url_expired');
    const host = new URL(signed.host_url);
    const viaHost = await rawGet(`/${host.search}`, { host: host.host });
    assert.equal(viaHost.status, 401);
    assert.equal(JSON.parse(viaHost.body).error, 'preview_url_expired');
  });

  it('another organization\'s key: 404 as for a room that does not exist, with its own profile too', async () => {
    const other = await t.newOrg();
    const foreign = await fetch(`${base}${portPath(HTTP_PORT)}`, { headers: other.headers });
    assert.equal(foreign.status, 404);
    assert.equal(((await foreign.json()) as { error: string }).error, 'profile_not_found');
    const ownProfile = await fetch(`${base}${portPath(HTTP_PORT, '/', ROOM, other.defaultProfileId)}`, { headers: other.headers });
    assert.equal(ownProfile.status, 404);
    assert.equal(((await ownProfile.json()) as { error: string }).error, 'instance_not_found');
    const sign = await fetch(`${base}${portPath(HTTP_PORT, '/url')}`, { method: 'POST', headers: { ...other.headers, 'content-type': 'application/json' }, body: '{}' });
    assert.equal(sign.status, 404);
  });

  it('the agent\'s port, and a port nothing listens on or only the loopback does', async () => {
    const agent = await fetch(`${base}${portPath(AGENT_PORT)}`, { headers: org.headers });
    assert.equal(agent.status, 400);
    assert.equal(((await agent.json()) as { error: string }).error, 'invalid_port');
    const signAgent = await api('POST', portPath(AGENT_PORT, '/url'), {});
    assert.equal(signAgent.status, 400);
    for (const port of [9999, LOOPBACK_PORT]) {
      const res = await fetch(`${base}${portPath(port)}`, { headers: org.headers });
      assert.equal(res.status, 502, String(port));
      const body = (await res.json()) as { error: string; message: string };
      assert.equal(body.error, 'port_not_listening');
      assert.match(body.message, /0\.0\.0\.0/);
    }
    // Positive control: the loopback server runs, inside.
    const inside = await run(`python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:${LOOPBACK_PORT}/').status)"`);
    assert.match(String((inside.result as { output: string }).output), /^200/);
  });

  it('the firewall still keeps another instance from the server the proxy reaches', async () => {
    const address = t.services.instances.activeRuntime().portEndpoint?.(instanceId)?.host;
    assert.ok(address, 'the instance has an address');
    const made = await api('POST', `/api/profile/${profileId}/room/neighbour`, {});
    assert.equal(made.status, 201, made.body);
    const probe = await run(
      `python3 -c "import urllib.request
try:
    print('reached', urllib.request.urlopen('http://${address}:${HTTP_PORT}/', timeout=3).status)
except Exception as e:
    print('blocked', type(e).__name__)"`,
      'neighbour',
    );
    assert.match(String((probe.result as { output: string }).output), /^blocked/);
    // Positive control: the same server answers the proxy.
    assert.equal((await fetch(`${base}${portPath(HTTP_PORT)}`, { headers: org.headers })).status, 200);
    assert.equal((await api('DELETE', `/api/profile/${profileId}/room/neighbour`)).status, 200);
  });
});
