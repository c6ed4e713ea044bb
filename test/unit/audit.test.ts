// The audit trail: a run's record holds exactly its state-changing requests, in order,
// with who, what, when, from where and the decision; no key and no file contents reach
// the store; organizations see only their own; filters and paging; refusals recorded as
// such; tool calls and MCP tool calls; retention; a store that fails loses nothing.
// Over 400 lines: one recorded run of requests serves most of the checks.
import assert from 'node:assert/strict';
import { readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import SQLite from 'better-sqlite3';
import { Kysely, SqliteDialect } from 'kysely';
import pino from 'pino';
import { AuditTrail, MAX_PENDING, type AuditRecord } from '../../src/core/audit.ts';
import { isAuditable } from '../../src/http/audit.ts';
import { actionOf, newOperationNote, withOperationNote } from '../../src/core/operations.ts';
import { timeOrderedUuid } from '../../src/lib/ids.ts';
import { migrate } from '../../src/store/db.ts';
import type { Database } from '../../src/store/schema.ts';
import { TOOL_ACTIONS, toolDefinitions } from '../../src/adapters/tools/definitions.ts';
import { SQLITE_FILE } from '../../src/store/sqlite/sqlite-connection.ts';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';
import { TEST_STORE } from '../support/test-store.ts';
import { untilTrue } from '../support/until.ts';

interface Event {
  event_id: string;
  at: string;
  key_id: string;
  client_address: string;
  via: string;
  method: string;
  route: string;
  action: string;
  tool: string | null;
  profile_id: string | null;
  room_id: string | null;
  instance_id: string | null;
  command_id: string | null;
  command: string | null;
  exit_code: number | null;
  end_reason: string | null;
  files_changed: { total: number; created: number | null; modified: number | null; deleted: number | null } | null;
  file_path: string | null;
  signal: string | null;
  target_key_id: string | null;
  status: number;
  decision: string;
  error: string | null;
  request_id: string;
}

const SECRET_CONTENT = 'file-content-that-must-never-be-in-the-audit-7f3a91';
const QUOTA_ROOM = 'over-quota';
const LIMITED_ROOM = 'rate-limited';

let t: TestApp;
let org: TestOrg;
let other: TestOrg;
let keyId: string;

before(async () => {
  t = await startTestApp({
    // Stand-ins for the quota and rate-limit checks: they answer the way those parts do
    // (403 quota_exceeded, 429), so the trail's decision is derived from the response alone.
    beforeReady: (app) =>
      app.addHook('preHandler', async (request, reply) => {
        const room = (request.params as { room_id?: string }).room_id;
        if (room === QUOTA_ROOM && request.method === 'POST') {
          return reply.code(403).send({ error: 'quota_exceeded', message: 'instances: 2 of 2 in use', details: { quota: 'instances', limit: 2, used: 2 } });
        }
        if (room === LIMITED_ROOM && request.method === 'POST') {
          return reply.code(429).header('Retry-After', '1').send({ error: 'rate_limited', message: 'slow down' });
        }
        return undefined;
      }),
  });
  org = await t.newOrg();
  other = await t.newOrg();
  keyId = (await t.services.db.selectFrom('api_keys').select('id').where('organization_id', '=', org.organizationId).executeTakeFirstOrThrow()).id;
});
after(() => t.close());

const audit = async (who: TestOrg, query = ''): Promise<{ events: Event[]; next_cursor: string | null }> => {
  const res = await t.app.inject({ method: 'GET', url: `/api/audit${query}`, headers: who.headers });
  assert.equal(res.statusCode, 200, res.body);
  return res.json();
};
const room = (name: string, profile = org.defaultProfileId) => `/api/profile/${profile}/room/${name}`;
let listening: Promise<string> | undefined;
/** The app's address on loopback, for the tests that need a real connection (it listens once). */
const address = (): Promise<string> => (listening ??= t.app.listen({ host: '127.0.0.1', port: 0 }));

describe('a run of requests', () => {
  let instanceId: string;
  let newKey: string;
  let newKeyId: string;
  let profileId: string;
  const expected: { method: string; route: string; action: string; status: number; decision: string; error: string | null }[] = [];
  const R = '/api/profile/:profile_id/room/:room_id';

  before(async () => {
    t.runtime.options = {
      commandChanges: [
        { path: '/home/user/a.txt', status: 'created', size: 3 },
        { path: '/home/user/b.txt', status: 'created', size: 3 },
        { path: '/home/user/c.txt', status: 'modified', size: 3 },
        { path: '/home/user/d.txt', status: 'deleted' },
      ],
    };
    const send = async (method: 'POST' | 'PUT' | 'PATCH' | 'DELETE' | 'GET', url: string, payload?: unknown, headers: Record<string, string> = {}) => {
      const res = await t.app.inject({ method, url, headers: { ...org.headers, ...headers }, ...(payload === undefined ? {} : { payload: payload as string }) });
      return res;
    };
    const expect = (method: string, route: string, action: string, status: number, error: string | null = null, decision = error === null ? 'allowed' : 'error') =>
      expected.push({ method, route, action, status, decision, error });

    let res = await send('POST', '/api/profiles', { name: 'audited' });
    profileId = res.json().profile_id;
    expect('POST', '/api/profiles', 'profile.create', 201);
    res = await send('PATCH', `/api/profiles/${profileId}`, { memory_mb: 512 });
    expect('PATCH', '/api/profiles/:profile_id', 'profile.update', 200);
    await send('GET', '/api/profiles'); // reads are not recorded
    res = await send('POST', room('work'), {});
    instanceId = res.json().instance_id;
    expect('POST', R, 'instance.create', 201);
    res = await send('POST', `${room('work')}/command`, { command: 'make all', env: { TOKEN: 'env-value-not-recorded-91c2' } });
    assert.equal(res.statusCode, 200);
    expect('POST', `${R}/command`, 'command.run', 200);
    res = await send('PUT', `${room('work')}/file/notes/secret.txt`, SECRET_CONTENT, { 'content-type': 'text/plain' });
    assert.equal(res.statusCode, 201);
    expect('PUT', `${R}/file/*`, 'file.write', 201);
    await send('GET', `${room('work')}/file/notes/secret.txt`);
    res = await send('DELETE', `${room('work')}/file/notes/secret.txt`);
    expect('DELETE', `${R}/file/*`, 'file.delete', 200);
    res = await send('POST', `${room('work')}/tools/call`, { name: 'run_command', arguments: { command: 'echo via-tools' } });
    assert.equal(res.statusCode, 200);
    expect('POST', `${R}/tools/call`, 'command.run', 200);
    res = await send('POST', `${room('work')}/tools/call`, { name: 'list_files', arguments: {} }); // read-only tool: not recorded
    assert.equal(res.statusCode, 200);
    res = await send('POST', `${room('work')}/tools/call`, { name: 'read_file', arguments: { path: 'missing.txt' } }); // read-only, even failing
    res = await send('POST', `${room('work')}/tools/call`, { name: 'delete_file', arguments: { path: 'missing.txt' } });
    assert.equal(res.json().is_error, true);
    expect('POST', `${R}/tools/call`, 'file.delete', 200, 'file_not_found');
    res = await send('POST', `${room('nowhere')}/command`, { command: 'true' });
    assert.equal(res.statusCode, 404);
    expect('POST', `${R}/command`, 'command.run', 404, 'instance_not_found');
    res = await send('POST', `${room('work')}/command`, { command: '' });
    assert.equal(res.statusCode, 400);
    expect('POST', `${R}/command`, 'command.run', 400, 'validation_error');
    res = await send('POST', room(QUOTA_ROOM), {});
    assert.equal(res.statusCode, 403);
    expect('POST', R, 'instance.create', 403, 'quota_exceeded', 'denied_quota');
    res = await send('POST', `${room(LIMITED_ROOM)}/command`, { command: 'true' });
    assert.equal(res.statusCode, 429);
    expect('POST', `${R}/command`, 'command.run', 429, 'rate_limited', 'rate_limited');
    res = await send('POST', '/api/keys', { name: 'second' });
    newKey = res.json().api_key;
    newKeyId = res.json().key_id;
    expect('POST', '/api/keys', 'key.create', 201);
    res = await send('DELETE', `/api/keys/${newKeyId}`);
    expect('DELETE', '/api/keys/:key_id', 'key.revoke', 204);
    // Without a valid key a request belongs to no organization: not recorded.
    await t.app.inject({ method: 'POST', url: room('work'), headers: { authorization: `Bearer ${newKey}` }, payload: {} });
    await t.app.inject({ method: 'POST', url: room('work'), payload: {} });
    res = await send('DELETE', room('work'));
    expect('DELETE', R, 'instance.delete', 200);
    res = await send('DELETE', `/api/profiles/${profileId}`);
    expect('DELETE', '/api/profiles/:profile_id', 'profile.delete', 204);
    t.runtime.options = {};
  });

  it('holds exactly the run\'s state-changing requests, in order', async () => {
    const { events, next_cursor } = await audit(org, '?limit=200');
    assert.equal(next_cursor, null);
    const got = [...events].reverse().map((e) => ({ method: e.method, route: e.route, action: e.action, status: e.status, decision: e.decision, error: e.error }));
    assert.deepEqual(got, expected);
    const times = [...events].reverse().map((e) => e.at);
    assert.deepEqual(times, [...times].sort());
    for (const e of events) {
      assert.equal(e.key_id, keyId);
      assert.equal(e.client_address, '127.0.0.1');
      assert.match(e.request_id, /^[0-9a-f-]{36}$/);
    }
  });

  it('says what each request did', async () => {
    const events = [...(await audit(org, '?limit=200')).events].reverse();
    const [profileCreate, , create, command, write, del, toolCommand, toolDelete] = events;
    assert.equal(profileCreate!.profile_id, profileId);
    assert.equal(create!.instance_id, instanceId);
    assert.equal(create!.room_id, 'work');
    assert.equal(create!.profile_id, org.defaultProfileId);
    assert.equal(command!.command, 'make all');
    assert.equal(command!.exit_code, 0);
    assert.equal(command!.end_reason, 'exited');
    assert.equal(command!.instance_id, instanceId);
    assert.match(command!.command_id!, /^[0-9a-f-]{36}$/);
    assert.deepEqual(command!.files_changed, { total: 4, created: 2, modified: 1, deleted: 1 });
    assert.equal(write!.file_path, '/home/user/notes/secret.txt');
    assert.equal(del!.file_path, '/home/user/notes/secret.txt');
    assert.equal(toolCommand!.via, 'tools');
    assert.equal(toolCommand!.tool, 'run_command');
    assert.equal(toolCommand!.command, 'echo via-tools');
    assert.equal(toolCommand!.exit_code, 0);
    assert.equal(toolCommand!.end_reason, 'exited');
    assert.equal(toolDelete!.tool, 'delete_file');
    assert.equal(toolDelete!.file_path, 'missing.txt');
    const revoke = events.find((e) => e.action === 'key.revoke')!;
    const keyCreate = events.find((e) => e.action === 'key.create')!;
    assert.equal(keyCreate.target_key_id, revoke.target_key_id);
  });

  it('never stores the API keys, file contents or environment values', async () => {
    await t.services.audit.flush();
    const rows = JSON.stringify(await t.services.db.selectFrom('audit_events').selectAll().execute());
    // Positive control: what is recorded is found by the same search.
    assert.ok(rows.includes('make all'));
    for (const secret of [org.apiKey, newKey, SECRET_CONTENT, 'env-value-not-recorded-91c2']) assert.ok(!rows.includes(secret), 'a secret is in the audit table');
    // And in the store's files as they are on disk (the table's pages and the write-ahead
    // log), where the store is files of the data directory (SQLite's).
    if (TEST_STORE !== 'sqlite') return;
    const bytes = [SQLITE_FILE, `${SQLITE_FILE}-wal`].map((f) => join(t.dataDir, f)).filter(existsSync).map((f) => readFileSync(f).toString('latin1')).join('');
    assert.ok(bytes.includes('make all'));
    // File contents pass through the fake runtime only, never the store.
    assert.ok(!bytes.includes(SECRET_CONTENT));
  });

  it('is not visible to another organization', async () => {
    const { events } = await audit(other, '?limit=200');
    assert.deepEqual(events, []);
    const filtered = await audit(other, `?instance_id=${instanceId}`);
    assert.deepEqual(filtered.events, []);
  });

  it('filters by action, decision, key, instance, room and time', async () => {
    const all = [...(await audit(org, '?limit=200')).events].reverse();
    const only = async (query: string) => (await audit(org, query)).events.map((e) => e.event_id).reverse();
    const ids = (pick: (e: Event) => boolean) => all.filter(pick).map((e) => e.event_id);
    assert.deepEqual(await only('?action=command.run'), ids((e) => e.action === 'command.run'));
    assert.equal((await only('?action=command.run')).length, 5);
    assert.deepEqual(await only('?decision=denied_quota'), ids((e) => e.decision === 'denied_quota'));
    assert.deepEqual(await only('?decision=rate_limited'), ids((e) => e.decision === 'rate_limited'));
    assert.deepEqual(await only('?decision=error'), ids((e) => e.decision === 'error'));
    assert.deepEqual(await only(`?instance_id=${instanceId}`), ids((e) => e.instance_id === instanceId));
    assert.ok((await only(`?instance_id=${instanceId}`)).length >= 5);
    assert.deepEqual(await only('?room_id=work&action=file.write'), ids((e) => e.room_id === 'work' && e.action === 'file.write'));
    assert.deepEqual(await only(`?key_id=${keyId}`), ids(() => true));
    const middle = all[5]!.at;
    assert.deepEqual(await only(`?since=${encodeURIComponent(middle)}`), ids((e) => e.at >= middle));
    assert.deepEqual(await only(`?until=${encodeURIComponent(middle)}`), ids((e) => e.at < middle));
    const bad = await t.app.inject({ method: 'GET', url: '/api/audit?decision=maybe', headers: org.headers });
    assert.equal(bad.statusCode, 400);
    assert.equal(bad.json().error, 'validation_error');
  });

  it('pages with a cursor: every event once, in order', async () => {
    const all = (await audit(org, '?limit=200')).events.map((e) => e.event_id);
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page: { events: Event[]; next_cursor: string | null } = await audit(org, `?limit=3${cursor ? `&cursor=${cursor}` : ''}`);
      seen.push(...page.events.map((e) => e.event_id));
      cursor = page.next_cursor;
      pages++;
    } while (cursor);
    assert.deepEqual(seen, all);
    assert.equal(pages, Math.ceil(all.length / 3));
    const bad = await t.app.inject({ method: 'GET', url: '/api/audit?cursor=bogus', headers: org.headers });
    assert.equal(bad.json().error, 'invalid_cursor');
  });
});

