// Instances among nodes that share a PostgreSQL store (each a service with a data
// directory, so a node id, of its own, over one database): an instance records the node
// whose host runs it; another node shows it but refuses to reach into it, naming the
// owner; a node's start reconciles only its own instances; a node declared lost has its
// instances recorded `lost` (their rooms free at once, requests answered instance_lost),
// and when it comes back it removes what its host still holds of them.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { get as httpGet } from 'node:http';
import { connect as connectTcp } from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { NodeRegistry } from '../../src/cluster/node-registry.ts';
import { PreviewTokens } from '../../src/core/preview-tokens.ts';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';
import { dropTestStore, TEST_STORE, testStoreConfig } from '../support/test-store.ts';
import { untilTrue } from '../support/until.ts';

/** One heartbeat of the node now, as its timer would run it. */
const beatNow = (registry: NodeRegistry | undefined) => (registry as unknown as { beat(): Promise<void> }).beat();

describe('instances on several nodes', { skip: TEST_STORE !== 'postgres' && 'PostgreSQL: several nodes share only that store' }, () => {
  const dirs = { a: '', b: '' };
  let databaseUrl: string;
  let a: TestApp;
  let b: TestApp;
  let org: TestOrg;
  const room = (name: string) => `/api/profile/${org.defaultProfileId}/room/${name}`;
  const command = (t: TestApp, name: string) => t.app.inject({ method: 'POST', url: `${room(name)}/command`, headers: org.headers, payload: { command: 'true' } });
  // Heartbeats are driven by the test (beatNow), never by the nodes' timers.
  const start = (dataDir: string) => startTestApp({ config: { dataDir, databaseUrl, nodeHeartbeatMs: 60_000, nodeLostAfterMs: 10_000 }, onShutdown: 'keep' });

  before(async () => {
    dirs.a = mkdtempSync(join(tmpdir(), 'roomkit-node-a-'));
    dirs.b = mkdtempSync(join(tmpdir(), 'roomkit-node-b-'));
    databaseUrl = (await testStoreConfig(dirs.a)).databaseUrl as string;
    a = await start(dirs.a);
    b = await start(dirs.b);
    await a.services.nodes!.join('http://node-a.test:8080');
    await b.services.nodes!.join('http://node-b.test:8080');
    org = await a.newOrg();
  });
  after(async () => {
    await a.close();
    await b.close();
    await dropTestStore(dirs.a);
    for (const dir of Object.values(dirs)) rmSync(dir, { recursive: true, force: true });
  });

  it('records the node an instance runs on; another node shows it and refuses to reach into it, naming the owner', async () => {
    assert.notEqual(a.services.nodeId, b.services.nodeId);
    const created = await a.app.inject({ method: 'POST', url: room('on-a'), headers: org.headers, payload: {} });
    assert.equal(created.statusCode, 201, created.body);
    const id = created.json().instance_id as string;
    const row = await a.services.db.selectFrom('instances').select('node_id').where('id', '=', id).executeTakeFirstOrThrow();
    assert.equal(row.node_id, a.services.nodeId);
    assert.equal((await command(a, 'on-a')).statusCode, 200, 'its own node runs commands in it');

    const shown = await b.app.inject({ method: 'GET', url: room('on-a'), headers: org.headers });
    assert.equal(shown.statusCode, 200, shown.body);
    assert.equal(shown.json().state, 'ready');
    const refused = await command(b, 'on-a');
    assert.equal(refused.statusCode, 421, refused.body);
    const body = refused.json();
    assert.equal(body.error, 'instance_on_another_node');
    assert.deepEqual({ node_id: body.details.node_id, node_url: body.details.node_url }, { node_id: a.services.nodeId, node_url: 'http://node-a.test:8080' });
    assert.match(body.message, /http:\/\/node-a\.test:8080/);
  });

  it("leaves another node's instances alone when a node starts again", async () => {
    await b.close();
    b = await start(dirs.b);
    await b.services.nodes!.join('http://node-b.test:8080');
    const shown = await b.app.inject({ method: 'GET', url: room('on-a'), headers: org.headers });
    assert.equal(shown.json().state, 'ready', "B's start found no machine of A's instance on its host and must not have failed it");
    assert.equal((await command(a, 'on-a')).statusCode, 200);
  });

  it('records a lost node\'s instances `lost`: its rooms take new instances, requests for them answer instance_lost', async () => {
    const before = await a.app.inject({ method: 'GET', url: room('on-a'), headers: org.headers });
    const lostId = before.json().instance_id as string;
    // A goes silent: its last heartbeat is older than the limit.
    await a.services.db.updateTable('nodes').set({ heartbeat_at: new Date(Date.now() - 60_000).toISOString() }).where('id', '=', a.services.nodeId).execute();
    await beatNow(b.services.nodes);
    const node = await b.services.db.selectFrom('nodes').select(['state', 'lost_by']).where('id', '=', a.services.nodeId).executeTakeFirstOrThrow();
    assert.deepEqual(node, { state: 'lost', lost_by: b.services.nodeId });

    const shown = await b.app.inject({ method: 'GET', url: room('on-a'), headers: org.headers });
    assert.equal(shown.json().state, 'lost', shown.body);
    const last = shown.json().state_history.at(-1);
    assert.equal(last.reason_code, 'node_lost');
    assert.match(last.reason, new RegExp(a.services.nodeId));
    for (const t of [a, b]) {
      const res = await command(t, 'on-a');
      assert.equal(res.statusCode, 410, res.body);
      assert.equal(res.json().error, 'instance_lost');
    }

    // The room is free at once: a new instance, on the node that made it.
    const again = await b.app.inject({ method: 'POST', url: room('on-a'), headers: org.headers, payload: {} });
    assert.equal(again.statusCode, 201, again.body);
    assert.notEqual(again.json().instance_id, lostId);
    const row = await b.services.db.selectFrom('instances').select('node_id').where('id', '=', again.json().instance_id).executeTakeFirstOrThrow();
    assert.equal(row.node_id, b.services.nodeId);
    assert.equal((await command(b, 'on-a')).statusCode, 200);
  });

  it('removes from a node that comes back what its lost instances still held, instead of adopting them', async () => {
    const lost = await a.services.db.selectFrom('instances').select('id').where('node_id', '=', a.services.nodeId).where('state', '=', 'lost').execute();
    assert.equal(lost.length, 1);
    assert.ok((await a.runtime.list()).includes(lost[0]!.id), 'positive control: its host still runs it');
    await beatNow(a.services.nodes);
    const node = await a.services.db.selectFrom('nodes').select('state').where('id', '=', a.services.nodeId).executeTakeFirstOrThrow();
    assert.equal(node.state, 'active', 'it joined again');
    await untilTrue('the lost instance removed from its host', async () => !(await a.runtime.list()).includes(lost[0]!.id));
    const row = await a.services.db.selectFrom('instances').select('state').where('id', '=', lost[0]!.id).executeTakeFirstOrThrow();
    assert.equal(row.state, 'lost', 'it stays lost');
  });
});

