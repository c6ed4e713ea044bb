// E2B's own SDK (the `e2b` package from npm), pointed at a real roomkit listening on a
// port with real gVisor instances, as a team's E2B code would be: only its API URL,
// sandbox URL and key changed. One sandbox serves the tests of commands and files;
// lifecycle tests make their own.
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { CommandExitError, NotFoundError, Sandbox, type SandboxOpts } from 'e2b';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';
import { rawGet } from '../support/raw-get.ts';
import { untilTrue } from '../support/until.ts';

const PROFILE = 'e2b-host';
/** roomkit's preview domain, which sandboxes name (getHost). */
const DOMAIN = 'e2b-preview.test';

let t: TestApp;
let org: TestOrg;
let opts: SandboxOpts & { apiKey: string; apiUrl: string; sandboxUrl: string };
let sbx: Sandbox;
let base: string;
const made: string[] = [];

async function create(more: SandboxOpts = {}, template = PROFILE): Promise<Sandbox> {
  const sandbox = await Sandbox.create(template, { ...opts, ...more });
  made.push(sandbox.sandboxId);
  return sandbox;
}

before(async () => {
  t = await startTestApp({ gvisorPool: '10.234.128.0/25', config: { previewDomain: DOMAIN } });
  assert.ok('runtime' in t.services.runtime, 'the gVisor runtime is not available');
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  org = await t.newOrg();
  await t.createProfile(org, { name: PROFILE, memory_mb: 512, disk_mb: 1024, network: { egress: 'none' }, command_timeout_s: 60 });
  opts = { apiKey: org.apiKey, apiUrl: `${base}/e2b`, sandboxUrl: `${base}/e2b/envd` };
  sbx = await create({ metadata: { suite: 'e2b-host' }, envs: { FROM_CREATE: 'created' } });
});

after(async () => {
  try {
    for (const id of made) await Sandbox.kill(id, opts).catch(() => {});
    // Checks that nothing of the sandboxes is left on the host.
    await t.closeLeavingNothing();
  } catch (err) {
    console.error(`e2b-sdk test: sandboxes ${made.join(', ')}, data directory ${t.dataDir}`);
    throw err;
  }
});

describe('the control API through the SDK', () => {
  it('creates a sandbox that REST sees as the same instance, in a room named e2b-…', async () => {
    const info = await Sandbox.getInfo(sbx.sandboxId, opts);
    assert.equal(info.state, 'running');
    assert.equal(info.name, PROFILE);
    assert.deepEqual(info.metadata, { suite: 'e2b-host' });
    assert.ok(info.endAt.getTime() > Date.now() + 200_000, `a create without a timeout gets the SDK's 300 s: ${info.endAt.toISOString()}`);
    const rest = await t.app.inject({ method: 'GET', url: `/api/instances?limit=50`, headers: org.headers });
    const instance = (rest.json() as { instances: { instance_id: string; room_id: string; state: string }[] }).instances.find((i) => i.instance_id === sbx.sandboxId);
    assert.ok(instance, rest.body);
    assert.match(instance.room_id, /^e2b-[0-9a-f]{12}$/);
    assert.equal(instance.state, 'ready');
  });

  it('lists sandboxes by metadata and state, a page at a time', async () => {
    const other = await create({ metadata: { suite: 'e2b-host', second: 'yes' } });
    const mine = await Sandbox.list({ ...opts, query: { metadata: { second: 'yes' } } }).nextItems();
    assert.deepEqual(mine.map((s) => s.sandboxId), [other.sandboxId]);
    const paginator = Sandbox.list({ ...opts, query: { state: ['running'] }, limit: 1 });
    const first = await paginator.nextItems();
    assert.equal(first.length, 1);
    assert.ok(paginator.hasNext, 'a second page');
    const second = await paginator.nextItems();
    assert.deepEqual(new Set([...first, ...second].map((s) => s.sandboxId)), new Set([sbx.sandboxId, other.sandboxId]));
    assert.equal(await other.kill(), true);
    assert.equal(await other.isRunning(), false);
    await assert.rejects(Sandbox.getInfo(other.sandboxId, opts), NotFoundError);
    assert.equal(await Sandbox.kill(other.sandboxId, opts), false, 'a second kill finds nothing');
  });

  it('sets a timeout: the deadline moves both ways', async () => {
    await sbx.setTimeout(120_000);
    const shorter = (await sbx.getInfo()).endAt.getTime();
    assert.ok(Math.abs(shorter - (Date.now() + 120_000)) < 10_000, new Date(shorter).toISOString());
    await sbx.setTimeout(600_000);
    assert.ok((await sbx.getInfo()).endAt.getTime() > shorter + 400_000);
  });

  it('refuses a template that is no profile of the organization', async () => {
    await assert.rejects(Sandbox.create('no-such-profile', opts), /404|no template/);
  });
});

