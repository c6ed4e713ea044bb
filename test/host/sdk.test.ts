// The TypeScript SDK against a real server listening on a port, with real gVisor
// instances: create with progress, commands (plain, streamed, background), files in
// and out, snapshots and fork, typed errors, the retry policy, and that the SDK cannot drift from the
// server's OpenAPI document. One instance serves every test that needs one, which is
// why this is one file of over 400 lines.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { GENERATED_FILE, type OpenApiDocument, renderApi, renderPackageJson, SDK_PACKAGE_FILE } from '../../scripts/generate-sdk.ts';
import {
  CommandHandle,
  contentBytes,
  Instances,
  Keys,
  Profiles,
  Room,
  Roomkit,
  RoomkitConnectionError,
  RoomkitError,
  Snapshots,
  type Instance,
} from '../../sdk/src/index.ts';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';
import { hostObjects, NOTHING } from '../support/host.ts';
import { untilTrue } from '../support/until.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const LIFECYCLE = ['active', 'network_allocated', 'ftap_created', 'image_generated', 'vm_started', 'vm_booted', 'ready'];

let t: TestApp;
let org: TestOrg;
let baseUrl: string;
let rk: Roomkit;
let room: Room;
let profileId: string;
let instance: Instance;
let deleted = false;
const progress: Instance[] = [];

before(async () => {
  t = await startTestApp({ gvisorPool: '10.222.0.0/24' });
  assert.ok('runtime' in t.services.runtime, 'the gVisor runtime is not available');
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  baseUrl = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  org = await t.newOrg();
  rk = new Roomkit({ baseUrl, apiKey: org.apiKey });
  const profile = await rk.profiles.create({ name: 'sdk', memory_mb: 512, disk_mb: 1024, network: { egress: 'none' }, command_timeout_s: 60 });
  profileId = profile.profile_id;
  // By name: the SDK resolves it through GET /api/profiles.
  room = rk.room('sdk', 'main');
  instance = await room.create({ onProgress: (i) => progress.push(i), pollIntervalMs: 50 });
});

after(async () => {
  const dataDir = t.dataDir;
  try {
    if (!deleted && instance !== undefined) await room.delete().catch(() => {});
    await t.services.close();
    assert.deepEqual({ ...(await hostObjects(dataDir)), egressRules: [] }, NOTHING);
  } finally {
    await t.close();
  }
});

/** The RoomkitError a promise rejects with. */
async function rejection(promise: Promise<unknown>): Promise<RoomkitError> {
  try {
    await promise;
  } catch (err) {
    assert.ok(err instanceof RoomkitError, `expected a RoomkitError, got ${String(err)}`);
    return err;
  }
  assert.fail('expected the call to fail');
}

describe('create', () => {
  it('reports the states it passes through, in lifecycle order, until ready', () => {
    assert.equal(instance.state, 'ready');
    assert.equal(instance.profile_id, profileId);
    assert.equal(instance.room_id, 'main');
    assert.ok(progress.length >= 2, `progress was called ${progress.length} time(s)`);
    // The first report is the 202 answer, before provisioning got far.
    assert.notEqual(progress[0]!.state, 'ready');
    assert.equal(progress.at(-1)!.state, 'ready');
    const order = progress.map((p) => LIFECYCLE.indexOf(p.state));
    assert.ok(order.every((o) => o >= 0), `unexpected states ${progress.map((p) => p.state)}`);
    assert.deepEqual(order, [...order].sort((a, b) => a - b), `states out of order: ${progress.map((p) => p.state)}`);
    assert.ok(progress.every((p) => p.instance_id === instance.instance_id));
  });

  it('is idempotent: another create returns the live instance, by name or by id', async () => {
    const again = await room.create();
    assert.equal(again.instance_id, instance.instance_id);
    assert.equal(again.state, 'ready');
    const byId = await rk.room(profileId, 'main').get();
    assert.equal(byId.instance_id, instance.instance_id);
    assert.equal(await room.profileId(), profileId);
  });
});

