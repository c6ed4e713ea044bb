// The client commands of `roomkit` (create, exec, cat, put, ls, rm, status, destroy,
// snapshot, fork, snapshots),
// run as a user runs them: the real bin/roomkit.mjs as a child process, against a real
// server listening on a port, with a real gVisor instance shared by the tests.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { type AddressInfo, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';
import { BIN } from '../support/cli.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

let t: TestApp;
let org: TestOrg;
let url: string;
let instanceId: string | undefined;
let scratch: string;

interface Result {
  code: number | null;
  stdout: Buffer;
  stderr: string;
}

/** Runs `roomkit args...` with the server's address and the organization's key in its environment. */
async function roomkit(args: string[], options: { env?: NodeJS.ProcessEnv; stdin?: Buffer } = {}): Promise<Result> {
  const child = spawn(process.execPath, [BIN, ...args], {
    env: { ...process.env, ROOMKIT_URL: url, ROOMKIT_API_KEY: org.apiKey, ...options.env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const stdout: Buffer[] = [];
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => stdout.push(d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  child.stdin.end(options.stdin ?? Buffer.alloc(0));
  const [code] = (await once(child, 'close')) as [number | null];
  return { code, stdout: Buffer.concat(stdout), stderr };
}

const text = (r: Result) => r.stdout.toString('utf8');

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

before(async () => {
  t = await startTestApp({ gvisorPool: '10.223.0.0/24' });
  assert.ok('runtime' in t.services.runtime, 'the gVisor runtime is not available');
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  url = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  org = await t.newOrg();
  const profile = await t.app.inject({
    method: 'POST',
    url: '/api/profiles',
    headers: org.headers,
    payload: { name: 'cli', memory_mb: 512, disk_mb: 1024, network: { egress: 'none' }, command_timeout_s: 60 },
  });
  assert.equal(profile.statusCode, 201, profile.body);
  scratch = mkdtempSync(join(tmpdir(), 'roomkit-cli-client-'));
});

after(async () => {
  try {
    await t.closeLeavingNothing();
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
});

describe('roomkit create', () => {
  it('creates the instance, showing each state on stderr (plain lines off a terminal), and prints JSON', async () => {
    const res = await roomkit(['create', '--profile', 'cli', '--json', 'main']);
    assert.equal(res.code, 0, res.stderr);
    const instance = JSON.parse(text(res));
    assert.equal(instance.state, 'ready');
    assert.equal(instance.room_id, 'main');
    assert.match(instance.instance_id, UUID);
    instanceId = instance.instance_id;
    const lines = res.stderr.trim().split('\n');
    assert.ok(lines.length >= 2, res.stderr);
    assert.match(lines[0]!, /^main: active \(1\/7\)/);
    assert.match(lines.at(-1)!, /^main: ready \(7\/7\) in \d+\.\d s$/);
    assert.doesNotMatch(res.stderr, /\x1b\[|\r/, 'no terminal control off a terminal');
  });

  it('finds the live instance the second time, and says so in text', async () => {
    const res = await roomkit(['create', '--profile', 'cli', 'main']);
    assert.equal(res.code, 0, res.stderr);
    assert.equal(text(res), `ready: room main (profile cli), instance ${instanceId} (already running)\n`);
    assert.equal(res.stderr, '');
  });
});

describe('roomkit exec', () => {
  it('prints the output and exits with the command\'s exit code: 0, 3, 127', async () => {
    const ok = await roomkit(['exec', '--profile', 'cli', 'main', 'echo', 'hello', 'world']);
    assert.equal(ok.code, 0, ok.stderr);
    assert.equal(text(ok), 'hello world\n');
    assert.equal(ok.stderr, '');
    const three = await roomkit(['exec', '--profile', 'cli', 'main', 'echo to-stderr >&2; exit 3']);
    assert.equal(three.code, 3);
    // On stderr where the instance keeps the streams apart (its agent), on stdout where it cannot.
    assert.equal(text(three) + three.stderr, 'to-stderr\n');
    const missing = await roomkit(['exec', '--profile', 'cli', 'main', '--', 'no-such-program', '--flag']);
    assert.equal(missing.code, 127);
    assert.match(text(missing) + missing.stderr, /not found/);
  });

  it('passes options after the room on to the command, and takes --cwd, --env and --timeout before it', async () => {
    const res = await roomkit(['exec', '--profile', 'cli', '--cwd', '/tmp', '-e', 'A=1', '--env', 'B=two words', 'main', 'pwd; echo "$A $B"']);
    assert.equal(res.code, 0, res.stderr);
    assert.equal(text(res), '/tmp\n1 two words\n');
    // Everything after the room belongs to the command, options too: ls gets --json.
    const passed = await roomkit(['exec', '--profile', 'cli', 'main', 'ls', '-d', '/tmp', '--json']);
    assert.equal(passed.code, 2);
    // ls complains on stderr, which the agent keeps apart (without it, on stdout).
    assert.match(text(passed) + passed.stderr, /ls: unrecognized option '--json'/);
    const slow = await roomkit(['exec', '--profile', 'cli', '--timeout', '1', 'main', 'sleep 5']);
    assert.equal(slow.code, 124);
    assert.match(slow.stderr, /time limit/);
  });

  it('lists the files the command changed on stderr', async () => {
    const res = await roomkit(['exec', '--profile', 'cli', 'main', 'printf abc > made.txt']);
    assert.equal(res.code, 0, res.stderr);
    assert.equal(text(res), '');
    assert.match(res.stderr, /^files changed by command [0-9a-f-]{36}:\n {2}created {2}\/home\/user\/made\.txt \(3 B\)\n$/);
  });

  it('--json prints the CommandResult and still exits with the exit code', async () => {
    const res = await roomkit(['exec', '--profile', 'cli', '--json', 'main', 'echo json; rm made.txt; exit 7']);
    assert.equal(res.code, 7, res.stderr);
    const result = JSON.parse(text(res));
    assert.equal(result.instance_id, instanceId);
    assert.equal(result.command, 'echo json; rm made.txt; exit 7');
    assert.equal(result.status, 'error');
    assert.equal(result.result.exit_code, 7);
    assert.equal(result.result.output, 'json\n');
    assert.deepEqual(result.result.files_changed.map((c: { path: string; status: string }) => [c.path, c.status]), [['/home/user/made.txt', 'deleted']]);
    assert.equal(res.stderr, '');
  });

  it('streams output as the command prints it', async () => {
    const child = spawn(process.execPath, [BIN, 'exec', '--profile', 'cli', 'main', 'echo first; sleep 3; echo second'], {
      env: { ...process.env, ROOMKIT_URL: url, ROOMKIT_API_KEY: org.apiKey },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const arrivals: { data: string; at: number }[] = [];
    child.stdout.setEncoding('utf8').on('data', (data: string) => arrivals.push({ data, at: Date.now() }));
    const [code] = (await once(child, 'close')) as [number];
    assert.equal(code, 0);
    assert.equal(arrivals.map((a) => a.data).join(''), 'first\nsecond\n');
    assert.equal(arrivals[0]!.data, 'first\n', 'the first line came on its own, before the command ended');
    assert.ok(arrivals.at(-1)!.at - arrivals[0]!.at >= 2000, 'all output arrived at once');
  });
});

describe('roomkit put, cat, ls and rm', () => {
  it('cat writes a binary file\'s bytes exactly', async () => {
    const made = await roomkit(['exec', '--profile', 'cli', 'main', "printf '\\000\\001\\377\\376 binary\\n\\200' > bin.dat"]);
    assert.equal(made.code, 0, made.stderr);
    const res = await roomkit(['cat', '--profile', 'cli', 'main', 'bin.dat']);
    assert.equal(res.code, 0, res.stderr);
    assert.deepEqual(res.stdout, Buffer.from([0, 1, 0xff, 0xfe, ...Buffer.from(' binary\n'), 0x80]));
  });

  it('put uploads a local file and stdin; cat gives back the same bytes', async () => {
    const bytes = Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 31 + 7) % 256));
    const local = join(scratch, 'upload.bin');
    writeFileSync(local, bytes);
    const put = await roomkit(['put', '--profile', 'cli', 'main', local, 'up/loaded.bin']);
    assert.equal(put.code, 0, put.stderr);
    assert.equal(text(put), 'created /home/user/up/loaded.bin (4.0 KiB)\n');
    const back = await roomkit(['cat', '--profile', 'cli', 'main', '/home/user/up/loaded.bin']);
    assert.equal(back.code, 0, back.stderr);
    assert.ok(back.stdout.equals(bytes), 'cat did not give back the uploaded bytes');

    const piped = await roomkit(['put', '--profile', 'cli', '--json', 'main', '-', 'up/from-stdin.txt'], { stdin: Buffer.from('from stdin\n') });
    assert.equal(piped.code, 0, piped.stderr);
    assert.deepEqual(JSON.parse(text(piped)), { file_path: '/home/user/up/from-stdin.txt', instance_id: instanceId, status: 'created', size: 11 });
    assert.equal(text(await roomkit(['cat', '--profile', 'cli', 'main', 'up/from-stdin.txt'])), 'from stdin\n');
  });

  it('ls lists a directory; rm deletes a file; cat of a missing file fails with file_not_found', async () => {
    const ls = await roomkit(['ls', '--profile', 'cli', 'main', 'up']);
    assert.equal(ls.code, 0, ls.stderr);
    const lines = text(ls).trim().split('\n');
    assert.equal(lines.length, 2, text(ls));
    assert.match(lines[0]!, /^-rw-r--r-- +11 \d{4}-\d\d-\d\d \d\d:\d\d from-stdin\.txt$/);
    assert.match(lines[1]!, /^-rw-r--r-- 4096 \d{4}-\d\d-\d\d \d\d:\d\d loaded\.bin$/);
    const home = await roomkit(['ls', '--profile', 'cli', '--json', 'main']);
    const listing = JSON.parse(text(home));
    assert.equal(listing.path, '/home/user');
    assert.ok(listing.entries.some((e: { name: string; type: string }) => e.name === 'up' && e.type === 'directory'));

    const rm = await roomkit(['rm', '--profile', 'cli', 'main', 'up/loaded.bin']);
    assert.equal(rm.code, 0, rm.stderr);
    assert.equal(text(rm), 'deleted /home/user/up/loaded.bin\n');
    const gone = await roomkit(['cat', '--profile', 'cli', 'main', 'up/loaded.bin']);
    assert.equal(gone.code, 1);
    assert.equal(gone.stdout.length, 0);
    assert.match(gone.stderr, /^roomkit: error file_not_found: /);
  });
});

describe('errors', () => {
  it('without a key: says how to get one and exits non-zero, without asking the server', async () => {
    const res = await roomkit(['status', '--profile', 'cli', 'main'], { env: { ROOMKIT_API_KEY: '' } });
    assert.equal(res.code, 2);
    assert.equal(res.stdout.length, 0);
    assert.equal(res.stderr, 'roomkit: error missing_api_key: no API key: set ROOMKIT_API_KEY or pass --api-key (`roomkit keys create --org NAME` makes one)\n');
    const exec = await roomkit(['exec', '--profile', 'cli', 'main', 'true'], { env: { ROOMKIT_API_KEY: '' } });
    assert.equal(exec.code, 2, 'a usage error exits 2, exec\'s too');
    assert.match(exec.stderr, /^roomkit: error missing_api_key: /);
  });

  it('a wrong key, an empty room or an unknown profile: the API\'s code and message, one line, non-zero', async () => {
    const wrong = await roomkit(['status', '--profile', 'cli', 'main'], { env: { ROOMKIT_API_KEY: `rk_test_${'0'.repeat(32)}` } });
    assert.equal(wrong.code, 1);
    assert.match(wrong.stderr, /^roomkit: error invalid_api_key: .+\n$/);
    const viaFlag = await roomkit(['status', '--profile', 'cli', '--api-key', `rk_test_${'1'.repeat(32)}`, 'main']);
    assert.match(viaFlag.stderr, /^roomkit: error invalid_api_key: /);
    const empty = await roomkit(['exec', '--profile', 'cli', 'nobody-here', 'true']);
    assert.equal(empty.code, 125);
    assert.match(empty.stderr, /^roomkit: error instance_not_found: .*nobody-here/);
    const profile = await roomkit(['status', '--profile', 'nope', '--json', 'main']);
    assert.equal(profile.code, 1);
    assert.equal(JSON.parse(text(profile)).error, 'profile_not_found');
    assert.match(profile.stderr, /^roomkit: error profile_not_found: no profile named "nope"/);
  });

  it('a server that is not there: connection_failed', async () => {
    const port = await freePort();
    const res = await roomkit(['status', 'main'], { env: { ROOMKIT_URL: `http://127.0.0.1:${port}` } });
    assert.equal(res.code, 1);
    assert.match(res.stderr, new RegExp(`^roomkit: error connection_failed: cannot reach roomkit at http://127\\.0\\.0\\.1:${port}.*ECONNREFUSED`));
  });
});

describe('roomkit status and destroy', () => {
  it('status shows the room\'s instance, and without a room the newest instances', async () => {
    const one = await roomkit(['status', '--profile', 'cli', 'main']);
    assert.equal(one.code, 0, one.stderr);
    assert.match(text(one), new RegExp(`^room +main\\nprofile +\\S+\\ninstance +${instanceId}\\nstate +ready\\n`));
    const all = await roomkit(['status', '--json']);
    assert.equal(all.code, 0, all.stderr);
    assert.deepEqual(JSON.parse(text(all)).instances.map((i: { instance_id: string }) => i.instance_id), [instanceId]);
    const table = await roomkit(['status']);
    // Profiles by name, as the other commands take them.
    assert.match(text(table), new RegExp(`^ROOM +STATE +INSTANCE +PROFILE +CREATED\\nmain +ready +${instanceId} +cli `));
  });

  it('destroy stops the instance; a second destroy succeeds saying there was nothing; status then says how to create one', async () => {
    const res = await roomkit(['destroy', '--profile', 'cli', 'main']);
    assert.equal(res.code, 0, res.stderr);
    assert.equal(text(res), `stopped: room main, instance ${instanceId}\n`);
    const again = await roomkit(['destroy', '--profile', 'cli', 'main']);
    assert.equal(again.code, 0, again.stderr);
    assert.equal(again.stdout.length, 0);
    assert.equal(again.stderr, 'room main has no instance: nothing to destroy\n');
    const after = await roomkit(['status', '--profile', 'cli', 'main']);
    assert.equal(after.code, 1);
    // The advice is a roomkit command with names, not a REST call with UUIDs.
    assert.equal(after.stderr, 'roomkit: error instance_not_found: no instance in room "main"; create one with `roomkit create --profile cli main`\n');
  });

  it('a usage error exits 2', async () => {
    const res = await roomkit(['exec', '--profile', 'cli']);
    assert.equal(res.code, 2);
    assert.match(res.stderr, /missing required argument/);
  });
});

describe('roomkit snapshot, create --from-snapshot, fork and snapshots', () => {
  const cli = (...args: string[]) => roomkit([args[0]!, '--profile', 'cli', ...args.slice(1)]);

  it('saves a room, starts another from it, forks it into two rooms that change apart, lists, shows and deletes', async () => {
    const rooms = ['snap-src', 'restored', 'fork-a', 'fork-b'];
    const snapshotIds: string[] = [];
    try {
      const source = await cli('create', '--json', 'snap-src');
      assert.equal(source.code, 0, source.stderr);
      const sourceId = JSON.parse(text(source)).instance_id as string;
      assert.equal((await cli('exec', 'snap-src', 'echo one > state.txt')).code, 0);

      const taken = await cli('snapshot', '--name', 'first', 'snap-src');
      assert.equal(taken.code, 0, taken.stderr);
      const id = new RegExp(`^ready: snapshot (\\S+) "first" of room snap-src, instance ${sourceId} \\(files and memory, \\d+(\\.\\d)? (bytes|KiB|MiB) on disk\\)\\n$`).exec(text(taken))?.[1];
      assert.ok(id !== undefined && UUID.test(id), text(taken));
      snapshotIds.push(id);
      assert.equal(taken.stderr, `start an instance from it with \`roomkit create --profile cli --from-snapshot ${id} ROOM\`\n`);
      assert.equal((await cli('exec', 'snap-src', 'echo changed > state.txt')).code, 0);

      const restored = await cli('create', '--from-snapshot', id, 'restored');
      assert.equal(restored.code, 0, restored.stderr);
      assert.match(text(restored), new RegExp(`^ready: room restored \\(profile cli\\), instance ${UUID.source.slice(1, -1)} from snapshot ${id} in \\d+\\.\\d s\\n$`));
      assert.equal(text(await cli('cat', 'restored', 'state.txt')), 'one\n', 'the snapshot\'s files, not the later change');

      const forked = await cli('fork', 'snap-src', 'fork-a', 'fork-b', '--keep-snapshot');
      assert.equal(forked.code, 0, forked.stderr);
      const lines = text(forked).trim().split('\n');
      assert.equal(lines.length, 2, text(forked));
      assert.match(lines[0]!, /^ready: room fork-a, instance \S+$/);
      assert.match(lines[1]!, /^ready: room fork-b, instance \S+$/);
      const kept = /^kept snapshot (\S+): `roomkit create --profile cli --from-snapshot \1 ROOM` starts more, `roomkit snapshots rm \1` deletes it\n$/.exec(forked.stderr)?.[1];
      assert.ok(kept !== undefined, forked.stderr);
      snapshotIds.push(kept);
      assert.equal((await cli('exec', 'fork-a', 'echo two > state.txt')).code, 0);
      assert.equal(text(await cli('cat', 'fork-a', 'state.txt')), 'two\n');
      assert.equal(text(await cli('cat', 'fork-b', 'state.txt')), 'changed\n', 'a change in one copy is absent in the other');
      const occupied = await cli('fork', 'snap-src', 'fork-a');
      assert.equal(occupied.code, 1);
      assert.match(occupied.stderr, /^roomkit: error room_occupied: room "fork-a" already has an instance \([^)]*\); `roomkit destroy --profile cli fork-a` first, or use another room\n$/);

      const table = await roomkit(['snapshots']);
      assert.equal(table.code, 0, table.stderr);
      const rows = text(table).trim().split('\n');
      assert.match(rows[0]!, /^SNAPSHOT +NAME +STATE +ROOM +PROFILE +SIZE +CREATED$/);
      assert.equal(rows.length, 3, text(table));
      // A fork's own snapshot is named after the room it was made of.
      assert.match(rows[1]!, new RegExp(`^${kept} +fork of snap-src +ready +snap-src +cli +\\d+\\.\\d (B|KiB|MiB) +\\d{4}-`));
      assert.match(rows[2]!, new RegExp(`^${id} +first +ready +snap-src +cli +\\d+\\.\\d (B|KiB|MiB) +\\d{4}-`));
      const listed = await roomkit(['snapshots', 'list', '--json', '--instance', sourceId]);
      assert.deepEqual(JSON.parse(text(listed)).snapshots.map((s: { snapshot_id: string }) => s.snapshot_id), [kept, id]);
      const shown = await roomkit(['snapshots', 'show', id]);
      assert.equal(shown.code, 0, shown.stderr);
      assert.match(text(shown), new RegExp(`^snapshot +${id}\\nname +first\\nstate +ready\\ntaken of +room snap-src \\(profile \\S+\\), instance ${sourceId}\\n`));

      const removed = await roomkit(['snapshots', 'rm', id]);
      assert.equal(removed.code, 0, removed.stderr);
      assert.equal(text(removed), `deleted snapshot ${id}\n`);
      const again = await roomkit(['snapshots', 'rm', id]);
      assert.equal(again.code, 1);
      assert.equal(again.stderr, `roomkit: error snapshot_not_found: no snapshot ${id} in this organization; \`roomkit snapshots\` lists them\n`);
      const gone = await cli('create', '--from-snapshot', id, 'from-gone');
      assert.equal(gone.code, 1);
      assert.match(gone.stderr, /^roomkit: error snapshot_not_found: /);
      assert.deepEqual(JSON.parse(text(await roomkit(['snapshots', '--json']))).snapshots.map((s: { snapshot_id: string }) => s.snapshot_id), [kept]);
    } finally {
      for (const room of rooms) await cli('destroy', room);
      for (const id of snapshotIds) await roomkit(['snapshots', 'rm', id]);
    }
  });

  it('a usage error exits 2: fork without a new room, snapshots rm without an id', async () => {
    const fork = await roomkit(['fork', 'snap-src']);
    assert.equal(fork.code, 2);
    assert.match(fork.stderr, /missing required argument 'new-rooms'/);
    const rm = await roomkit(['snapshots', 'rm']);
    assert.equal(rm.code, 2);
    assert.match(rm.stderr, /missing required argument 'id'/);
  });
});