describe('commands through the SDK', () => {
  it('runs in the foreground with stdout, stderr and the callbacks, as the default user under bash -l', async () => {
    const seen: string[] = [];
    const result = await sbx.commands.run('echo out; echo err >&2; whoami; echo $0', { onStdout: (d) => void seen.push(d) });
    assert.equal(result.exitCode, 0);
    assert.equal(result.stdout, 'out\nuser\n/bin/bash\n');
    assert.equal(result.stderr, 'err\n');
    assert.equal(seen.join(''), result.stdout);
  });

  it('raises CommandExitError for a non-zero exit, with its code and output', async () => {
    await assert.rejects(sbx.commands.run('echo failing >&2; exit 3'), (err: unknown) => {
      assert.ok(err instanceof CommandExitError, String(err));
      assert.equal(err.exitCode, 3);
      assert.equal(err.stderr, 'failing\n');
      return true;
    });
  });

  it('gives env vars (the create\'s and the command\'s) and a working directory', async () => {
    const result = await sbx.commands.run('echo "$FROM_CREATE $FROM_RUN"; pwd', { envs: { FROM_RUN: 'ran' }, cwd: '/tmp' });
    assert.equal(result.stdout, 'created ran\n/tmp\n');
  });

  it('runs in the background: listed while it runs, takes stdin, is waited for', async () => {
    const handle = await sbx.commands.run('read line; echo "got $line"', { background: true, stdin: true });
    const listed = await sbx.commands.list();
    assert.ok(listed.some((p) => p.pid === handle.pid), JSON.stringify(listed));
    await sbx.commands.sendStdin(handle.pid, 'hello\n');
    const result = await handle.wait();
    assert.equal(result.stdout, 'got hello\n');
    assert.ok(!(await sbx.commands.list()).some((p) => p.pid === handle.pid), 'gone from the list once it ended');
  });

  it('runs as root when asked, through the image\'s sudo', async () => {
    const result = await sbx.commands.run('whoami; echo "$FROM_RUN"', { user: 'root', envs: { FROM_RUN: 'kept' } });
    assert.equal(result.stdout, 'root\nkept\n');
  });

  it('reconnects to a running command by pid: its output so far, then the rest', async () => {
    const handle = await sbx.commands.run('echo before; read go; echo after', { background: true, stdin: true });
    await untilTrue('the first line', () => handle.stdout.includes('before'));
    const again = await sbx.commands.connect(handle.pid);
    await sbx.commands.sendStdin(handle.pid, 'x\n');
    const result = await again.wait();
    assert.equal(result.stdout, 'before\nafter\n');
  });

  it('kills a background command', async () => {
    const handle = await sbx.commands.run('sleep 600', { background: true });
    assert.equal(await sbx.commands.kill(handle.pid), true);
    await assert.rejects(handle.wait(), CommandExitError);
  });
});

