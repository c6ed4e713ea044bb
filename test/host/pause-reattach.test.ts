// Commands and terminals across a pause with memory, on the real host (the real
// `roomkit serve` with the gVisor runtime): a background command that prints before and
// after the pause keeps all its output, files_changed and exit code; a foreground command
// under way is answered once the resume lets it finish; a terminal's shell goes on and
// is attached again with what it held; input and a kill sent while paused resume the
// instance and reach the command; a files-only pause still interrupts a command.
// A snapshot with memory of the running instance drops the connections too: a
// background command printing across it keeps all its output and exit code, a
// foreground one is answered, and an open terminal stays open.
// One instance serves every test, since each takes real time to make.
//
// Only objects of this test's own data directory are touched (names carrying its host
// tag, its runsc root, mounts under it, the server process it started).
import assert from 'node:assert/strict';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { mountsUnder } from '../../src/host/mounts.ts';
import { run } from '../../src/host/run.ts';
import { tableName } from '../../src/network/firewall.ts';
import { listHostInterfaces, listNetns } from '../../src/network/netns.ts';
import { TEST_IMAGES_DIR, testDataDir } from '../support/app.ts';
import { type Json, ServedService } from '../support/served-service.ts';
import { hostObjects, NOTHING } from '../support/host.ts';
import { openTerminalSocket, type TerminalSocket } from '../support/terminal-socket.ts';

const POOL = '10.246.7.0/25';
const ROOM = 'reattach';

let svc: ServedService;
let profile: string;
let instanceId: string;
let memoryKept = true;

before(async () => {
  svc = new ServedService(testDataDir('roomkit-reattach-', POOL), {
    ROOMKIT_RUNTIME: 'gvisor',
    ROOMKIT_NETWORK_POOL: POOL,
    ROOMKIT_IMAGES_DIR: TEST_IMAGES_DIR,
    ROOMKIT_ON_SHUTDOWN: 'stop',
  });
  await svc.start();
  const res = await svc.api('POST', '/api/profiles', { name: 'small', memory_mb: 512, disk_mb: 512, network: { egress: 'none' }, idle_timeout_s: 0 });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  profile = res.body.profile_id;
  const created = await svc.api('POST', room());
  assert.equal(created.status, 201, JSON.stringify(created.body));
  instanceId = created.body.instance_id;
});

after(async () => {
  const { dataDir, tag } = svc;
  if (svc?.running()) {
    await svc.api('DELETE', room());
    await svc.server!.stop();
  }
  svc?.keepLogs();
  if (dataDir && existsSync(dataDir)) {
    const left = await hostObjects(dataDir, instanceId ? [instanceId] : []);
    const clean = JSON.stringify({ ...left, egressRules: [] }) === JSON.stringify(NOTHING);
    if (!clean) {
      for (const id of left.containers) await run('runsc', [`--root=${join(dataDir, 'runsc')}`, 'delete', '--force', id], { timeoutMs: 30_000 });
      for (const point of mountsUnder(dataDir)) await run('umount', ['-l', point], { timeoutMs: 30_000 });
      for (const name of listNetns(tag)) await run('ip', ['netns', 'del', name], { timeoutMs: 10_000 });
      for (const name of await listHostInterfaces(tag)) await run('ip', ['link', 'del', name], { timeoutMs: 10_000 });
      for (const dir of left.cgroups) await run('rmdir', [dir], { timeoutMs: 10_000 });
    }
    await run('nft', ['delete', 'table', 'inet', tableName(tag)], { timeoutMs: 10_000 });
    if (mountsUnder(dataDir).length === 0) rmSync(dataDir, { recursive: true, force: true });
    assert.ok(clean, `the host still held objects of the test's instance: ${JSON.stringify(left)}`);
  }
});

const room = () => `/api/profile/${profile}/room/${ROOM}`;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function pause(body?: unknown): Promise<Json> {
  const res = await svc.api('POST', `${room()}/pause`, body);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body;
}

async function resume(): Promise<void> {
  const res = await svc.api('POST', `${room()}/resume`);
  assert.equal(res.status, 200, JSON.stringify(res.body));
}

async function statusOf(commandId: string): Promise<Json> {
  const res = await svc.api('GET', `${room()}/commands/${commandId}`);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body;
}