describe('commands that answer later', () => {
  it('records a streamed command with its outcome, and a background one with its id', async () => {
    const who = await t.newOrg();
    const url = `/api/profile/${who.defaultProfileId}/room/s`;
    assert.equal((await t.app.inject({ method: 'POST', url, headers: who.headers, payload: {} })).statusCode, 201);
    const streamed = await t.app.inject({ method: 'POST', url: `${url}/command`, headers: who.headers, payload: { command: 'streamed', stream: true } });
    assert.match(streamed.body, /event: result/);
    const background = await t.app.inject({ method: 'POST', url: `${url}/command`, headers: who.headers, payload: { command: 'later', background: true } });
    assert.equal(background.statusCode, 202);
    const events = (await audit(who, '?action=command.run')).events.reverse();
    assert.equal(events.length, 2);
    assert.equal(events[0]!.command, 'streamed');
    assert.equal(events[0]!.exit_code, 0);
    assert.equal(events[0]!.status, 200);
    assert.equal(events[1]!.command, 'later');
    assert.equal(events[1]!.status, 202);
    assert.equal(events[1]!.command_id, background.json().command_id);
  });

  it('records a streamed command whose client left before it ended, with the address it came from', async () => {
    const who = await t.newOrg();
    const url = `/api/profile/${who.defaultProfileId}/room/left`;
    assert.equal((await t.app.inject({ method: 'POST', url, headers: who.headers, payload: {} })).statusCode, 201);
    const base = await address();
    t.runtime.options.commandDelayMs = 300;
    try {
      const leaving = new AbortController();
      const res = await fetch(`${base}${url}/command`, {
        method: 'POST',
        headers: { ...who.headers, 'content-type': 'application/json', accept: 'text/event-stream' },
        body: JSON.stringify({ command: 'left-early' }),
        signal: leaving.signal,
      });
      assert.equal(res.status, 200);
      // The first event has come: the client goes before the command's result does.
      await res.body!.getReader().read();
      leaving.abort();
      await untilTrue('the left stream to be recorded', async () => (await audit(who, '?action=command.run')).events.length === 1, { timeoutMs: 5_000 });
    } finally {
      t.runtime.options.commandDelayMs = undefined;
    }
    const [event] = (await audit(who, '?action=command.run')).events;
    assert.equal(event!.command, 'left-early');
    assert.equal(event!.client_address, '127.0.0.1');
  });

  it('records a command refused by the per-instance limit as rate-limited (429)', async () => {
    const limited = await startTestApp({ config: { maxCommandsPerInstance: 1 } });
    try {
      const who = await limited.newOrg();
      const url = `/api/profile/${who.defaultProfileId}/room/busy`;
      assert.equal((await limited.app.inject({ method: 'POST', url, headers: who.headers, payload: {} })).statusCode, 201);
      limited.runtime.options = { commandDelayMs: 500 };
      const first = await limited.app.inject({ method: 'POST', url: `${url}/command`, headers: who.headers, payload: { command: 'sleep', background: true } });
      assert.equal(first.statusCode, 202);
      const second = await limited.app.inject({ method: 'POST', url: `${url}/command`, headers: who.headers, payload: { command: 'refused' } });
      assert.equal(second.statusCode, 429);
      const res = await limited.app.inject({ method: 'GET', url: '/api/audit?decision=rate_limited', headers: who.headers });
      const events = res.json().events as Event[];
      assert.equal(events.length, 1);
      assert.equal(events[0]!.command, 'refused');
      assert.equal(events[0]!.error, 'too_many_commands');
      await new Promise((r) => setTimeout(r, 600));
    } finally {
      await limited.close();
    }
  });
});