describe('files through the SDK', () => {
  it('writes, reads, and tells whether a file exists', async () => {
    const written = await sbx.files.write('/home/user/notes/a.txt', 'first\n');
    assert.equal(written.path, '/home/user/notes/a.txt');
    assert.equal(await sbx.files.read('/home/user/notes/a.txt'), 'first\n');
    assert.equal(await sbx.files.read('notes/a.txt'), 'first\n', 'a relative path is under the home directory');
    assert.equal(await sbx.files.exists('/home/user/notes/a.txt'), true);
    assert.equal(await sbx.files.exists('/home/user/notes/none.txt'), false);
    const owner = await sbx.commands.run('stat -c %U /home/user/notes/a.txt');
    assert.equal(owner.stdout, 'user\n');
  });

  it('writes several files in one upload, and reads one gzipped', async () => {
    await sbx.files.write([
      { path: '/home/user/many/one.txt', data: 'one' },
      { path: '/home/user/many/two.txt', data: 'two' },
    ]);
    assert.equal(await sbx.files.read('/home/user/many/two.txt', { gzip: true }), 'two');
    assert.equal((await sbx.commands.run('cat /home/user/many/one.txt')).stdout, 'one');
  });

  it('makes directories, lists them with depth, renames, gives info, and removes', async () => {
    assert.equal(await sbx.files.makeDir('/home/user/tree/inner'), true);
    assert.equal(await sbx.files.makeDir('/home/user/tree/inner'), false, 'an existing directory is no new one');
    await sbx.files.write('/home/user/tree/inner/leaf.txt', 'leaf');
    const shallow = await sbx.files.list('/home/user/tree');
    assert.deepEqual(shallow.map((e) => [e.name, e.type]), [['inner', 'dir']]);
    const deep = await sbx.files.list('/home/user/tree', { depth: 2 });
    assert.deepEqual(deep.map((e) => e.path).sort(), ['/home/user/tree/inner', '/home/user/tree/inner/leaf.txt']);
    const moved = await sbx.files.rename('/home/user/tree/inner/leaf.txt', '/home/user/tree/leaf2.txt');
    assert.equal(moved.path, '/home/user/tree/leaf2.txt');
    const info = await sbx.files.getInfo('/home/user/tree/leaf2.txt');
    assert.equal(info.type, 'file');
    assert.equal(info.size, 4);
    await sbx.files.remove('/home/user/tree/leaf2.txt');
    assert.equal(await sbx.files.exists('/home/user/tree/leaf2.txt'), false);
    await sbx.files.remove('/home/user/tree');
    assert.equal(await sbx.files.exists('/home/user/tree'), false);
  });

  it("makes, renames and removes through the instance's agent, not as commands of the instance", async () => {
    const { instances } = (await t.app.inject({ method: 'GET', url: '/api/instances?limit=50', headers: org.headers })).json() as { instances: { instance_id: string; profile_id: string; room_id: string }[] };
    const instance = instances.find((i) => i.instance_id === sbx.sandboxId)!;
    const commands = async () => {
      const res = await t.app.inject({ method: 'GET', url: `/api/profile/${instance.profile_id}/room/${instance.room_id}/commands?limit=100`, headers: org.headers });
      assert.equal(res.statusCode, 200, res.body);
      return (res.json() as { commands: unknown[] }).commands.length;
    };
    const before = await commands();
    await sbx.files.makeDir('/home/user/agent-ops/a/b');
    await sbx.files.write('/home/user/agent-ops/a/b/f.txt', 'f');
    await sbx.files.rename('/home/user/agent-ops/a', '/home/user/agent-ops/moved/a');
    assert.equal(await sbx.files.read('/home/user/agent-ops/moved/a/b/f.txt'), 'f');
    await sbx.files.remove('/home/user/agent-ops');
    assert.equal(await sbx.files.exists('/home/user/agent-ops'), false);
    assert.equal(await commands(), before, 'no command was run for them');
  });

  it("writes as root when asked: the file and the directories made for it are root's; by default they stay the user's", async () => {
    await sbx.files.write('/home/user/by-root/inner/r.txt', 'root\n', { user: 'root' });
    await sbx.files.makeDir('/home/user/by-root/made', { user: 'root' });
    await sbx.files.write('/home/user/by-user/u.txt', 'user\n');
    const owners = await sbx.commands.run('stat -c "%U %a %n" by-root by-root/inner by-root/inner/r.txt by-root/made by-user by-user/u.txt');
    assert.equal(
      owners.stdout,
      ['root 755 by-root', 'root 755 by-root/inner', 'root 644 by-root/inner/r.txt', 'root 755 by-root/made', 'user 755 by-user', 'user 644 by-user/u.txt', ''].join('\n'),
    );
    assert.equal(await sbx.files.read('/home/user/by-root/inner/r.txt', { user: 'root' }), 'root\n');
    await assert.rejects(sbx.files.remove('/home/user/by-root'), 'the user cannot remove what root made there');
    await sbx.files.remove('/home/user/by-root', { user: 'root' });
    assert.equal(await sbx.files.exists('/home/user/by-root'), false);
    await sbx.files.write('in-root-home.txt', 'x', { user: 'root' });
    assert.equal((await sbx.commands.run('cat /root/in-root-home.txt', { user: 'root' })).stdout, 'x', "root's relative paths are under /root");
  });
});

