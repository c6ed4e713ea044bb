// The E2B adapter over the runtime test double, with E2B's own SDK (the `e2b` package)
// as the client where it can be, and raw requests where the point is what goes over
// the wire: E2B's error conventions, which credential each side takes, the templates
// the SDK names by default, the header that names a process's command on roomkit's
// API, the audit trail, and that E2B's routes stay out of roomkit's OpenAPI document.
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { AuthenticationError, NotFoundError, Sandbox } from 'e2b';
import { EventType, Filesystem } from '../../src/adapters/e2b/generated/filesystem/filesystem_pb.js';
import { Process } from '../../src/adapters/e2b/generated/process/process_pb.js';
import { COMMAND_ID_HEADER } from '../../src/adapters/e2b/process-service.ts';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';
import { untilTrue } from '../support/until.ts';

const PREVIEW_DOMAIN = 'sandboxes.example.test';

let t: TestApp;
let org: TestOrg;
let base: string;
let opts: { apiKey: string; apiUrl: string; sandboxUrl: string };

before(async () => {
  t = await startTestApp({ config: { previewDomain: PREVIEW_DOMAIN } });
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  org = await t.newOrg();
  opts = { apiKey: org.apiKey, apiUrl: `${base}/e2b`, sandboxUrl: `${base}/e2b/envd` };
});

after(async () => {
  await t.close();
});

/** A raw in-sandbox request, as the SDK would send it for this sandbox and token. */
function envd(path: string, sandboxId: string, token: string | undefined, init: RequestInit = {}): Promise<Response> {
  const headers = new Headers(init.headers);
  headers.set('E2b-Sandbox-Id', sandboxId);
  headers.set('E2b-Sandbox-Port', '49983');
  if (token !== undefined) headers.set('X-Access-Token', token);
  return fetch(`${base}/e2b/envd${path}`, { ...init, headers });
}