describe('MCP tool calls', () => {
  it('records each state-changing tool call, not the protocol traffic or reads', async () => {
    const who = await t.newOrg();
    const base = await address();
    const client = new Client({ name: 'audit-test', version: '1' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { requestInit: { headers: who.headers } }));
    try {
      await client.listTools();
      await client.callTool({ name: 'create_instance', arguments: { room: 'm' } });
      await client.callTool({ name: 'run_command', arguments: { room: 'm', command: 'echo over-mcp' } });
      await client.callTool({ name: 'read_file', arguments: { room: 'm', path: 'nothing' } });
      await client.callTool({ name: 'write_file', arguments: { room: 'm', path: 'x.txt', content: SECRET_CONTENT } });
      await client.callTool({ name: 'run_command', arguments: { room: 'no-machine', command: 'true' } });
      await client.callTool({ name: 'no_such_tool', arguments: {} }).catch(() => undefined);
    } finally {
      await client.close();
    }
    const events = (await audit(who, '?limit=200')).events.reverse();
    assert.deepEqual(
      events.map((e) => [e.via, e.route, e.action, e.tool, e.decision, e.error]),
      [
        ['mcp', '/mcp', 'instance.create', 'create_instance', 'allowed', null],
        ['mcp', '/mcp', 'command.run', 'run_command', 'allowed', null],
        ['mcp', '/mcp', 'file.write', 'write_file', 'allowed', null],
        ['mcp', '/mcp', 'command.run', 'run_command', 'error', 'instance_not_found'],
        ['mcp', '/mcp', 'tool.call', 'no_such_tool', 'error', 'unknown_tool'],
      ],
    );
    assert.equal(events[1]!.command, 'echo over-mcp');
    assert.equal(events[1]!.exit_code, 0);
    assert.equal(events[1]!.instance_id, events[0]!.instance_id);
    assert.equal(events[0]!.profile_id, who.defaultProfileId);
    assert.equal(events[2]!.file_path, '/home/user/x.txt');
    assert.equal(events[3]!.room_id, 'no-machine');
    const rows = JSON.stringify(await t.services.db.selectFrom('audit_events').selectAll().execute());
    assert.ok(!rows.includes(SECRET_CONTENT));
  });
});