describe('requests forwarded to the node that runs the instance', { skip: TEST_STORE !== 'postgres' && 'PostgreSQL: several nodes share only that store' }, () => {
  const SECRET = 'node-secret-for-tests-0123456789abcdef';
  const dirs = { a: '', b: '' };
  let a: TestApp;
  let b: TestApp;
  const urls = { a: '', b: '' };
  let org: TestOrg;
  let profileName: string;
  const room = (name: string, profile = org.defaultProfileId) => `/api/profile/${profile}/room/${name}`;
  const post = (url: string, body: unknown, headers: Record<string, string> = {}) =>
    fetch(url, { method: 'POST', headers: { ...org.headers, 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });

  before(async () => {
    dirs.a = mkdtempSync(join(tmpdir(), 'roomkit-fwd-a-'));
    dirs.b = mkdtempSync(join(tmpdir(), 'roomkit-fwd-b-'));
    const databaseUrl = (await testStoreConfig(dirs.a)).databaseUrl as string;
    for (const name of ['a', 'b'] as const) {
      const t = await startTestApp({ config: { dataDir: dirs[name], databaseUrl, nodeHeartbeatMs: 60_000, nodeSecret: SECRET, previewDomain: 'preview.test' }, onShutdown: 'keep' });
      await t.app.listen({ host: '127.0.0.1', port: 0 });
      urls[name] = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
      await t.services.nodes!.join(urls[name]);
      if (name === 'a') {
        a = t;
        // Made while A is the only node, so A runs it whatever placement would draw.
        org = await a.newOrg();
        profileName = 'default';
        const created = await a.app.inject({ method: 'POST', url: room('fwd'), headers: org.headers, payload: {} });
        assert.equal(created.statusCode, 201, created.body);
      } else b = t;
    }
  });
  after(async () => {
    await a.close();
    await b.close();
    await dropTestStore(dirs.a);
    for (const dir of Object.values(dirs)) rmSync(dir, { recursive: true, force: true });
  });

  it('runs a command sent to another node on the node that runs the instance, by profile id or name', async () => {
    for (const profile of [org.defaultProfileId, profileName]) {
      const text = `echo through-b-${profile}`;
      const res = await post(`${urls.b}${room('fwd', profile)}/command`, { command: text });
      assert.equal(res.status, 200, await res.clone().text());
      assert.equal(res.headers.get('x-roomkit-node'), a.services.nodeId, 'answered by the owner');
      assert.equal(((await res.json()) as { result: { output: string } }).result.output, text);
      assert.ok(a.runtime.commands.some((c) => c.command === text), "it ran in the owner's runtime");
      assert.ok(!b.runtime.commands.some((c) => c.command === text));
    }
    // Positive control: a room no node runs an instance in is answered by B itself.
    const none = await post(`${urls.b}${room('fwd-none')}/command`, { command: 'true' });
    assert.equal(none.status, 404);
    assert.equal(none.headers.get('x-roomkit-node'), b.services.nodeId);
  });

  it('streams a command\'s events through the other node', async () => {
    const res = await post(`${urls.b}${room('fwd')}/command`, { command: 'echo streamed' }, { accept: 'text/event-stream' });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /text\/event-stream/);
    const events = await res.text();
    assert.match(events, /^event: started\n[\s\S]*\nevent: result\ndata: .*"output":"echo streamed"/, events);
  });

  it('forwards requests that name the instance by id: the raw endpoint, E2B\'s sandbox routes and its in-sandbox calls', async () => {
    const instanceId = ((await (await fetch(`${urls.a}${room('fwd')}`, { headers: org.headers })).json()) as { instance_id: string }).instance_id;
    const raw = await fetch(`${urls.b}/vm/${instanceId}/file/home/user/nothing-here.txt`);
    const direct = await fetch(`${urls.a}/vm/${instanceId}/file/home/user/nothing-here.txt`);
    assert.equal(raw.status, direct.status, await raw.clone().text());
    assert.notEqual(raw.status, 421);
    assert.match(raw.headers.get('ratelimit-policy') ?? '', /"instance";q=\d+/, 'the owner counts it against the raw endpoint\'s limits');
    assert.equal(raw.headers.get('x-roomkit-node'), a.services.nodeId);
    const key = org.headers.authorization!.replace(/^Bearer /, '');
    const sandbox = await fetch(`${urls.b}/e2b/sandboxes/${instanceId}`, { headers: { 'x-api-key': key } });
    assert.equal(sandbox.status, 200, await sandbox.clone().text());
    assert.equal(sandbox.headers.get('x-roomkit-node'), a.services.nodeId);
    assert.equal(((await sandbox.json()) as { sandboxID: string }).sandboxID, instanceId);
    // An in-sandbox call names its sandbox in a header: answered by the owner too (here,
    // refused for its missing access token, as the owner refuses it).
    const envd = await fetch(`${urls.b}/e2b/envd/health`, { headers: { 'e2b-sandbox-id': instanceId } });
    assert.equal(envd.headers.get('x-roomkit-node'), a.services.nodeId, `${envd.status} ${await envd.clone().text()}`);
  });

  it('carries a WebSocket handshake to the owner, which answers it', async () => {
    const direct = await handshakeTo(urls.a, `${room('fwd')}/terminal`, org.headers);
    const forwarded = await handshakeTo(urls.b, `${room('fwd')}/terminal`, org.headers);
    assert.equal(forwarded.status, direct.status, forwarded.raw);
    assert.match(forwarded.raw, new RegExp(`x-roomkit-node: ${a.services.nodeId}`, 'i'));
  });

  it('forwards a signed port URL and a preview host name to the node that runs the instance', async () => {
    // The test double's instances have no ports to sign: a token is sealed as a node seals
    // one, with the nodes' shared secret (any data directory).
    const instanceId = ((await (await fetch(`${urls.a}${room('fwd')}`, { headers: org.headers })).json()) as { instance_id: string }).instance_id;
    const caller = await a.services.organizations.authenticate(org.apiKey);
    const token = new PreviewTokens(dirs.b, SECRET).sign({ instanceId, port: 8000, caller, expiresAt: Date.now() + 60_000 });
    const viaB = await fetch(`${urls.b}/p/${token}/`);
    assert.equal(viaB.headers.get('x-roomkit-node'), a.services.nodeId, `${viaB.status} ${await viaB.clone().text()}`);
    // Positive control: a token no node made is answered where it arrived, refused.
    const forged = await fetch(`${urls.b}/p/v2.${Buffer.alloc(48, 7).toString('base64url')}/`);
    assert.equal(forged.headers.get('x-roomkit-node'), b.services.nodeId);
    assert.equal(((await forged.json()) as { error: string }).error, 'invalid_preview_token');
    // The host form names the instance; sent to B with that Host, A answers.
    const host = `8000-${instanceId}.preview.test`;
    const answeredBy = await new Promise<string | undefined>((resolve, reject) => {
      const { port } = new URL(urls.b);
      const req = httpGet({ host: '127.0.0.1', port: Number(port), path: '/', headers: { host } }, (res) => {
        res.resume();
        resolve(res.headers['x-roomkit-node'] as string | undefined);
      });
      req.once('error', reject);
    });
    assert.equal(answeredBy, a.services.nodeId);
  });

  it('places a create on the node with the most memory free, and among nodes alike in that, on one that ran the profile', async () => {
    const profileId = await a.createProfile(org, { name: `placed-${process.pid}` });
    // What the nodes said at their last heartbeat: A has far more memory free than B.
    const said = async (t: TestApp, inUseMb: number) =>
      t.services.db
        .updateTable('nodes')
        .set({ heartbeat_at: new Date().toISOString(), capacity: JSON.stringify({ memory_mb: 8192, vcpus: 2, disk_mb: 10_000 }), load: JSON.stringify({ instances: 0, memory_in_use_mb: inUseMb }) })
        .where('id', '=', t.services.nodeId)
        .execute();
    await said(a, 0);
    await said(b, 4096);
    const created = await post(`${urls.b}${room('placed-1', profileId)}`, {});
    assert.equal(created.status, 201, await created.clone().text());
    assert.equal(created.headers.get('x-roomkit-node'), a.services.nodeId, 'made by the emptier node');
    const id = ((await created.json()) as { instance_id: string }).instance_id;
    const row = await a.services.db.selectFrom('instances').select('node_id').where('id', '=', id).executeTakeFirstOrThrow();
    assert.equal(row.node_id, a.services.nodeId);
    assert.ok((await a.runtime.list()).includes(id), "in A's runtime");
    // The same room again, through B: the create finds A's instance (forwarded, not placed anew).
    const again = await post(`${urls.b}${room('placed-1', profileId)}`, {});
    assert.equal(((await again.json()) as { instance_id: string }).instance_id, id);

    // Alike in memory (one 256 MiB step), A ran the profile (its image is there): A.
    await said(a, 10);
    await said(b, 100);
    const second = await post(`${urls.b}${room('placed-2', profileId)}`, {});
    assert.equal(second.status, 201);
    assert.equal(second.headers.get('x-roomkit-node'), a.services.nodeId);
    // B has far more free: memory comes before where the profile ran. B, made where it arrived.
    await said(a, 4096);
    await said(b, 0);
    const third = await post(`${urls.a}${room('placed-3', profileId)}`, {});
    assert.equal(third.status, 201);
    assert.equal(third.headers.get('x-roomkit-node'), b.services.nodeId);
    assert.match(third.headers.get('server-timing') ?? '', /^placement;dur=\d+\.\d\d$/, 'the decision\'s time is told');
  });

  it('passes over a node that does not answer, for the next one (here, the node the create reached)', async () => {
    const profileId = await a.createProfile(org, { name: `placed-away-${process.pid}` });
    const closed = await import('node:net').then(({ createServer }) => new Promise<number>((resolve) => {
      const server = createServer();
      server.listen(0, '127.0.0.1', () => {
        const { port } = server.address() as AddressInfo;
        server.close(() => resolve(port));
      });
    }));
    await a.services.db.updateTable('nodes').set({ url: `http://127.0.0.1:${closed}`, heartbeat_at: new Date().toISOString(), load: JSON.stringify({ instances: 0, memory_in_use_mb: 0 }) }).where('id', '=', a.services.nodeId).execute();
    await b.services.db.updateTable('nodes').set({ heartbeat_at: new Date().toISOString(), load: JSON.stringify({ instances: 0, memory_in_use_mb: 4096 }) }).where('id', '=', b.services.nodeId).execute();
    try {
      const created = await post(`${urls.b}${room('placed-away', profileId)}`, {});
      assert.equal(created.status, 201, await created.clone().text());
      assert.equal(created.headers.get('x-roomkit-node'), b.services.nodeId);
    } finally {
      await a.services.db.updateTable('nodes').set({ url: urls.a }).where('id', '=', a.services.nodeId).execute();
    }
  });

  it('refuses a forwarded request without the nodes\' secret, and answers node_unreachable when the owner does not answer', async () => {
    const forged = await post(`${urls.a}${room('fwd')}/command`, { command: 'true' }, { 'x-roomkit-node-secret': 'not-the-secret' });
    assert.equal(forged.status, 401);
    assert.equal(((await forged.json()) as { error: string }).error, 'invalid_node_credential');
    // The owner stops answering (its listener closed, its row still active).
    await a.app.server.close();
    a.app.server.closeAllConnections();
    const started = Date.now();
    const res = await post(`${urls.b}${room('fwd')}/command`, { command: 'true' });
    assert.equal(res.status, 503, await res.clone().text());
    const body = (await res.json()) as { error: string; details: { node_id: string } };
    assert.equal(body.error, 'node_unreachable');
    assert.equal(body.details.node_id, a.services.nodeId);
    assert.ok(Date.now() - started < 5_000, 'answered without waiting long');
  });
});

/** The status line and headers a server answers a WebSocket handshake with, read from a raw socket. */
async function handshakeTo(base: string, path: string, headers: Record<string, string>): Promise<{ status: number; raw: string }> {
  const { hostname, port } = new URL(base);
  const socket = connectTcp(Number(port), hostname);
  await once(socket, 'connect');
  const lines = Object.entries({ ...headers, host: `${hostname}:${port}`, connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==' })
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
  socket.write(`GET ${path} HTTP/1.1\r\n${lines}\r\n`);
  let raw = '';
  socket.setEncoding('utf8').on('data', (d: string) => {
    raw += d;
    if (raw.includes('\r\n\r\n')) socket.destroy();
  });
  await once(socket, 'close');
  return { status: Number(/^HTTP\/1\.1 (\d+)/.exec(raw)?.[1] ?? 0), raw };
}