describe('the control API', () => {
  it("answers E2B's error body: 401 without a key or with a wrong one, 404 for an unknown sandbox, 501 for what is not served", async () => {
    const none = await fetch(`${base}/e2b/v2/sandboxes`);
    assert.equal(none.status, 401);
    const body = (await none.json()) as { code: number; message: string };
    assert.equal(body.code, 401);
    assert.match(body.message, /X-API-KEY/);
    await assert.rejects(Sandbox.list({ ...opts, apiKey: 'rk_test_wrong' }).nextItems(), AuthenticationError);
    await assert.rejects(Sandbox.getInfo('1b7e3c0a-0000-4000-8000-000000000000', opts), NotFoundError);
    const unknown = await fetch(`${base}/e2b/v2/nothing`, { headers: { 'X-API-KEY': org.apiKey } });
    assert.equal(unknown.status, 501, 'what E2B has and roomkit does not serve is no missing sandbox');
    assert.equal(((await unknown.json()) as { code: number }).code, 501);
  });

  it("serves a sandbox's metrics from what roomkit measures: its machine's memory in use beside its resources", async () => {
    const sandbox = await Sandbox.create(opts);
    t.runtime.memoryInUse.set(sandbox.sandboxId, 96);
    const [metric, ...more] = await sandbox.getMetrics();
    assert.equal(more.length, 0, 'one point: now');
    assert.ok(metric);
    const info = await sandbox.getInfo();
    assert.equal(metric.memUsed, 96 * 1024 * 1024);
    assert.equal(metric.memTotal, info.memoryMB * 1024 * 1024);
    assert.equal(metric.cpuCount, info.cpuCount);
    assert.ok(metric.diskTotal > 0 && metric.diskUsed === 0, `disk: ${metric.diskUsed} of ${metric.diskTotal}`);
    assert.ok(Math.abs(metric.timestamp.getTime() - Date.now()) < 5000, metric.timestamp.toISOString());
    assert.deepEqual(await sandbox.getMetrics({ start: new Date(Date.now() - 3_600_000), end: new Date(Date.now() - 1_800_000) }), [], 'a window in the past holds no point');
    await sandbox.kill();
    await assert.rejects(Sandbox.getMetrics(sandbox.sandboxId, opts), NotFoundError);
  });

  it('refuses what onTimeout asks and roomkit cannot do: a pause without memory, a resume by traffic', async () => {
    await assert.rejects(Sandbox.create({ ...opts, lifecycle: { onTimeout: { action: 'pause', keepMemory: false } } }), /400.*keepMemory/);
    await assert.rejects(Sandbox.create({ ...opts, lifecycle: { onTimeout: 'pause', autoResume: true } }), /400.*autoResume/);
    const listed = await Sandbox.list(opts).nextItems();
    assert.equal(listed.length, 0, 'no sandbox was made for them');
  });

  it("tells what a sandbox's timeout does (getInfo's lifecycle), and names roomkit's preview domain, so getHost gives a port's preview host name", async () => {
    const killed = await Sandbox.create(opts);
    const paused = await Sandbox.create({ ...opts, lifecycle: { onTimeout: 'pause' } });
    assert.deepEqual((await killed.getInfo()).lifecycle, { onTimeout: 'kill', autoResume: false });
    assert.deepEqual((await Sandbox.getInfo(paused.sandboxId, opts)).lifecycle, { onTimeout: 'pause', autoResume: false });
    assert.equal(killed.getHost(3000), `3000-${killed.sandboxId}.${PREVIEW_DOMAIN}`);
    assert.equal((await killed.getInfo()).sandboxDomain, PREVIEW_DOMAIN);
    const connected = await Sandbox.connect(paused.sandboxId, opts);
    assert.equal(connected.getHost(8080), `8080-${paused.sandboxId}.${PREVIEW_DOMAIN}`);
    await killed.kill();
    await paused.kill();
  });

  it('lists oldest first with order asc, across pages, and newest first by default', async () => {
    const made: string[] = [];
    for (let i = 0; i < 3; i++) made.push((await Sandbox.create({ ...opts, metadata: { run: 'order' } })).sandboxId);
    const all = async (order?: 'asc' | 'desc') => {
      const paginator = Sandbox.list({ ...opts, query: { metadata: { run: 'order' } }, limit: 2, ...(order ? { order } : {}) });
      const ids: string[] = [];
      while (paginator.hasNext) ids.push(...(await paginator.nextItems()).map((s) => s.sandboxId));
      return ids;
    };
    assert.deepEqual(await all('asc'), made);
    assert.deepEqual(await all(), [...made].reverse());
    assert.deepEqual(await all('desc'), [...made].reverse());
    for (const id of made) await Sandbox.kill(id, opts);
  });

  it("resolves the SDKs' default templates to the organization's default and code-interpreter profiles", async () => {
    for (const [template, profile] of [['base', 'default'], ['code-interpreter-v1', 'code-interpreter'], ['code-interpreter', 'code-interpreter']] as const) {
      const sandbox = await Sandbox.create(template, opts);
      const info = await sandbox.getInfo();
      assert.equal(info.name, profile, template);
      if (profile === 'default') assert.equal(info.templateId, org.defaultProfileId);
      await sandbox.kill();
    }
  });

  it('maps allowInternetAccess, network.allowOut and denyOut, and updateNetwork onto the sandbox\'s egress policy', async () => {
    const networkOf = async (sandboxId: string) => {
      const row = await t.services.db.selectFrom('instances').select('spec').where('id', '=', sandboxId).executeTakeFirstOrThrow();
      return JSON.parse(row.spec ?? '{}').network;
    };
    const offline = await Sandbox.create({ ...opts, allowInternetAccess: false });
    assert.deepEqual(await networkOf(offline.sandboxId), { egress: 'none', allow: [], deny: [] });
    await offline.kill();
    const listed = await Sandbox.create({ ...opts, network: { allowOut: ['pypi.org', '203.0.113.0/24'], denyOut: ['0.0.0.0/0', '203.0.113.128/25'] } });
    assert.deepEqual(await networkOf(listed.sandboxId), { egress: 'allowlist', allow: ['pypi.org', '203.0.113.0/24'], deny: ['203.0.113.128/25'] });
    await Sandbox.updateNetwork(listed.sandboxId, { allowOut: ['github.com'], denyOut: ['0.0.0.0/0'] }, opts);
    assert.deepEqual(await networkOf(listed.sandboxId), { egress: 'allowlist', allow: ['github.com'], deny: [] });
    assert.deepEqual(t.runtime.networks.get(listed.sandboxId), { egress: 'allowlist', allow: ['github.com'], deny: [] });
    await Sandbox.updateNetwork(listed.sandboxId, {}, opts);
    assert.deepEqual(await networkOf(listed.sandboxId), { egress: 'internet', allow: [], deny: [] });
    await assert.rejects(Sandbox.updateNetwork(listed.sandboxId, { denyOut: ['198.51.100.0/24'] }, opts), /400.*without allowOut/);
    await assert.rejects(Sandbox.create({ ...opts, network: { allowOut: ['10.0.0.0/8'] } }), /400.*private/);
    await listed.kill();
  });

  it('hides another organization\'s sandboxes as missing ones', async () => {
    const sandbox = await Sandbox.create(opts);
    const other = await t.newOrg();
    await assert.rejects(Sandbox.getInfo(sandbox.sandboxId, { ...opts, apiKey: other.apiKey }), NotFoundError);
    assert.equal(await Sandbox.kill(sandbox.sandboxId, { ...opts, apiKey: other.apiKey }), false);
    assert.equal((await Sandbox.list({ ...opts, apiKey: other.apiKey }).nextItems()).length, 0);
    await sandbox.kill();
  });

  it('records its calls in the audit trail with their real actions', async () => {
    const sandbox = await Sandbox.create(opts);
    await sandbox.files.write('/home/user/audited.txt', 'x');
    await sandbox.files.list('/home/user');
    await sandbox.files.makeDir('/home/user/made/here');
    await sandbox.files.rename('/home/user/audited.txt', '/home/user/made/here/moved.txt');
    await sandbox.files.remove('/home/user/made');
    await sandbox.commands.run('echo audited');
    await sandbox.kill();
    await t.services.audit.flush();
    const page = await t.services.audit.list(org.organizationId, { instanceId: sandbox.sandboxId }, { limit: 20 });
    const actions = page.events.map((e) => `${e.action} ${e.route}`).sort();
    assert.deepEqual(actions, [
      'command.run /e2b/envd/process.Process/Start',
      'file.delete /e2b/envd/filesystem.Filesystem/Remove',
      'file.write /e2b/envd/files',
      'file.write /e2b/envd/filesystem.Filesystem/MakeDir',
      'file.write /e2b/envd/filesystem.Filesystem/Move',
      'instance.create /e2b/v2/sandboxes',
      'instance.delete /e2b/sandboxes/:sandboxID',
    ], 'a listing, which changes nothing, is no record');
    assert.ok(page.events.every((e) => e.decision === 'allowed'));
    assert.deepEqual([...new Set(page.events.map((e) => e.via))], ['e2b'], 'each record says it came through E2B');
    assert.deepEqual(
      page.events.filter((e) => e.action === 'file.write' || e.action === 'file.delete').map((e) => e.file_path).sort(),
      ['/home/user/audited.txt', '/home/user/made', '/home/user/made/here', '/home/user/made/here/moved.txt'],
      'a file record names its path: a directory made, a rename\'s target, what was removed',
    );
    const run = page.events.find((e) => e.action === 'command.run');
    assert.match(run?.command ?? '', /echo audited/);
    assert.ok(run?.command_id, 'the record names the command');
  });

  it("stays out of roomkit's OpenAPI document", async () => {
    const doc = (await (await fetch(`${base}/openapi.json`)).json()) as { paths: Record<string, unknown> };
    assert.deepEqual(Object.keys(doc.paths).filter((p) => p.startsWith('/e2b')), []);
  });
});