describe('create options and keep-alive', () => {
  it('sends env, metadata and timeout_s; the list filters by metadata; keepAlive moves the deadline', async () => {
    const other = rk.room('sdk', 'with-options');
    const made = await other.create({ env: { TOKEN: 'secret value' }, metadata: { app: 'sdk test', user: 'u&1' }, timeout_s: 600 });
    try {
      assert.deepEqual(made.env_names, ['TOKEN']);
      assert.deepEqual(made.metadata, { app: 'sdk test', user: 'u&1' });
      assert.equal(made.timeout_s, 600);
      assert.equal((await other.exec('printf %s "$TOKEN"')).result.output, 'secret value');
      // Labels with spaces and & survive the filter's encoding.
      const found = await rk.instances.list({ metadata: { user: 'u&1', app: 'sdk test' } });
      assert.deepEqual(found.instances.map((i) => i.instance_id), [made.instance_id]);
      assert.deepEqual((await rk.instances.list({ metadata: { user: 'u&2' } })).instances, []);
      const kept = await other.keepAlive({ timeout_s: 1200 });
      assert.ok(Date.parse(kept.expires_at!) > Date.parse(made.expires_at!) + 500_000);
      const conflict = await rejection(other.create({ timeout_s: 60 }));
      assert.equal(conflict.code, 'instance_options_conflict');
      assert.equal(conflict.status, 409);
    } finally {
      await other.delete();
    }
  });
});

describe('exec', () => {
  it('answers the CommandResult with output and exit code; a failing command is a result, not an exception', async () => {
    const ok = await room.exec('echo hello; echo oops >&2');
    assert.equal(ok.status, 'success');
    assert.equal(ok.result.exit_code, 0);
    assert.equal(ok.result.output, 'hello\noops\n');
    assert.equal(ok.instance_id, instance.instance_id);
    assert.match(ok.command_id, UUID);

    const three = await room.exec('echo before; exit 3');
    assert.equal(three.status, 'error');
    assert.equal(three.result.exit_code, 3);
    assert.equal(three.result.output, 'before\n');
    const missing = await room.exec('no-such-program');
    assert.equal(missing.result.exit_code, 127);
  });

  it('lists the files a command changed, and takes cwd and env', async () => {
    const made = await room.exec('printf abc > made.txt');
    assert.deepEqual(
      made.result.files_changed.map((c) => [c.path, c.status, c.size]),
      [['/home/user/made.txt', 'created', 3]],
    );
    assert.equal(made.result.files_changed[0]!.public_url, `/vm/${instance.instance_id}/file/home/user/made.txt`);
    const gone = await room.exec('rm made.txt');
    assert.deepEqual(gone.result.files_changed.map((c) => [c.path, c.status]), [['/home/user/made.txt', 'deleted']]);
    const where = await room.exec('pwd; echo "$GREETING"', { cwd: '/tmp', env: { GREETING: 'hi there' } });
    assert.equal(where.result.output, '/tmp\nhi there\n');
  });

  it('lists the room\'s command history, newest first', async () => {
    const marker = await room.exec('echo history-marker');
    const page = await room.commands({ limit: 3 });
    assert.equal(page.commands.length, 3);
    assert.equal(page.commands[0]!.command_id, marker.command_id);
    assert.equal(page.commands[0]!.command, 'echo history-marker');
    assert.equal(typeof page.next_cursor, 'string');
    const next = await room.commands({ limit: 3, cursor: page.next_cursor! });
    assert.ok(next.commands.every((c) => !page.commands.some((p) => p.command_id === c.command_id)));
  });
});