describe("a sandbox's ports through the SDK", () => {
  it("getHost(port) is the port's preview host name, reached with roomkit's signed URL token", async () => {
    const host = sbx.getHost(8000);
    assert.equal(host, `8000-${sbx.sandboxId}.${DOMAIN}`);
    await sbx.files.write('/home/user/site/index.html', 'served to getHost\n');
    const server = await sbx.commands.run('cd site && exec python3 -m http.server 8000', { background: true });
    try {
      const { instances } = (await t.app.inject({ method: 'GET', url: '/api/instances?limit=50', headers: org.headers })).json() as { instances: { instance_id: string; profile_id: string; room_id: string }[] };
      const instance = instances.find((i) => i.instance_id === sbx.sandboxId)!;
      const signed = await t.app.inject({ method: 'POST', url: `/api/profile/${instance.profile_id}/room/${instance.room_id}/ports/8000/url`, headers: org.headers, payload: {} });
      assert.equal(signed.statusCode, 201, signed.body);
      const hostUrl = new URL((signed.json() as { host_url: string }).host_url);
      assert.equal(hostUrl.hostname, host);
      const bare = await rawGet(base, '/index.html', { host });
      assert.equal(bare.status, 401, 'a preview host name needs its token');
      const first = await rawGet(base, `/index.html${hostUrl.search}`, { host });
      assert.equal(first.status, 303, first.body);
      const cookie = String(first.headers['set-cookie']).split(';')[0]!;
      let page = { status: 0, body: '' };
      await untilTrue('the server in the sandbox to answer', async () => {
        page = await rawGet(base, '/index.html', { host, cookie });
        return page.status === 200;
      });
      assert.equal(page.body, 'served to getHost\n');
    } finally {
      await server.kill();
    }
  });
});

describe('a pseudo-terminal through the SDK', () => {
  it('opens one, takes input, resizes it, and ends with its exit code', async () => {
    const output: Buffer[] = [];
    const text = () => Buffer.concat(output).toString('utf8');
    const terminal = await sbx.pty.create({ cols: 80, rows: 24, onData: (data) => void output.push(Buffer.from(data)) });
    await sbx.pty.sendInput(terminal.pid, new TextEncoder().encode('stty size; echo "tty=$TERM"\n'));
    await untilTrue('the size and TERM in the output', () => text().includes('24 80') && text().includes('tty=xterm-256color'));
    await sbx.pty.resize(terminal.pid, { cols: 100, rows: 30 });
    await sbx.pty.sendInput(terminal.pid, new TextEncoder().encode('stty size; exit 7\n'));
    const result = await terminal.wait().catch((err: unknown) => err);
    assert.ok(text().includes('30 100'), text());
    assert.ok(result instanceof CommandExitError && result.exitCode === 7, String(result));
  });

  it('outlives its stream: a reconnect replays its output and follows it, and a kill ends it', async () => {
    const first: Buffer[] = [];
    const terminal = await sbx.pty.create({ cols: 80, rows: 24, onData: (data) => void first.push(Buffer.from(data)) });
    await sbx.pty.sendInput(terminal.pid, new TextEncoder().encode('echo before-$((40+2))\n'));
    await untilTrue('the first output', () => Buffer.concat(first).toString().includes('before-42'));
    await terminal.disconnect();
    const again: Buffer[] = [];
    const reconnected = await sbx.pty.connect(terminal.pid, { onData: (data) => void again.push(Buffer.from(data)) });
    await sbx.pty.sendInput(terminal.pid, new TextEncoder().encode('echo after-$((40+3))\n'));
    await untilTrue('the replay and the new output', () => Buffer.concat(again).toString().includes('before-42') && Buffer.concat(again).toString().includes('after-43'));
    assert.equal(await sbx.pty.kill(terminal.pid), true);
    await assert.rejects(reconnected.wait());
    assert.ok(!(await sbx.commands.list()).some((p) => p.pid === terminal.pid), 'gone once killed');
  });
});