describe('what core says it did', () => {
  it('names the action and the objects of a call made outside any HTTP route, and nothing outside a note', async () => {
    const who = await t.newOrg();
    const created = newOperationNote();
    const { instance } = await withOperationNote(created, () => t.services.instances.create(who.organizationId, who.defaultProfileId, 'core-only', { wait: true }));
    assert.equal(created.action, 'instance.create');
    assert.deepEqual(created.facts, { profileId: who.defaultProfileId, roomId: 'core-only', instanceId: instance.instance_id });
    const ran = newOperationNote('tool.call');
    await withOperationNote(ran, () => t.services.commands.run(who.organizationId, who.defaultProfileId, 'core-only', { command: 'echo core' }));
    assert.equal(ran.action, 'command.run');
    assert.equal(ran.facts.command, 'echo core');
    assert.equal(ran.facts.instanceId, instance.instance_id);
    // A read names nothing: the adapter's expectation stands.
    const read = newOperationNote(null);
    await withOperationNote(read, () => t.services.instances.get(who.organizationId, who.defaultProfileId, 'core-only'));
    assert.equal(read.action, undefined);
    assert.equal(actionOf(read), null);
    // The first operation of a call names it; operations it goes on to call do not take it over.
    const deleted = newOperationNote();
    const again = await withOperationNote(deleted, async () => {
      await t.services.instances.delete(who.organizationId, who.defaultProfileId, 'core-only');
      return t.services.instances.create(who.organizationId, who.defaultProfileId, 'core-only', { wait: false });
    });
    assert.notEqual(again.instance.instance_id, instance.instance_id);
    assert.equal(deleted.action, 'instance.delete');
    assert.equal(deleted.facts.instanceId, instance.instance_id);
    // Outside a note, noting does nothing (the CLI, background work).
    await t.services.instances.create(who.organizationId, who.defaultProfileId, 'no-note', { wait: false });
  });
});