describe('the in-sandbox protocol', () => {
  it("takes only the sandbox's own access token, while its key is active, and answers 502 once the sandbox is gone", async () => {
    const a = await Sandbox.create(opts);
    const b = await Sandbox.create(opts);
    const tokenA = (a as unknown as { envdAccessToken: string }).envdAccessToken;
    assert.equal((await envd('/health', a.sandboxId, tokenA)).status, 204);
    assert.equal((await envd('/health', a.sandboxId, undefined)).status, 401);
    assert.equal((await envd('/health', b.sandboxId, tokenA)).status, 401, "a token is good for its sandbox only");
    assert.equal((await envd('/health', a.sandboxId, `${tokenA.slice(0, -2)}xx`)).status, 401);
    // A key revoked takes its sandboxes' tokens with it.
    const other = await t.newOrg();
    const otherOpts = { ...opts, apiKey: other.apiKey };
    const c = await Sandbox.create(otherOpts);
    const tokenC = (c as unknown as { envdAccessToken: string }).envdAccessToken;
    assert.equal((await envd('/health', c.sandboxId, tokenC)).status, 204);
    const keyId = (await t.services.organizations.authenticate(other.apiKey)).keyId;
    await t.services.organizations.revokeKey(other.organizationId, keyId);
    assert.equal((await envd('/health', c.sandboxId, tokenC)).status, 401);
    await a.kill();
    const gone = await envd('/health', a.sandboxId, tokenA);
    assert.equal(gone.status, 502);
    assert.equal(((await gone.json()) as { code: number }).code, 502);
    assert.equal(await a.isRunning(), false);
    await b.kill();
  });

  it("serves a sandbox's own host name, 49983-{id}.{preview domain}, as E2B's SDK addresses it without E2B_SANDBOX_URL", async () => {
    const sandbox = await Sandbox.create(opts);
    const token = (sandbox as unknown as { envdAccessToken: string }).envdAccessToken;
    const host = `49983-${sandbox.sandboxId}.${PREVIEW_DOMAIN}`;
    const health = await t.app.inject({ method: 'GET', url: '/health', headers: { host, 'x-access-token': token } });
    assert.equal(health.statusCode, 204, health.body);
    const other = await Sandbox.create(opts);
    const crossed = await t.app.inject({ method: 'GET', url: '/health', headers: { host: `49983-${other.sandboxId}.${PREVIEW_DOMAIN}`, 'x-access-token': token } });
    assert.equal(crossed.statusCode, 401, "another sandbox's host name does not take this one's token");
    await sandbox.files.write('/home/user/by-host.txt', 'by host');
    const read = await t.app.inject({ method: 'GET', url: '/files?path=/home/user/by-host.txt', headers: { host, 'x-access-token': token } });
    assert.equal(read.body, 'by host');
    await sandbox.kill();
    await other.kill();
  });

  it("serves the SDK's signed file URLs at a sandbox's host name, and refuses them altered or expired", async () => {
    const sandbox = await Sandbox.create(opts);
    const host = `49983-${sandbox.sandboxId}.${PREVIEW_DOMAIN}`;
    const at = (url: string) => {
      const parsed = new URL(url);
      return `${parsed.pathname}${parsed.search}`;
    };
    const upload = at(await sandbox.uploadUrl('/home/user/signed.txt'));
    const form = new FormData();
    form.append('file', new Blob(['signed upload']), '/home/user/signed.txt');
    const body = new Response(form);
    const uploaded = await t.app.inject({
      method: 'POST',
      url: upload,
      headers: { host, 'content-type': body.headers.get('content-type')! },
      payload: Buffer.from(await body.arrayBuffer()),
    });
    assert.equal(uploaded.statusCode, 200, uploaded.body);
    const download = at(await sandbox.downloadUrl('/home/user/signed.txt', { useSignatureExpiration: 60 }));
    const read = await t.app.inject({ method: 'GET', url: download, headers: { host } });
    assert.equal(read.body, 'signed upload');
    const otherPath = download.replace(encodeURIComponent('/home/user/signed.txt'), encodeURIComponent('/home/user/other.txt'));
    assert.notEqual(otherPath, download);
    assert.equal((await t.app.inject({ method: 'GET', url: otherPath, headers: { host } })).statusCode, 401, 'the signature covers the path');
    assert.equal((await t.app.inject({ method: 'POST', url: download, headers: { host, 'content-type': 'application/octet-stream' }, payload: 'x' })).statusCode, 401, 'a read signature is no write one');
    const expired = at(await sandbox.downloadUrl('/home/user/signed.txt', { useSignatureExpiration: -10 }));
    assert.equal((await t.app.inject({ method: 'GET', url: expired, headers: { host } })).statusCode, 401, 'an expired URL');
    await sandbox.kill();
  });

  it("names a started process's command on roomkit's API in a response header", async () => {
    const sandbox = await Sandbox.create(opts);
    const token = (sandbox as unknown as { envdAccessToken: string }).envdAccessToken;
    const client = createClient(Process, createConnectTransport({ baseUrl: `${base}/e2b/envd`, httpVersion: '1.1' }));
    let commandId: string | null = null;
    const events = client.start(
      { process: { cmd: '/bin/bash', args: ['-l', '-c', 'true'], envs: {} } },
      { headers: { 'E2b-Sandbox-Id': sandbox.sandboxId, 'X-Access-Token': token }, onHeader: (headers) => (commandId = headers.get(COMMAND_ID_HEADER)) },
    );
    const kinds: string[] = [];
    for await (const response of events) kinds.push(response.event?.event.case ?? '');
    assert.deepEqual(kinds, ['start', 'end']);
    assert.ok(commandId, 'the header is there');
    const room = (await t.services.instances.getAt({ organizationId: org.organizationId, instanceId: sandbox.sandboxId })).room_id;
    const res = await t.app.inject({ method: 'GET', url: `/api/profile/${org.defaultProfileId}/room/${room}/commands/${commandId}`, headers: org.headers });
    assert.equal(res.statusCode, 200, res.body);
    assert.equal((res.json() as { command: string }).command, '/bin/bash -l -c true');
    await sandbox.kill();
  });

  it('watches a directory: files written, changed and removed under it come as events', async () => {
    const sandbox = await Sandbox.create(opts);
    await sandbox.files.write('/home/user/watched/old.txt', 'old');
    const events: string[] = [];
    const handle = await sandbox.files.watchDir('/home/user/watched', (event) => void events.push(`${event.type} ${event.name}`), { recursive: true });
    await sandbox.files.write('/home/user/watched/new.txt', 'new');
    await sandbox.files.write('/home/user/watched/old.txt', 'changed, longer');
    await untilTrue('the create and the write', () => events.includes('create new.txt') && events.includes('write old.txt'));
    await sandbox.files.remove('/home/user/watched/new.txt');
    await untilTrue('the removal', () => events.includes('remove new.txt'));
    await handle.stop();
    await sandbox.kill();
  });

  it('answers "unimplemented", naming the docs, for what does not map yet', async () => {
    const sandbox = await Sandbox.create(opts);
    const token = (sandbox as unknown as { envdAccessToken: string }).envdAccessToken;
    const client = createClient(Filesystem, createConnectTransport({ baseUrl: `${base}/e2b/envd`, httpVersion: '1.1' }));
    await assert.rejects(
      client.createWatcher({ path: '/home/user', includeEntry: true }, { headers: { 'E2b-Sandbox-Id': sandbox.sandboxId, 'X-Access-Token': token } }),
      (err: unknown) => err instanceof ConnectError && err.code === Code.Unimplemented && /docs\/e2b\.md/.test(err.message),
    );
    await sandbox.kill();
  });

  it('watches a directory in the polled form too: a watcher, its events since the last read, its removal', async () => {
    const sandbox = await Sandbox.create(opts);
    const headers = { 'E2b-Sandbox-Id': sandbox.sandboxId, 'X-Access-Token': (sandbox as unknown as { envdAccessToken: string }).envdAccessToken };
    const client = createClient(Filesystem, createConnectTransport({ baseUrl: `${base}/e2b/envd`, httpVersion: '1.1', useBinaryFormat: false }));
    const { watcherId } = await client.createWatcher({ path: '/home/user/polled', recursive: true }, { headers });
    await sandbox.files.write('/home/user/polled/one.txt', '1');
    const seen: string[] = [];
    await untilTrue('the create', async () => {
      seen.push(...(await client.getWatcherEvents({ watcherId }, { headers })).events.map((e) => `${e.type} ${e.name}`));
      return seen.includes(`${EventType.CREATE} one.txt`);
    });
    assert.deepEqual((await client.getWatcherEvents({ watcherId }, { headers })).events, [], 'read events are not given again');
    await client.removeWatcher({ watcherId }, { headers });
    await assert.rejects(client.getWatcherEvents({ watcherId }, { headers }), (err: unknown) => err instanceof ConnectError && err.code === Code.NotFound);
    await sandbox.kill();
  });
});