describe('execStream and background commands', () => {
  it('passes output on as it is printed, then answers the same result as exec', async () => {
    const pieces: { data: string; offset: number; at: number }[] = [];
    let started: string | undefined;
    const result = await room.execStream('for i in 1 2 3; do echo line$i; sleep 0.4; done; exit 5', {
      onStarted: (s) => (started = s.command_id),
      onOutput: (data, { offset }) => pieces.push({ data, offset, at: Date.now() }),
    });
    assert.equal(result.result.exit_code, 5);
    assert.equal(result.result.output, 'line1\nline2\nline3\n');
    assert.equal(started, result.command_id);
    assert.equal(pieces.map((p) => p.data).join(''), result.result.output);
    // Offsets are byte positions of each piece in the whole output.
    let expected = 0;
    for (const piece of pieces) {
      assert.equal(piece.offset, expected);
      expected += Buffer.byteLength(piece.data);
    }
    // Live, not all at the end: the pieces arrived spread over the command's run.
    assert.ok(pieces.length >= 2, `only ${pieces.length} output event(s)`);
    assert.ok(pieces.at(-1)!.at - pieces[0]!.at >= 400, 'all output arrived at once');
  });

  it('starts a background command and follows it to its end', async () => {
    const handle = await room.execBackground('echo first; sleep 0.5; echo second; exit 4');
    assert.ok(handle instanceof CommandHandle);
    assert.match(handle.commandId, UUID);
    assert.equal(handle.last?.state, 'running');
    const seen: string[] = [];
    const final = await handle.wait({ pollIntervalMs: 100, onOutput: (data) => seen.push(data) });
    // The same CommandResult that exec() answers with.
    assert.equal(final.status, 'error');
    assert.equal(final.result.exit_code, 4);
    assert.equal(final.result.output, 'first\nsecond\n');
    assert.equal(final.command_id, handle.commandId);
    const direct = await room.exec('exit 4');
    assert.deepEqual(Object.keys(final).sort(), Object.keys(direct).sort());
    assert.deepEqual(Object.keys(final.result).sort(), Object.keys(direct.result).sort());
    assert.equal(seen.join(''), 'first\nsecond\n');
    const status = await handle.waitStatus();
    assert.equal(status.state, 'exited');
    assert.equal(status.exit_code, 4);
    const again = await room.command(handle.commandId).status();
    assert.equal(again.output, 'first\nsecond\n');
  });

  it('kills a background command', async () => {
    const handle = await room.execBackground('echo up; sleep 60');
    // Killed once it runs (its first output is there), so the kill meets the sleep.
    await untilTrue('the background command to print', async () => (await handle.status()).output.includes('up'), { everyMs: 100 });
    const killed = await handle.kill();
    assert.equal(killed.state, 'killed');
    assert.equal(killed.exit_code, 137);
    const error = await rejection(handle.kill());
    assert.equal(error.code, 'command_not_running');
    assert.equal(error.status, 409);
  });
});

describe('files', () => {
  it('writes and reads text, and a command sees what was written', async () => {
    const written = await room.writeFile('notes/hello.txt', 'héllo\n');
    assert.deepEqual(written, { file_path: '/home/user/notes/hello.txt', instance_id: instance.instance_id, status: 'created', size: 7 });
    const rewritten = await room.writeFile('notes/hello.txt', 'héllo again\n');
    assert.equal(rewritten.status, 'modified');
    const read = await room.readFile('notes/hello.txt');
    assert.equal(read.file_path, '/home/user/notes/hello.txt');
    assert.equal(read.encoding, 'utf-8');
    assert.equal(read.content, 'héllo again\n');
    assert.equal((await room.exec('cat notes/hello.txt')).result.output, 'héllo again\n');
  });

  it('round-trips binary bytes through the JSON and the raw endpoints, with ranges', async () => {
    // Plain Uint8Arrays, as the SDK answers in every runtime (no Buffer).
    const bytes = new Uint8Array(Array.from({ length: 512 }, (_, i) => (i * 7) % 256));
    await room.writeFile('notes/bin.dat', bytes);
    const read = await room.readFile('notes/bin.dat');
    assert.equal(read.encoding, 'base64');
    assert.equal(read.size, 512);
    assert.deepEqual(contentBytes(read), bytes);
    assert.deepEqual(await room.readBytes('notes/bin.dat'), bytes);
    assert.deepEqual(await room.readRaw('notes/bin.dat'), bytes);
    assert.deepEqual(await room.readRaw('/home/user/notes/bin.dat'), bytes);
    assert.deepEqual(await room.readRaw('notes/bin.dat', { range: { start: 10, end: 19 } }), bytes.subarray(10, 20));
    const raw = await room.openRaw('notes/bin.dat');
    assert.equal(raw.status, 200);
    assert.equal(raw.length, 512);
    assert.equal(raw.contentType, 'application/octet-stream');
    await raw.body.cancel();
    assert.equal((await room.exec('sha256sum notes/bin.dat | cut -c1-64')).result.output.trim(), createHashHex(bytes));
  });

  it('sends paths with spaces, # and .. to the server as they are', async () => {
    await room.writeFile('/tmp/a dir/x..y #1?.txt', 'odd');
    assert.equal((await room.readFile('/tmp/a dir/../a dir/x..y #1?.txt')).content, 'odd');
    assert.equal(new TextDecoder().decode(await room.readRaw('/tmp/a dir/x..y #1?.txt')), 'odd');
    assert.equal((await room.exec("cat '/tmp/a dir/x..y #1?.txt'")).result.output, 'odd');
  });

  it('lists a directory and deletes a file', async () => {
    const listing = await room.list('notes');
    assert.equal(listing.path, '/home/user/notes');
    assert.deepEqual(listing.entries.map((e) => [e.name, e.type, e.size]), [['bin.dat', 'file', 512], ['hello.txt', 'file', 13]]);
    const home = await room.list();
    assert.equal(home.path, '/home/user');
    assert.ok(home.entries.some((e) => e.name === 'notes' && e.type === 'directory'));

    const removed = await room.deleteFile('notes/hello.txt');
    assert.deepEqual(removed, { file_path: '/home/user/notes/hello.txt', instance_id: instance.instance_id, status: 'deleted' });
    const error = await rejection(room.readFile('notes/hello.txt'));
    assert.equal(error.code, 'file_not_found');
    assert.equal(error.status, 404);
  });
});