describe('what is recorded', () => {
  it('names every state-changing route and tool', () => {
    for (const route of t.app.routeTable) {
      if (!isAuditable(route.method, route.url) || route.url === '/mcp') continue;
      assert.ok(route.auditAction, `${route.method} ${route.url} names no audit action it expects (config.auditAction); add one`);
    }
    const limits = { maxOutputBytes: 1, maxFileReadBytes: 1, maxUploadBytes: 1, filesChangedLimit: 1, maxListEntries: 1 };
    for (const tool of toolDefinitions({ kind: 'organization' }, limits)) {
      assert.equal(TOOL_ACTIONS[tool.name] === null, tool.annotations.readOnlyHint, `${tool.name}: recorded exactly when it is not read-only`);
    }
  });
});

describe('the trail\'s store', () => {
  const record = (organizationId: string, at: string): AuditRecord => ({
    eventId: timeOrderedUuid(Date.parse(at)),
    organizationId,
    at,
    durationMs: 1,
    requestId: 'r',
    keyId: 'k',
    clientAddress: '127.0.0.1',
    via: 'api',
    method: 'POST',
    route: '/api/x',
    action: 'other',
    status: 200,
    decision: 'allowed',
  });

  it('prunes records past the retention, and keeps all with a retention of 0', async () => {
    const db = new Kysely<Database>({ dialect: new SqliteDialect({ database: new SQLite(':memory:') }) });
    await migrate(db);
    const now = Date.parse('2025-06-01T00:00:00.000Z');
    const trail = new AuditTrail({ db, log: pino({ level: 'silent' }), retentionDays: 30 });
    trail.record(record('o', '2025-04-01T00:00:00.000Z'));
    trail.record(record('o', '2025-05-01T23:59:59.999Z'));
    trail.record(record('o', '2025-05-02T00:00:00.001Z'));
    await trail.flush();
    assert.equal(await trail.prune(now), 2);
    const left = await trail.list('o', {}, { limit: 10 });
    assert.deepEqual(left.events.map((e) => e.at), ['2025-05-02T00:00:00.001Z']);
    const forever = new AuditTrail({ db, log: pino({ level: 'silent' }), retentionDays: 0 });
    assert.equal(await forever.prune(now + 1e12), 0);
    await trail.close();
    await db.destroy();
  });

  it('keeps records a failed write could not store, refuses more past its limit, and writes them once the store answers', async () => {
    const db = new Kysely<Database>({ dialect: new SqliteDialect({ database: new SQLite(':memory:') }) });
    const lines: string[] = [];
    const log = pino({ level: 'error' }, { write: (line: string) => void lines.push(line) });
    const trail = new AuditTrail({ db, log, retentionDays: 30 });
    // No migration yet: the table is missing, so every write fails.
    for (let i = 0; i < MAX_PENDING; i++) trail.record(record('o', new Date(Date.now() + i).toISOString()));
    assert.equal(trail.accepting, false);
    await assert.rejects(trail.flush());
    assert.equal(trail.backlog, MAX_PENDING);
    await assert.rejects(trail.list('o', {}, { limit: 1 }), { code: 'audit_unavailable' });
    await migrate(db);
    await trail.flush();
    assert.equal(trail.backlog, 0);
    assert.equal(trail.accepting, true);
    const count = await db.selectFrom('audit_events').select(({ fn }) => fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
    assert.equal(Number(count.n), MAX_PENDING);
    await trail.close();
    await db.destroy();
  });

  it('logs the records it cannot write when it closes', async () => {
    const db = new Kysely<Database>({ dialect: new SqliteDialect({ database: new SQLite(':memory:') }) });
    const lines: string[] = [];
    const log = pino({ level: 'error' }, { write: (line: string) => void lines.push(line) });
    const trail = new AuditTrail({ db, log, retentionDays: 30 });
    const r = record('o', '2025-05-02T00:00:00.001Z');
    trail.record(r);
    await trail.close();
    const logged = lines.map((l) => JSON.parse(l) as { auditRecord?: AuditRecord }).filter((l) => l.auditRecord);
    assert.deepEqual(logged.map((l) => l.auditRecord!.eventId), [r.eventId]);
    await db.destroy();
  });
});