describe('snapshots and fork', () => {
  it('snapshots a sandbox, starts a sandbox from the snapshot as a template, lists and deletes it', async () => {
    await sbx.files.write('/home/user/snapshot-mark.txt', 'from the snapshot');
    const snapshot = await sbx.createSnapshot();
    const listed = await Sandbox.listSnapshots({ ...opts, sandboxId: sbx.sandboxId }).nextItems();
    assert.ok(listed.some((s) => s.snapshotId === snapshot.snapshotId), JSON.stringify(listed));
    const copy = await create({}, snapshot.snapshotId);
    assert.equal(await copy.files.read('/home/user/snapshot-mark.txt'), 'from the snapshot');
    await copy.kill();
    assert.equal(await Sandbox.deleteSnapshot(snapshot.snapshotId, opts), true);
    assert.ok(!(await Sandbox.listSnapshots(opts).nextItems()).some((s) => s.snapshotId === snapshot.snapshotId));
  });

  it('forks a sandbox into a new one with its files', async () => {
    await sbx.files.write('/home/user/fork-mark.txt', 'forked');
    const [copy] = await Sandbox.fork(sbx.sandboxId, opts);
    assert.ok(copy instanceof Sandbox, String(copy));
    made.push(copy.sandboxId);
    assert.notEqual(copy.sandboxId, sbx.sandboxId);
    assert.equal(await copy.files.read('/home/user/fork-mark.txt'), 'forked');
    await copy.kill();
  });
});

describe('pause and connect', () => {
  // Both a process the sandbox runs on its own and a command started through the SDK
  // (one the service follows, which it attaches to again after the resume) come back
  // with the memory.
  it('pauses a sandbox keeping its memory; connect resumes it with its processes and commands, and only extends the deadline', async (test) => {
    const sandbox = await create({ timeoutMs: 600_000 });
    await sandbox.commands.run('nohup sleep 900 >/dev/null 2>&1 &');
    const across = await sandbox.commands.run('echo before; while [ ! -e /tmp/go ]; do sleep 0.2; done; echo after; exit 3', { background: true });
    await untilTrue('the command\'s first line', () => across.stdout.includes('before'));
    const endAt = (await sandbox.getInfo()).endAt.getTime();
    assert.equal(await Sandbox.pause(sandbox.sandboxId, opts), true);
    assert.equal((await Sandbox.getInfo(sandbox.sandboxId, opts)).state, 'paused');
    const rest = await t.app.inject({ method: 'GET', url: '/api/instances?limit=50', headers: org.headers });
    const paused = (rest.json() as { instances: { instance_id: string; pause: { memory_kept: boolean } | null }[] }).instances.find((i) => i.instance_id === sandbox.sandboxId);
    if (paused?.pause?.memory_kept !== true) {
      test.skip("this host's runtime cannot keep memory (capabilities.pauseMemory is false)");
      await Sandbox.kill(sandbox.sandboxId, opts);
      return;
    }
    assert.equal(await Sandbox.pause(sandbox.sandboxId, opts), false, 'a paused sandbox is not paused again');
    assert.equal(await sandbox.isRunning(), false);
    const again = await Sandbox.connect(sandbox.sandboxId, { ...opts, timeoutMs: 60_000 });
    const info = await again.getInfo();
    assert.equal(info.state, 'running');
    assert.ok(info.endAt.getTime() >= endAt - 1000, 'a shorter timeout leaves the deadline');
    assert.equal((await again.commands.run('pgrep -x sleep >/dev/null && echo alive')).stdout, 'alive\n', 'the memory was kept');
    assert.ok((await again.commands.list()).some((p) => p.pid === across.pid), 'the command is still listed after the resume');
    const followed = await again.commands.connect(across.pid);
    await again.commands.run('touch /tmp/go');
    for (const handle of [followed, across]) {
      await assert.rejects(handle.wait(), (err: unknown) => {
        assert.ok(err instanceof CommandExitError, String(err));
        assert.equal(err.exitCode, 3);
        assert.equal(err.stdout, 'before\nafter\n');
        return true;
      });
    }
    await again.kill();
  });
});