describe('across a pause with memory', () => {
  it('a background command keeps all its output, its files_changed and its exit code', async (t) => {
    const started = await svc.api('POST', `${room()}/command`, {
      command: 'for i in 1 2 3 4 5 6 7 8; do echo "line $i"; sleep 0.4; done; echo made > made-across.txt; exit 7',
      background: true,
    });
    assert.equal(started.status, 202, JSON.stringify(started.body));
    const id = started.body.command_id as string;
    await svc.waitFor('its first line', async () => ((await statusOf(id)).output.includes('line 1') ? true : undefined), 15_000);
    const paused = await pause();
    if (!paused.pause.memory_kept) {
      memoryKept = false;
      return t.skip("this host's runtime cannot keep memory");
    }
    // Paused, it is not finished: its record says running.
    assert.equal((await statusOf(id)).state, 'running');
    await sleep(1000);
    await resume();
    const done = await svc.waitFor('its end', async () => {
      const s = await statusOf(id);
      return s.state === 'running' ? undefined : s;
    }, 30_000);
    assert.equal(done.state, 'exited', JSON.stringify(done));
    assert.equal(done.exit_code, 7);
    assert.equal(done.end_reason, 'exited');
    assert.equal(done.result.result.output, [1, 2, 3, 4, 5, 6, 7, 8].map((i) => `line ${i}\n`).join(''));
    const paths = (done.files_changed as { path: string }[]).map((f) => f.path);
    assert.ok(paths.some((p) => p.endsWith('/made-across.txt')), JSON.stringify(done.files_changed));
    // What it changed between the restore and the service's new mark is not seen: it says so.
    assert.equal(done.files_changed_truncated, true);
  });

  it('a foreground command under way is answered once the resume lets it finish', async (t) => {
    if (!memoryKept) return t.skip("this host's runtime cannot keep memory");
    const answer = svc.api('POST', `${room()}/command`, { command: 'echo before; sleep 2; echo after' });
    await sleep(1000);
    await pause();
    await sleep(500);
    await resume();
    const res = await answer;
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.result.output, 'before\nafter\n');
    assert.equal(res.body.result.exit_code, 0);
    assert.equal(res.body.result.end_reason, 'exited');
  });

  it('input and a signal sent to a command while it is paused resume its instance and reach it', async (t) => {
    if (!memoryKept) return t.skip("this host's runtime cannot keep memory");
    const started = await svc.api('POST', `${room()}/command`, {
      command: 'while read -r line; do echo "got $line"; done; echo "input closed"; sleep 600',
      background: true,
      stdin_open: true,
    });
    assert.equal(started.status, 202, JSON.stringify(started.body));
    const id = started.body.command_id as string;
    const stdin = (body: unknown) => svc.api('POST', `${room()}/commands/${id}/stdin`, body);
    assert.equal((await stdin({ data: 'one\n' })).status, 200);
    await svc.waitFor('its first answer', async () => ((await statusOf(id)).output.includes('got one') ? true : undefined), 15_000);
    await pause();
    // Written while paused: the instance is resumed for it and the line reaches the command.
    const written = await stdin({ data: 'two\n', close: true });
    assert.equal(written.status, 200, JSON.stringify(written.body));
    assert.equal(written.body.closed, true);
    const instance = await svc.api('GET', room());
    assert.equal(instance.body.state, 'ready', JSON.stringify(instance.body));
    await svc.waitFor('the input after the pause', async () => ((await statusOf(id)).output.includes('input closed') ? true : undefined), 15_000);
    assert.equal((await statusOf(id)).output, 'got one\ngot two\ninput closed\n');
    // Paused again, the command (now in its sleep) is killed through the resume.
    await pause();
    const killed = await svc.api('POST', `${room()}/commands/${id}/kill`);
    assert.equal(killed.status, 200, JSON.stringify(killed.body));
    const done = await svc.waitFor('its end', async () => {
      const s = await statusOf(id);
      return s.state === 'running' ? undefined : s;
    }, 30_000);
    assert.equal(done.state, 'killed', JSON.stringify(done));
  });

  it("a terminal's shell goes on, and is attached again with what it held", async (t) => {
    if (!memoryKept) return t.skip("this host's runtime cannot keep memory");
    const key = readFileSync(join(svc.dataDir, 'initial-api-key'), 'utf8').trim();
    const first = await terminal(key);
    first.send('HELD=kept42; echo "set-$HELD"\n');
    await first.waitFor(/set-kept42/);
    const opened = first.messages.find((m) => m.type === 'opened');
    await pause();
    const closed = await first.closed;
    assert.equal(closed.code, 4003);
    const message = first.messages.find((m) => m.type === 'closed');
    assert.equal(message?.reason, 'instance_paused', JSON.stringify(first.messages));
    assert.equal(message?.terminal_id, opened?.terminal_id);
    await resume();
    const again = await terminal(key, { terminal_id: String(opened?.terminal_id) });
    // Its recent output is replayed, and the shell holds what was set before the pause.
    await again.waitFor(/set-kept42/);
    again.send('echo "now-$HELD-$$"\n');
    await again.waitFor(/now-kept42-\d+/);
    again.send('exit\n');
    await again.closed;
    // Once it ended, it cannot be attached again: refused before the upgrade.
    const refused = await upgradeStatus(key, String(opened?.terminal_id));
    assert.equal(refused, 404);
  });
});

