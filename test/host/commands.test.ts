// Commands on real gVisor instances through the HTTP API: output, exit codes,
// files_changed, time limits, output caps, background work, concurrency, sudo and the
// command history. One instance serves the tests that cannot disturb each other.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';

let t: TestApp;
let org: TestOrg;
let profileId: string;
let instanceId: string;

const room = (name = 'main') => `/api/profile/${profileId}/room/${name}`;

interface Change {
  path: string;
  status: string;
  size?: number;
  mime_type?: string;
  public_url?: string;
}

async function command(payload: Record<string, unknown>, name = 'main') {
  return t.app.inject({ method: 'POST', url: `${room(name)}/command`, headers: org.headers, payload });
}

/** Runs a command that must be answered with a CommandResult; returns its body. */
async function run(cmd: string, extra: Record<string, unknown> = {}) {
  const res = await command({ command: cmd, ...extra });
  assert.equal(res.statusCode, 200, res.body);
  return res.json();
}

const changed = (body: { result: { files_changed: Change[] } }) =>
  Object.fromEntries(body.result.files_changed.map((c) => [c.path, c.status]));

before(async () => {
  t = await startTestApp({ gvisorPool: '10.220.0.0/24' });
  assert.ok('runtime' in t.services.runtime, 'the gVisor runtime is not available');
  org = await t.newOrg();
  profileId = await t.createProfile(org, { name: 'cmd', memory_mb: 512, disk_mb: 1024, network: { egress: 'none' }, command_timeout_s: 60, env: { PROFILE_VAR: 'from-profile' } });
  const created = await t.app.inject({ method: 'POST', url: room(), headers: org.headers });
  assert.equal(created.statusCode, 201, created.body);
  instanceId = created.json().instance_id;
});

after(async () => {
  await t.closeLeavingNothing();
});