describe('the timeout', () => {
  // E2B's sandboxes are killed at their timeout unless created with onTimeout 'pause',
  // whatever the profile does with idle instances.
  it('kills a sandbox at its timeout, or pauses it with lifecycle.onTimeout pause; connect resumes that one', async () => {
    const killed = await create({ timeoutMs: 2_000 });
    const paused = await create({ timeoutMs: 2_000, lifecycle: { onTimeout: 'pause' } });
    await paused.files.write('/home/user/kept.txt', 'kept across the timeout');
    await untilTrue('the killed one gone', async () => !(await Sandbox.getInfo(killed.sandboxId, opts).then(() => true, () => false)), { timeoutMs: 30_000 });
    await untilTrue('the other paused', async () => (await Sandbox.getInfo(paused.sandboxId, opts)).state === 'paused', { timeoutMs: 60_000 });
    await assert.rejects(Sandbox.getInfo(killed.sandboxId, opts), NotFoundError);
    const again = await Sandbox.connect(paused.sandboxId, { ...opts, timeoutMs: 120_000 });
    assert.equal((await again.getInfo()).state, 'running');
    assert.equal(await again.files.read('/home/user/kept.txt'), 'kept across the timeout');
    await again.kill();
  });
});

describe('metrics', () => {
  it("answers the sandbox's measured memory and CPU beside its resources", async () => {
    // CPU use is the share used since the previous reading: one before some work, one after.
    await sbx.getMetrics();
    await sbx.commands.run('head -c 20000000 /dev/urandom | sha256sum >/dev/null');
    const [metric] = await sbx.getMetrics();
    assert.ok(metric, 'one point');
    assert.ok(metric.memUsed > 0 && metric.memUsed <= metric.memTotal + 256 * 1024 * 1024, `memory ${metric.memUsed} of ${metric.memTotal}`);
    assert.equal(metric.memTotal, 512 * 1024 * 1024);
    assert.ok(metric.cpuUsedPct > 0 && metric.cpuUsedPct <= 100, `cpu ${metric.cpuUsedPct}%`);
  });
});

describe('watching a directory through the SDK', () => {
  it('reports files created, written and removed under it, recursively', async () => {
    await sbx.files.makeDir('/home/user/watched/deep');
    const events: string[] = [];
    const handle = await sbx.files.watchDir('/home/user/watched', (event) => void events.push(`${event.type} ${event.name}`), { recursive: true });
    await sbx.files.write('/home/user/watched/deep/new.txt', 'new');
    await untilTrue('the create', () => events.includes('create deep/new.txt'));
    await sbx.commands.run('echo more >> /home/user/watched/deep/new.txt');
    await untilTrue('the write', () => events.includes('write deep/new.txt'));
    await sbx.files.remove('/home/user/watched/deep/new.txt');
    await untilTrue('the removal', () => events.includes('remove deep/new.txt'));
    await handle.stop();
    await assert.rejects(sbx.files.watchDir('/home/user/watched/nothing-here', () => {}), NotFoundError);
  });
});

describe('a sandbox that ends', () => {
  it('answers the SDK as gone once killed: not running, its commands refused', async () => {
    const sandbox = await create();
    const running = await sandbox.commands.run('sleep 600', { background: true });
    assert.equal(await sandbox.kill(), true);
    assert.equal(await sandbox.isRunning(), false);
    await assert.rejects(running.wait());
    await assert.rejects(sandbox.commands.run('true'));
  });
});