describe('across a snapshot with memory of the running instance', () => {
  async function snapshot(): Promise<Json> {
    const res = await svc.api('POST', `${room()}/snapshots`);
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return res.body;
  }

  async function forget(taken: Json): Promise<void> {
    assert.equal((await svc.api('DELETE', `/api/snapshots/${taken.snapshot_id}`)).status, 200);
  }

  it('a background command printing before and after it keeps all its output and its exit code', async (t) => {
    const started = await svc.api('POST', `${room()}/command`, {
      command: 'for i in 1 2 3 4 5 6 7 8; do echo "line $i"; sleep 0.3; done; exit 5',
      background: true,
    });
    assert.equal(started.status, 202, JSON.stringify(started.body));
    const id = started.body.command_id as string;
    await svc.waitFor('its first line', async () => ((await statusOf(id)).output.includes('line 1') ? true : undefined), 15_000);
    const taken = await snapshot();
    if (!taken.memory_kept) return t.skip("this host's runtime cannot keep memory");
    // The snapshot ended before the command did: its output from then on comes through the new connection.
    assert.equal((await statusOf(id)).state, 'running');
    const done = await svc.waitFor('its end', async () => {
      const s = await statusOf(id);
      return s.state === 'running' ? undefined : s;
    }, 30_000);
    assert.equal(done.state, 'exited', JSON.stringify(done));
    assert.equal(done.exit_code, 5);
    assert.equal(done.end_reason, 'exited');
    assert.equal(done.result.result.output, [1, 2, 3, 4, 5, 6, 7, 8].map((i) => `line ${i}\n`).join(''));
    await forget(taken);
  });

  it('a foreground command under way is answered with all its output', async (t) => {
    const answer = svc.api('POST', `${room()}/command`, { command: 'echo before; sleep 2; echo after' });
    await sleep(1000);
    const taken = await snapshot();
    if (!taken.memory_kept) return t.skip("this host's runtime cannot keep memory");
    const res = await answer;
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.result.output, 'before\nafter\n');
    assert.equal(res.body.result.exit_code, 0);
    await forget(taken);
  });

  it('an open terminal stays open, its shell holding what it held', async (t) => {
    const key = readFileSync(join(svc.dataDir, 'initial-api-key'), 'utf8').trim();
    const term = await terminal(key);
    let closedEarly = false;
    void term.closed.then(() => (closedEarly = true));
    term.send('KEPT=snap7; echo "set-$KEPT"\n');
    await term.waitFor(/set-snap7/);
    const taken = await snapshot();
    if (!taken.memory_kept) return t.skip("this host's runtime cannot keep memory");
    term.send('echo "after-$KEPT-$((6*7))"\n');
    await term.waitFor(/after-snap7-42/);
    assert.equal(closedEarly, false, JSON.stringify(term.messages));
    term.send('exit\n');
    await term.closed;
    await forget(taken);
  });
});

describe('across a files-only pause', () => {
  it('a running command ends interrupted', async () => {
    const started = await svc.api('POST', `${room()}/command`, { command: 'echo early; sleep 60; echo late', background: true });
    assert.equal(started.status, 202, JSON.stringify(started.body));
    const id = started.body.command_id as string;
    await svc.waitFor('its first line', async () => ((await statusOf(id)).output.includes('early') ? true : undefined), 15_000);
    const paused = await pause({ memory: false });
    assert.equal(paused.pause.memory_kept, false);
    const done = await svc.waitFor('its end', async () => {
      const s = await statusOf(id);
      return s.state === 'running' ? undefined : s;
    }, 15_000);
    assert.equal(done.state, 'interrupted');
    assert.equal(done.end_reason, 'instance_stopped');
    await resume();
  });
});

/** The HTTP status a WebSocket handshake to attach to the terminal is answered with. */
function upgradeStatus(key: string, terminalId: string): Promise<number> {
  const target = new URL(`${svc.server!.url}${room()}/terminal?terminal_id=${terminalId}`);
  return new Promise((resolve, reject) => {
    const req = httpRequest(target, {
      headers: { authorization: `Bearer ${key}`, connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==' },
    });
    req.on('response', (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('upgrade', (_res, socket) => {
      socket.destroy();
      resolve(101);
    });
    req.on('error', reject);
    req.end();
  });
}

/** A terminal over a WebSocket: what it received, and waits on it. */
function terminal(key: string, query: Record<string, string> = {}): Promise<TerminalSocket> {
  const qs = new URLSearchParams(query).toString();
  return openTerminalSocket(`${svc.server!.url}${room()}/terminal${qs ? `?${qs}` : ''}`, { authorization: `Bearer ${key}` });
}