describe('errors', () => {
  it('are RoomkitErrors with the status, code, message and request id of the answer', async () => {
    const empty = await rejection(rk.room('sdk', 'empty-room').get());
    assert.equal(empty.status, 404);
    assert.equal(empty.code, 'instance_not_found');
    assert.match(empty.message, /empty-room/);
    assert.match(empty.requestId ?? '', UUID);
    const exec = await rejection(rk.room(profileId, 'empty-room').exec('true'));
    assert.equal(exec.code, 'instance_not_found');
    const directory = await rejection(room.readFile('/etc'));
    assert.equal(directory.code, 'is_a_directory');
    assert.equal(directory.status, 400);
    const invalid = await rejection(room.exec('true', { timeout_s: 0 }));
    assert.equal(invalid.code, 'validation_error');
    assert.ok(Array.isArray(invalid.details?.errors));
  });

  it('says invalid_api_key for a wrong key and missing_api_key for none', async () => {
    const wrong = new Roomkit({ baseUrl, apiKey: `rk_test_${'0'.repeat(32)}` });
    const invalid = await rejection(wrong.profiles.list());
    assert.equal(invalid.status, 401);
    assert.equal(invalid.code, 'invalid_api_key');
    const saved = process.env.ROOMKIT_API_KEY;
    delete process.env.ROOMKIT_API_KEY;
    try {
      const none = await rejection(new Roomkit({ baseUrl }).room('sdk', 'main').get());
      assert.equal(none.code, 'missing_api_key');
    } finally {
      if (saved !== undefined) process.env.ROOMKIT_API_KEY = saved;
    }
  });

  it('says profile_not_found for a profile name the organization does not have', async () => {
    const error = await rejection(rk.room('no-such-profile', 'main').get());
    assert.equal(error.code, 'profile_not_found');
    assert.match(error.message, /no-such-profile/);
    const byId = await rejection(rk.room('00000000-0000-4000-8000-000000000000', 'main').get());
    assert.equal(byId.code, 'profile_not_found');
    assert.match(byId.requestId ?? '', UUID);
  });

  it('throws RoomkitConnectionError when nothing listens, after retrying only what is safe', async () => {
    const closed = await freePort();
    let calls = 0;
    const counting: typeof fetch = (input, init) => {
      calls++;
      return fetch(input, init);
    };
    const down = new Roomkit({ baseUrl: `http://127.0.0.1:${closed}`, apiKey: org.apiKey, fetch: counting, maxRetries: 2, retryDelayMs: 5 });
    const get = down.room(profileId, 'main').get();
    await assert.rejects(get, (err: unknown) => err instanceof RoomkitConnectionError && err.code === 'connection_failed' && /ECONNREFUSED/.test(err.message));
    assert.equal(calls, 3);
    calls = 0;
    // A command carries an Idempotency-Key, the same on every try: safe to repeat.
    await assert.rejects(down.room(profileId, 'main').exec('true'), RoomkitConnectionError);
    assert.equal(calls, 3);
    calls = 0;
    await assert.rejects(down.room(profileId, 'main').sendStdin('c', 'x'), RoomkitConnectionError);
    assert.equal(calls, 1);
  });
});