describe('a command', () => {
  it('answers the spec\'s CommandResult: success with exit code 0', async () => {
    const body = await run('echo hello');
    assert.equal(body.instance_id, instanceId);
    assert.equal(body.command, 'echo hello');
    assert.equal(body.status, 'success');
    assert.equal(body.result.output, 'hello\n');
    assert.equal(body.result.exit_code, 0);
    assert.deepEqual(body.result.files_changed, []);
    assert.equal(body.result.timed_out, false);
  });

  it('reports failing commands as 200 with status error and the exit code: 1, 127, 130', async () => {
    for (const [cmd, code] of [['false', 1], ['no-such-program', 127], ['kill -INT $$', 130], ['exit 42', 42]] as const) {
      const body = await run(cmd);
      assert.equal(body.result.exit_code, code, cmd);
      assert.equal(body.status, 'error', cmd);
    }
  });

  it('carries the failure text in output, with stderr interleaved with stdout in order', async () => {
    const missing = await run('ls /nonexistent-dir');
    assert.equal(missing.result.exit_code, 2);
    assert.match(missing.result.output, /No such file or directory/);
    // The agent reads stdout and stderr from two pipes: writes to the two that come closer
    // together than it reads may be swapped in output (docs/api.md), so these are apart.
    const order = await run('echo one; sleep 0.3; echo two >&2; sleep 0.3; echo three; sleep 0.3; echo four >&2');
    assert.equal(order.result.output, 'one\ntwo\nthree\nfour\n');
    // Quick writes: each stream is whole and in its own order.
    const quick = await run('echo one; echo two >&2; echo three; echo four >&2');
    const lines = quick.result.output.split('\n');
    assert.deepEqual([...lines].sort(), ['', 'four', 'one', 'three', 'two']);
    assert.ok(lines.indexOf('one') < lines.indexOf('three') && lines.indexOf('two') < lines.indexOf('four'), quick.result.output);
    const notFound = await run('no-such-program');
    assert.match(notFound.result.output, /not found/);
  });

  it('runs as the VM user in its home with the profile\'s and the request\'s environment', async () => {
    const body = await run('id -un; pwd; echo "$PROFILE_VAR $EXTRA"', { env: { EXTRA: 'from-request' } });
    assert.equal(body.result.output, 'user\n/home/user\nfrom-profile from-request\n');
    const cwd = await run('mkdir -p work/sub && cd work/sub && pwd');
    assert.equal(cwd.result.output, '/home/user/work/sub\n');
    const inCwd = await run('pwd', { cwd: 'work/sub' });
    assert.equal(inCwd.result.output, '/home/user/work/sub\n');
    const badCwd = await run('pwd', { cwd: '/no/such/dir' });
    assert.notEqual(badCwd.result.exit_code, 0);
    assert.match(badCwd.result.output, /can't cd|No such file/);
  });

  it('has no privileges of its own: the first shell cannot write root\'s files', async () => {
    const body = await run('grep CapEff /proc/$$/status; echo x >> /etc/hostname');
    assert.match(body.result.output, /CapEff:\s+0000000000000000/);
    assert.match(body.result.output, /Permission denied/);
    assert.notEqual(body.result.exit_code, 0);
  });

  it('runs chains, pipes and redirects', async () => {
    const body = await run('cd /tmp && echo abc > chain.txt && cat chain.txt | tr a-z A-Z >> chain.txt; cat chain.txt; rm chain.txt');
    assert.equal(body.result.output, 'abc\nABC\n');
    assert.equal(body.status, 'success');
  });
});

describe('files_changed', () => {
  it('lists created, modified and deleted files in the home directory and /tmp, sorted, with size, type and URL', async () => {
    await run('mkdir -p proj && echo old > proj/keep.txt && echo bye > proj/gone.txt');
    const body = await run('echo new >> proj/keep.txt; rm proj/gone.txt; printf "%s" "{}" > proj/data.json; echo t > /tmp/t.log');
    const changes: Change[] = body.result.files_changed;
    assert.deepEqual(
      changes.map((c) => [c.path, c.status]),
      [
        ['/home/user/proj/data.json', 'created'],
        ['/home/user/proj/gone.txt', 'deleted'],
        ['/home/user/proj/keep.txt', 'modified'],
        ['/tmp/t.log', 'created'],
      ],
    );
    const json = changes[0];
    assert.equal(json?.size, 2);
    assert.equal(json?.mime_type, 'application/json');
    assert.equal(json?.public_url, `/vm/${instanceId}/file/home/user/proj/data.json`);
    const keep = changes[2];
    assert.equal(keep?.size, 8);
    assert.equal(changes[1]?.size, undefined, 'a deleted file has no size');
    assert.equal(body.result.files_changed_total, 4);
    assert.equal(body.result.files_changed_truncated, false);
    // The default method where the kernel allows it (change-tracking.test.ts compares it with the walk).
    assert.equal(body.result.files_changed_method, 'fanotify');
  });

  it('leaves out a file created and deleted within the command, and lists a same-content rewrite as modified', async () => {
    await run('echo same > same.txt');
    const body = await run('echo tmp > fleeting.txt; rm fleeting.txt; sleep 0.01; echo same > same.txt');
    assert.deepEqual(changed(body), { '/home/user/same.txt': 'modified' });
  });

  it('tells image files from new ones under sudo: /etc files modified and deleted, new ones created', async () => {
    const body = await run('echo "# roomkit" | sudo tee -a /etc/motd >/dev/null && sudo rm /etc/issue && echo x | sudo tee /etc/roomkit.conf >/dev/null');
    assert.equal(body.result.exit_code, 0, body.result.output);
    assert.deepEqual(changed(body), { '/etc/issue': 'deleted', '/etc/motd': 'modified', '/etc/roomkit.conf': 'created' });
    // Deleting a whole image directory lists each of its files.
    const dir = await run('ls /usr/share/doc/jq | wc -l; sudo rm -rf /usr/share/doc/jq');
    const count = Number(dir.result.output.trim());
    const deleted = dir.result.files_changed.filter((c: Change) => c.path.startsWith('/usr/share/doc/jq/'));
    assert.ok(count > 0 && deleted.length > 0 && deleted.every((c: Change) => c.status === 'deleted'), JSON.stringify(dir.result));
  });

  it('types files by extension or, without one, by their first bytes (a PNG made inside)', async () => {
    const png = '89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8cfc0f01f0005000201a3a4e05a0000000049454e44ae426082';
    const body = await run(`python3 -c "import sys; sys.stdout.buffer.write(bytes.fromhex('${png}'))" > image-no-ext; printf 'plain text' > notes`);
    const types = Object.fromEntries(body.result.files_changed.map((c: Change) => [c.path, c.mime_type]));
    assert.equal(types['/home/user/image-no-ext'], 'image/png');
    assert.equal(types['/home/user/notes'], 'text/plain');
  });

  it('caps the list at 1000 entries and reports the total: 10,000 files in one command', async () => {
    const body = await run('mkdir many && cd many && seq 1 10000 | xargs touch && ls | wc -l', { timeout_s: 60 });
    assert.equal(body.result.output.trim(), '10000');
    assert.equal(body.result.files_changed.length, 1000);
    assert.equal(body.result.files_changed_total, 10000);
    assert.equal(body.result.files_changed_truncated, true);
    const paths = body.result.files_changed.map((c: Change) => c.path);
    assert.deepEqual(paths, [...paths].sort());
    // The next command pays for a larger writable layer but reports only its own change.
    const next = await run('touch many/1');
    assert.deepEqual(changed(next), { '/home/user/many/1': 'modified' });
    await run('rm -rf many');
  });

  it('installs a package as root: dpkg through sudo, with the package\'s files listed', async () => {
    const build = await run(
      'set -e; d=$(mktemp -d); mkdir -p $d/pkg/DEBIAN $d/pkg/usr/bin; ' +
        'printf "Package: rk-hello\\nVersion: 1.0\\nArchitecture: all\\nMaintainer: roomkit\\nDescription: test\\n" > $d/pkg/DEBIAN/control; ' +
        'printf "#!/bin/sh\\necho hello from a package\\n" > $d/pkg/usr/bin/rk-hello; chmod 755 $d/pkg/usr/bin/rk-hello; ' +
        'dpkg-deb --build $d/pkg /tmp/rk-hello.deb >/dev/null',
    );
    assert.equal(build.result.exit_code, 0, build.result.output);
    const install = await run('sudo dpkg -i /tmp/rk-hello.deb >/dev/null && rk-hello');
    assert.equal(install.result.exit_code, 0, install.result.output);
    assert.match(install.result.output, /hello from a package/);
    assert.equal(changed(install)['/usr/bin/rk-hello'], 'created');
  });

  it('installs through apt without a TIOCSCTTY error, and has package lists for `sudo apt-get install NAME` at once', async () => {
    // The package built by the test before; apt runs dpkg as it would for a download (no
    // network here: the instance's apt source is not on this machine).
    const apt = await run('sudo apt-get remove -y rk-hello >/dev/null 2>&1; sudo apt-get install -y /tmp/rk-hello.deb 2>&1 && rk-hello');
    assert.equal(apt.result.exit_code, 0, apt.result.output);
    assert.match(apt.result.output, /hello from a package/);
    assert.doesNotMatch(apt.result.output, /TIOCSCTTY|Operation not permitted/);
    const lists = await run('ls /var/lib/apt/lists | grep -c _Packages; apt-cache policy bash | grep -c Candidate');
    const [packages, candidates] = lists.result.output.trim().split('\n').map(Number);
    assert.ok(packages! > 0, `no package lists in the image: ${lists.result.output}`);
    assert.equal(candidates, 1);
  });
});

describe('limits of a command', () => {
  it('kills the whole process tree at the deadline, a SIGTERM-ignoring child too, and keeps the partial output', async () => {
    const started = Date.now();
    const body = await run('echo started; sh -c \'trap "" TERM; sleep 1234\' & sh -c \'trap "" TERM HUP; setsid sleep 1235\' & sleep 1236; echo never', { timeout_s: 2 });
    assert.ok(Date.now() - started < 15_000, 'the deadline was not kept');
    assert.equal(body.result.exit_code, 124);
    assert.equal(body.result.timed_out, true);
    assert.equal(body.status, 'error');
    assert.equal(body.result.output, 'started\n');
    const left = await run('ps -eo args | grep -c "^sleep 123[456]" || true');
    assert.equal(left.result.output.trim(), '0');
  });

  it('caps huge output, keeping its start and end, and says how much there was', async () => {
    const body = await run('echo BEGIN; head -c 5000000 /dev/zero | tr "\\0" x; echo; echo END');
    const seen = `exit ${body.result.exit_code}, ${body.result.output_bytes} bytes: ${body.result.output.slice(0, 200)}`;
    assert.equal(body.result.output_truncated, true, seen);
    assert.ok(body.result.output_bytes > 5_000_000);
    assert.ok(Buffer.byteLength(body.result.output) < 1024 * 1024 + 200, `output of ${Buffer.byteLength(body.result.output)} bytes`);
    assert.match(body.result.output, /^BEGIN\n/);
    assert.match(body.result.output, /END\n$/);
    assert.match(body.result.output, /bytes of output omitted/);
  });

  it('answers at once when work is left in the background, which keeps running', async () => {
    const started = Date.now();
    const body = await run('nohup sleep 300 >/dev/null 2>&1 & (sleep 301 &) ; echo launched');
    assert.ok(Date.now() - started < 5000, `took ${Date.now() - started} ms`);
    assert.equal(body.result.output, 'launched\n');
    // Without redirection the background job holds the output pipe; the answer still comes.
    const held = await run('sleep 302 & echo also');
    assert.equal(held.result.output, 'also\n');
    const check = await run('sleep 0.5; ps -eo args | grep -c "^sleep 30[012]"');
    assert.equal(check.result.output.trim(), '3');
  });

  it('runs concurrent commands side by side, each with its own output and exit code', async () => {
    const started = Date.now();
    const results = await Promise.all([1, 2, 3, 4].map((n) => run(`sleep 2; echo job-${n}; exit ${n}`)));
    results.forEach((body, i) => {
      assert.equal(body.result.output, `job-${i + 1}\n`);
      assert.equal(body.result.exit_code, i + 1);
    });
    assert.ok(Date.now() - started < 7000, `four 2 s commands took ${Date.now() - started} ms: not concurrent`);
  });

  it('refuses a time limit above the profile\'s', async () => {
    const res = await command({ command: 'true', timeout_s: 61 });
    assert.equal(res.statusCode, 400);
    assert.match(res.json().message, /command_timeout_s/);
  });
});

describe('bad requests', () => {
  it('answers 400 with the Error body for an empty, non-string, oversized or extended command', async () => {
    const cases: [unknown, RegExp][] = [
      [{ command: '' }, /command/],
      [{ command: '   ' }, /empty/],
      [{ command: 42 }, /command/],
      [{}, /command/],
      [{ command: 'true', shell: 'bash' }, /shell/],
      [{ command: 'x'.repeat(70_000) }, /command/],
      [{ command: 'true', env: { ROOMKIT_COMMAND_ID: 'x' } }, /reserved/],
    ];
    for (const [payload, message] of cases) {
      const res = await t.app.inject({ method: 'POST', url: `${room()}/command`, headers: org.headers, payload: payload as object });
      assert.equal(res.statusCode, 400, JSON.stringify(payload).slice(0, 80));
      assert.match(res.json().error, /validation_error/);
      assert.match(res.json().message, message);
    }
  });

  it('answers 404 instance_not_found for a room without an instance', async () => {
    const res = await command({ command: 'true' }, 'empty-room');
    assert.equal(res.statusCode, 404);
    assert.equal(res.json().error, 'instance_not_found');
  });

  it('answers 409 instance_not_ready while the instance is starting', async () => {
    const starting = await t.app.inject({ method: 'POST', url: room('starting'), headers: org.headers, payload: { wait: false } });
    assert.equal(starting.statusCode, 202);
    const res = await command({ command: 'true' }, 'starting');
    assert.equal(res.statusCode, 409);
    assert.equal(res.json().error, 'instance_not_ready');
    assert.match(res.json().message, /poll GET/);
    await t.app.inject({ method: 'DELETE', url: room('starting'), headers: org.headers });
  });
});

describe('the command history', () => {
  it('records every command with its exit code and lists them newest first, page by page', async () => {
    await run('echo first-of-history > history-a.txt; echo more > history-b.txt');
    await run('exit 7');
    const res = await t.app.inject({ method: 'GET', url: `${room()}/commands?limit=2`, headers: org.headers });
    assert.equal(res.statusCode, 200, res.body);
    const page = res.json();
    assert.deepEqual(page.commands.map((c: { command: string }) => c.command), ['exit 7', 'echo first-of-history > history-a.txt; echo more > history-b.txt']);
    assert.equal(page.commands[0].exit_code, 7);
    // A count, under the name a CommandResult gives its count (files_changed is a list there).
    assert.deepEqual(page.commands.map((c: { files_changed_total: number }) => c.files_changed_total), [0, 2]);
    assert.equal('files_changed' in page.commands[0], false);
    assert.equal(page.commands[0].state, 'exited');
    assert.equal(page.commands[0].instance_id, instanceId);
    assert.ok(page.next_cursor);
    const next = await t.app.inject({ method: 'GET', url: `${room()}/commands?limit=2&cursor=${page.next_cursor}`, headers: org.headers });
    assert.equal(next.json().commands.length, 2);
    const timedOut = await t.services.db.selectFrom('commands').select('state').where('command', 'like', 'echo started;%').executeTakeFirst();
    assert.equal(timedOut?.state, 'timed_out');
  });
});