describe('retries', () => {
  /** A server that answers the given statuses in turn (the last one from then on), counting requests. */
  async function flaky(statuses: number[], code = 'shutting_down') {
    const requests: string[] = [];
    const keys: (string | undefined)[] = [];
    const server = createServer((req: IncomingMessage, res: ServerResponse) => {
      req.resume();
      requests.push(`${req.method} ${req.url}`);
      keys.push(req.headers['idempotency-key'] as string | undefined);
      const status = statuses[Math.min(requests.length - 1, statuses.length - 1)]!;
      res.writeHead(status, { 'content-type': 'application/json', 'x-request-id': `req-${requests.length}` });
      res.end(status >= 400 ? JSON.stringify({ error: code, message: 'try again' }) : JSON.stringify({ profiles: [], instance_id: 'i', state: 'ready', file_path: '/f' }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const client = new Roomkit({ baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, apiKey: org.apiKey, maxRetries: 3, retryDelayMs: 5 });
    return { requests, keys, client, room: client.room(profileId, 'r'), close: () => closeServer(server) };
  }

  it('repeats GET, PUT and the create on 502/503/504 until an answer', async () => {
    const s = await flaky([503, 502, 200]);
    try {
      assert.deepEqual(await s.client.profiles.list(), []);
      assert.equal(s.requests.length, 3);
      s.requests.length = 0;
      await s.room.create();
      assert.deepEqual(s.requests, Array(3).fill(`POST /api/profile/${profileId}/room/r`));
      s.requests.length = 0;
      await s.room.writeFile('f', 'x');
      assert.equal(s.requests.length, 3);
    } finally {
      await s.close();
    }
  });

  it('repeats a command, a background start, a snapshot, a fork and a create with one Idempotency-Key on every try', async () => {
    const s = await flaky([503, 502, 200]);
    try {
      const calls: [string, () => Promise<unknown>][] = [
        ['exec', () => s.room.exec('echo once')],
        ['execBackground', () => s.room.execBackground('sleep 1')],
        ['snapshot', () => s.room.snapshot()],
        ['fork', () => s.room.fork(['copy'])],
        ['create', () => s.room.create()],
      ];
      for (const [name, call] of calls) {
        s.requests.length = 0;
        s.keys.length = 0;
        // The answer is only plausible; the tries are what is checked.
        await call().catch(() => {});
        assert.equal(s.requests.length, 3, name);
        assert.equal(new Set(s.keys).size, 1, `${name}: ${s.keys.join(', ')}`);
        assert.ok(s.keys[0], name);
      }
      s.keys.length = 0;
      await s.room.exec('echo a').catch(() => {});
      await s.room.exec('echo a').catch(() => {});
      await s.room.exec('echo b', { idempotencyKey: 'my-key' }).catch(() => {});
      assert.equal(s.keys.length, 3);
      assert.notEqual(s.keys[0], s.keys[1], 'each call has a key of its own');
      assert.equal(s.keys[2], 'my-key');
    } finally {
      await s.close();
    }
    const busy = await flaky([409, 200], 'idempotency_key_in_use');
    try {
      await busy.room.exec('echo waits').catch(() => {});
      assert.equal(busy.requests.length, 2);
    } finally {
      await busy.close();
    }
  });

  it('never repeats a DELETE, a stdin write, a stream, or a 503 that says the runtime is unavailable', async () => {
    const s = await flaky([503]);
    try {
      const error = await rejection(s.room.delete());
      assert.equal(error.code, 'shutting_down');
      assert.equal(error.requestId, 'req-1');
      assert.equal(s.requests.length, 1);
      await rejection(s.room.sendStdin('c', 'x'));
      assert.equal(s.requests.length, 2);
      await s.room.execStream('echo once').catch(() => {});
      assert.equal(s.requests.length, 3);
      assert.equal(s.keys[2], undefined, 'a stream carries no key');
    } finally {
      await s.close();
    }
    const u = await flaky([503], 'runtime_unavailable');
    try {
      assert.equal((await rejection(u.room.create())).code, 'runtime_unavailable');
      assert.equal(u.requests.length, 1);
    } finally {
      await u.close();
    }
    const g = await flaky([504]);
    try {
      const error = await rejection(g.client.profiles.list());
      assert.equal(error.status, 504);
      assert.equal(g.requests.length, 4, 'one try and three retries');
    } finally {
      await g.close();
    }
  });
});

describe('agreement with the server', () => {
  it('the generated types are what the running server\'s /openapi.json gives (else run npm run sdk:generate)', async () => {
    const doc = (await (await fetch(`${baseUrl}/openapi.json`)).json()) as OpenApiDocument;
    const expected = renderApi(doc);
    const actual = readFileSync(GENERATED_FILE, 'utf8');
    assert.ok(actual === expected, 'sdk/src/generated/api.ts is out of date with the server\'s schemas: run npm run sdk:generate');
    const pkg = readFileSync(SDK_PACKAGE_FILE, 'utf8');
    assert.ok(pkg === renderPackageJson(pkg, doc), `sdk/package.json's version is not the API's (${doc.info.version}): run npm run sdk:generate`);
  });

  it('every public method calls only (method, path) pairs that /openapi.json has', async () => {
    const doc = (await (await fetch(`${baseUrl}/openapi.json`)).json()) as { paths: Record<string, Record<string, unknown>> };
    const routes = Object.entries(doc.paths).flatMap(([path, item]) =>
      Object.keys(item).map((method) => ({
        method: method.toUpperCase(),
        path,
        pattern: new RegExp(`^${path.replace(/[.]/g, '\\.').replace(/\{\*\}/g, '.+').replace(/\{[^}]+\}/g, '[^/]+')}$`),
      })),
    );
    const calls: string[] = [];
    const recording: typeof fetch = async (input, init) => {
      const url = new URL(String(input));
      calls.push(`${init?.method ?? 'GET'} ${url.pathname}`);
      return answerFor(init?.method ?? 'GET', url, init);
    };
    const client = new Roomkit({ baseUrl: 'http://127.0.0.1:9', apiKey: org.apiKey, fetch: recording, pollIntervalMs: 1 });
    const r = client.room('by-name', 'x');
    const handle = r.command('11111111-1111-4111-8111-111111111111');
    // One call of every public method; the lists below must name them all.
    const exercised: Record<string, Record<string, () => Promise<unknown>>> = {
      Roomkit: { room: async () => client.room('p', 'r'), health: () => client.health(), resolveProfileId: () => client.resolveProfileId('by-name'), usage: () => client.usage() },
      Profiles: {
        list: () => client.profiles.list(),
        create: () => client.profiles.create({ name: 'n' }),
        get: () => client.profiles.get('by-name'),
        update: () => client.profiles.update('by-name', { vcpus: 1 }),
        delete: () => client.profiles.delete('by-name'),
      },
      Instances: { list: () => client.instances.list({ profile: 'by-name', state: 'ready', metadata: { app: 'a b' }, limit: 5 }), all: async () => (await client.instances.all().next()).value },
      Snapshots: {
        list: () => client.snapshots.list({ instanceId: '44444444-4444-4444-8444-444444444444', limit: 5, cursor: 'c' }),
        all: async () => (await client.snapshots.all().next()).value,
        get: () => client.snapshots.get('44444444-4444-4444-8444-444444444444'),
        delete: () => client.snapshots.delete('44444444-4444-4444-8444-444444444444'),
      },
      Keys: { list: () => client.keys.list(), create: () => client.keys.create({ name: 'k' }), revoke: () => client.keys.revoke('22222222-2222-4222-8222-222222222222') },
      Room: {
        profileId: () => r.profileId(),
        create: () => r.create({ onProgress: () => {} }),
        get: () => r.get(),
        delete: () => r.delete(),
        pause: () => r.pause(),
        keepAlive: () => r.keepAlive({ timeout_s: 60 }),
        setNetwork: () => r.setNetwork({ egress: 'none' }),
        resume: () => r.resume(),
        snapshot: () => r.snapshot({ name: 'n' }),
        fork: () => r.fork(['y', 'z'], { keepSnapshot: true }),
        exec: () => r.exec('true'),
        execStream: () => r.execStream('true'),
        execBackground: () => r.execBackground('true', { stdin: new Uint8Array([1]), stdinOpen: true }),
        sendStdin: () => r.sendStdin('11111111-1111-4111-8111-111111111111', 'x'),
        closeStdin: () => r.closeStdin('11111111-1111-4111-8111-111111111111'),
        command: async () => r.command('11111111-1111-4111-8111-111111111111'),
        commands: () => r.commands({ limit: 1 }),
        readFile: () => r.readFile('a'),
        readBytes: () => r.readBytes('a'),
        openRaw: () => r.openRaw('a'),
        readRaw: () => r.readRaw('/a'),
        writeFile: () => r.writeFile('a', 'x'),
        list: () => r.list('d'),
        deleteFile: () => r.deleteFile('a'),
        // The ticket goes through fetch (and is checked below); the WebSocket after it
        // finds nothing listening on port 9, which is the expected end here (the SDK cannot
        // tell a refused handshake from a failed connection, and says either).
        terminal: () =>
          r.terminal().then(
            (terminal) => terminal.close(),
            (err: unknown) => {
              if (!(err instanceof RoomkitConnectionError || err instanceof RoomkitError)) throw err;
            },
          ),
      },
      CommandHandle: {
        status: () => handle.status({ offset: 3 }),
        wait: () => handle.wait(),
        waitStatus: () => handle.waitStatus(),
        kill: () => handle.kill('TERM'),
        sendStdin: () => handle.sendStdin(new Uint8Array([1, 2]), { close: true }),
        closeStdin: () => handle.closeStdin(),
        revert: () => handle.revert({ force: true }),
      },
    };
    const classes = { Roomkit, Profiles, Instances, Snapshots, Keys, Room, CommandHandle };
    for (const [name, cls] of Object.entries(classes)) {
      const methods = Object.getOwnPropertyNames(cls.prototype).filter((m) => m !== 'constructor' && typeof (cls.prototype as unknown as Record<string, unknown>)[m] === 'function').sort();
      assert.deepEqual(Object.keys(exercised[name]!).sort(), methods, `${name}: exercise every public method here`);
    }
    for (const [name, methods] of Object.entries(exercised)) {
      for (const [method, call] of Object.entries(methods)) await assert.doesNotReject(call(), `${name}.${method}`);
    }
    assert.ok(calls.length >= 25, `only ${calls.length} calls recorded`);
    for (const call of calls) {
      const [method, path] = call.split(' ') as [string, string];
      assert.ok(routes.some((r) => r.method === method && r.pattern.test(path)), `${call} is not a route of /openapi.json`);
    }
  });
});

describe('snapshots and fork', () => {
  it('snapshots the instance, starts another room from it, forks it into two independent rooms, lists and deletes', async () => {
    await room.writeFile('snap/state.txt', 'before the snapshot');
    const snapshot = await room.snapshot({ name: 'sdk test' });
    assert.match(snapshot.snapshot_id, UUID);
    assert.deepEqual([snapshot.state, snapshot.name, snapshot.instance_id, snapshot.room_id], ['ready', 'sdk test', instance.instance_id, 'main']);
    assert.equal(snapshot.memory_kept, true, 'memory too by default, where the host can');
    await room.writeFile('snap/state.txt', 'after the snapshot');
    const restoredRoom = rk.room('sdk', 'restored');
    const forkRooms = [rk.room('sdk', 'fork-a'), rk.room('sdk', 'fork-b')];
    const kept: string[] = [snapshot.snapshot_id];
    try {
      const restored = await restoredRoom.create({ snapshot_id: snapshot.snapshot_id });
      assert.equal(restored.state, 'ready');
      assert.notEqual(restored.instance_id, instance.instance_id);
      assert.equal(restored.snapshot_id, snapshot.snapshot_id);
      assert.equal((await restoredRoom.exec('cat snap/state.txt')).result.output, 'before the snapshot');
      assert.equal((await restoredRoom.create({ snapshot_id: snapshot.snapshot_id })).instance_id, restored.instance_id, 'a second create finds it');
      await restoredRoom.delete();

      const forked = await room.fork(['fork-a', 'fork-b'], { keepSnapshot: true, memory: false });
      assert.deepEqual(forked.instances.map((i) => [i.room_id, i.state]), [['fork-a', 'ready'], ['fork-b', 'ready']]);
      assert.ok(forked.snapshot, 'keepSnapshot answers the snapshot');
      assert.equal(forked.snapshot.memory_kept, false, 'files only, as asked');
      kept.push(forked.snapshot.snapshot_id);
      assert.ok(forked.instances.every((i) => i.snapshot_id === forked.snapshot!.snapshot_id && i.instance_id !== instance.instance_id));
      await forkRooms[0]!.exec('echo changed in fork-a > snap/state.txt');
      assert.equal((await forkRooms[0]!.exec('cat snap/state.txt')).result.output, 'changed in fork-a\n');
      assert.equal((await forkRooms[1]!.exec('cat snap/state.txt')).result.output, 'after the snapshot', 'a change in one copy is absent in the other');
      const occupied = await rejection(room.fork(['fork-a']));
      assert.deepEqual([occupied.status, occupied.code], [409, 'room_occupied']);

      const listed = await rk.snapshots.list({ instanceId: instance.instance_id });
      assert.deepEqual(listed.snapshots.map((s) => s.snapshot_id), [forked.snapshot.snapshot_id, snapshot.snapshot_id], 'newest first');
      const paged: string[] = [];
      for await (const s of rk.snapshots.all({ limit: 1 })) paged.push(s.snapshot_id);
      assert.deepEqual(paged, [forked.snapshot.snapshot_id, snapshot.snapshot_id]);
      assert.deepEqual(await rk.snapshots.get(snapshot.snapshot_id), listed.snapshots[1]);

      const removed = await rk.snapshots.delete(snapshot.snapshot_id);
      assert.equal(removed.snapshot_id, snapshot.snapshot_id);
      assert.deepEqual([(await rejection(rk.snapshots.get(snapshot.snapshot_id))).code, (await rejection(rk.snapshots.delete(snapshot.snapshot_id))).status], ['snapshot_not_found', 404]);
      assert.equal((await rejection(restoredRoom.create({ snapshot_id: snapshot.snapshot_id }))).code, 'snapshot_not_found');
      assert.deepEqual((await rk.snapshots.list()).snapshots.map((s) => s.snapshot_id), [forked.snapshot.snapshot_id]);
    } finally {
      for (const r of [restoredRoom, ...forkRooms]) await r.delete().catch(() => {});
      for (const id of kept) await rk.snapshots.delete(id).catch(() => {});
    }
  });
});

describe('pause and resume', () => {
  it('pauses (files kept), resumes, and a command on a paused instance resumes it', async () => {
    await room.writeFile('paused.txt', 'kept');
    const paused = await room.pause({ memory: false });
    assert.equal(paused.state, 'paused');
    assert.equal(paused.pause?.memory_kept, false, 'files only, as asked');
    assert.equal((await room.pause()).state, 'paused', 'a second pause answers it as it is');
    const resumed = await room.resume();
    assert.equal(resumed.state, 'ready');
    assert.equal(resumed.pause, null);
    await room.pause();
    assert.equal((await room.exec('cat paused.txt')).result.output, 'kept');
    assert.equal((await room.get()).state, 'ready');
  });
});

describe('delete', () => {
  it('stops the instance; afterwards the room has none', async () => {
    const stopped = await room.delete();
    deleted = true;
    assert.equal(stopped.instance_id, instance.instance_id);
    assert.equal(stopped.state, 'stopped');
    assert.equal((await rejection(room.get())).code, 'instance_not_found');
    assert.equal((await rejection(room.delete())).code, 'instance_not_found');
  });
});

/** Plausible answers for the recording fetch: enough for every method to finish. */
function answerFor(method: string, url: URL, init: RequestInit | undefined): Response {
  const id = '33333333-3333-4333-8333-333333333333';
  const json = (body: unknown, status = 200) => new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });
  const path = url.pathname;
  if (path.startsWith('/vm/')) return new Response(new Uint8Array([1, 2, 3]), { headers: { 'content-type': 'application/octet-stream' } });
  if (method === 'DELETE' && /^\/api\/(profiles|keys)\//.test(path)) return new Response(null, { status: 204 });
  if (path === '/api/profiles' && method === 'GET') return json({ profiles: [{ profile_id: id, name: 'by-name', home: '/home/user' }] });
  if (path.startsWith('/api/profiles/')) return json({ profile_id: id, name: 'by-name', home: '/home/user' });
  if (path === '/api/instances') return json({ instances: [], next_cursor: null });
  if (path === '/api/snapshots') return json({ snapshots: [], next_cursor: null });
  if (path.endsWith('/terminal/ticket')) return json({ ticket: 'rkt_test', expires_at: new Date(Date.now() + 30_000).toISOString() }, 201);
  if (path.endsWith('/command')) {
    const body = JSON.parse(String(init?.body)) as { stream?: boolean; background?: boolean };
    if (body.stream) {
      const result = { command_id: id, result: { exit_code: 0, output: '' } };
      return new Response(`event: result\ndata: ${JSON.stringify(result)}\n\n`, { headers: { 'content-type': 'text/event-stream' } });
    }
    return json(body.background ? { command_id: id, state: 'running' } : { command_id: id, result: { exit_code: 0 } }, body.background ? 202 : 200);
  }
  if (path.endsWith('/stdin')) return json({ command_id: id, bytes: 0, total_bytes: 0, closed: false });
  if (/\/commands\/[^/]+(\/kill)?$/.test(path)) return json({ command_id: id, state: 'exited', output: '', output_offset: 0, next_offset: 0, result: { command_id: id } });
  if (path.includes('/file/')) return json({ file_path: '/home/user/a', content: '', encoding: 'utf-8', instance_id: id });
  return json({ instance_id: id, profile_id: id, state: 'ready', profiles: [], keys: [], commands: [], entries: [], next_cursor: null, status: 'ok' });
}

function createHashHex(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await closeServer(server);
  return port;
}

function closeServer(server: Server): Promise<void> {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}
