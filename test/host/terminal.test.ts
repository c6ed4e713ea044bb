// Terminals over WebSocket against real gVisor instances with roomkit's agent: a real
// client (Node's WebSocket) against the app listening on 127.0.0.1, the SDK, and the
// `roomkit shell` command with piped input; refusals before the upgrade as HTTP Error
// bodies; nothing of a closed terminal left in the instance.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { type AddressInfo, connect as connectTcp } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { Roomkit } from '../../sdk/src/index.ts';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';
import { BIN } from '../support/cli.ts';
import { untilTrue } from '../support/until.ts';
import { openTerminalSocket, type TerminalSocket } from '../support/terminal-socket.ts';

const MAX_TERMINALS = 3;

let t: TestApp;
let org: TestOrg;
let url: string;
let profileId: string;
let instanceId: string;
const ROOM = 'term';
const path = (room = ROOM, profile = profileId) => `/api/profile/${profile}/room/${room}/terminal`;

type Client = TerminalSocket;

function connect(query: Record<string, string | number> = {}, headers: Record<string, string> = org.headers, room = ROOM): Promise<Client> {
  const qs = new URLSearchParams(Object.entries(query).map(([k, v]): [string, string] => [k, String(v)])).toString();
  return openTerminalSocket(`${url}${path(room)}${qs ? `?${qs}` : ''}`, headers);
}

/**
 * What the server answers to a WebSocket handshake: 101, or the status and Error body of
 * a refusal. Read from a raw socket until the server closes it, as it does after a refusal.
 */
async function handshake(target: string, headers: Record<string, string>): Promise<{ status: number; body: Record<string, unknown> }> {
  const { port } = new URL(url);
  const socket = connectTcp(Number(port), '127.0.0.1');
  await once(socket, 'connect');
  const lines = Object.entries({ ...headers, host: `127.0.0.1:${port}`, connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==' })
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
  socket.write(`GET ${target} HTTP/1.1\r\n${lines}\r\n`);
  let raw = '';
  socket.setEncoding('utf8').on('data', (d: string) => {
    raw += d;
    if (raw.startsWith('HTTP/1.1 101')) socket.destroy();
  });
  await once(socket, 'close');
  const status = Number(/^HTTP\/1\.1 (\d+)/.exec(raw)?.[1] ?? 0);
  const text = raw.split('\r\n\r\n').slice(1).join('\r\n\r\n');
  return { status, body: status === 101 || text === '' ? {} : (JSON.parse(text) as Record<string, unknown>) };
}

/**
 * Waits until `program` (its whole command line) runs in the instance, in the foreground
 * of the terminal that started it. A key sent sooner (on a loaded host) reaches the shell instead, still
 * reading its line with the terminal in raw mode: ^D or ^\ would be plain characters.
 */
async function untilForeground(program: string): Promise<void> {
  let seen = '';
  for (let i = 0; i < 100; i++) {
    const res = await t.app.inject({ method: 'POST', url: `/api/profile/${profileId}/room/${ROOM}/command`, headers: org.headers, payload: { command: 'ps -e -o stat= -o args=' } });
    seen = (res.json() as { result: { output: string } }).result.output;
    // gVisor's ps shows no foreground mark (+); a shell gives its terminal to the child
    // before the exec, so the program running under its own name is in the foreground.
    if (seen.split('\n').some((line) => /^[SR]/.test(line.trim()) && line.trim().replace(/^\S+\s+/, '') === program)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.fail(`${program} never ran in a terminal's foreground; the processes: ${seen}`);
}

/** The processes of the VM user inside the instance, from a command through the API. */
async function userProcesses(): Promise<string> {
  const res = await t.app.inject({ method: 'POST', url: `/api/profile/${profileId}/room/${ROOM}/command`, headers: org.headers, payload: { command: 'ps -eo args' } });
  assert.equal(res.statusCode, 200, res.body);
  return (res.json() as { result: { output: string } }).result.output;
}

before(async () => {
  t = await startTestApp({ gvisorPool: '10.242.0.0/25', config: { maxTerminalsPerInstance: MAX_TERMINALS } });
  assert.ok('runtime' in t.services.runtime, 'the gVisor runtime is not available');
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  url = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  org = await t.newOrg();
  profileId = await t.createProfile(org, { name: 'term', memory_mb: 512, disk_mb: 1024, network: { egress: 'none' } });
  const created = await t.app.inject({ method: 'POST', url: `/api/profile/${profileId}/room/${ROOM}`, headers: org.headers, payload: {} });
  assert.equal(created.statusCode, 201, created.body);
  instanceId = (created.json() as { instance_id: string }).instance_id;
});

after(async () => {
  await t.closeLeavingNothing();
});

describe('a terminal over WebSocket', () => {
  it('starts at 80x24, follows a resize, and types into cat', async () => {
    const c = await connect();
    try {
      c.send('stty size\n');
      await c.waitFor(/^24 80\r?$/m);
      c.ws.send(JSON.stringify({ type: 'resize', cols: 132, rows: 40 }));
      c.send('stty size\n');
      await c.waitFor(/^40 132\r?$/m);
      c.send('cat\n');
      await c.waitFor(/\$ cat\r\n/);
      await untilForeground('cat');
      c.send('typed-into-cat\n');
      // The terminal echoes the line, then cat prints it back: twice.
      await c.waitFor(/typed-into-cat\r\n(?:.*\r\n)?typed-into-cat/);
      c.send('\x04');
      const opened = c.messages.find((m) => m.type === 'opened');
      assert.equal(typeof opened?.terminal_id, 'string');
    } finally {
      c.ws.close();
    }
  });

  it('Ctrl-C interrupts the foreground program, Ctrl-\\ quits it, Ctrl-Z stops it, ^D ends its input; vi is there', async () => {
    const c = await connect();
    try {
      c.send('echo "ready-$((40+2))"\n');
      await c.waitFor(/ready-42/);
      c.send('sleep 20\n');
      await untilForeground('sleep 20');
      c.send('\x03');
      c.send('echo "int=$?"\n');
      await c.waitFor(/int=130/, 5_000);
      c.send('sleep 20\n');
      await untilForeground('sleep 20');
      c.send('\x1c');
      c.send('echo "quit=$?"\n');
      await c.waitFor(/quit=131/, 5_000);
      c.send('sleep 30\n');
      await untilForeground('sleep 30');
      c.send('\x1a');
      c.send('echo "stop=$?"; jobs -s; kill -9 %1\n');
      await c.waitFor(/stop=148/, 5_000);
      await c.waitFor(/Stopped\s+sleep 30/, 5_000);
      c.send('cat\n');
      await untilForeground('cat');
      c.send('\x04');
      // The shell's prompt again: cat ended. (Typed at once after the ^D, before cat
      // reads, the next line would merge with the end of input in gVisor's terminal.)
      await c.waitFor(/\$ cat\r\n[^]*\$ $/, 5_000);
      c.send('echo "eof=$?"\n');
      await c.waitFor(/eof=0/, 5_000);
      // A terminal user finds an editor.
      c.send('command -v vi && echo "vi-found"\n');
      await c.waitFor(/\/vi\r?\nvi-found/, 5_000);
    } finally {
      c.ws.close();
    }
  });

  it('takes the size from the query and says exit 3 with the exit code, then closes with 1000', async () => {
    const c = await connect({ cols: 100, rows: 30 });
    c.send('stty size\n');
    await c.waitFor(/^30 100\r?$/m);
    c.send('exit 3\n');
    const closed = await c.closed;
    assert.equal(closed.code, 1000);
    assert.deepEqual(c.messages.at(-1), { type: 'exit', exit_code: 3 });
  });

  it('runs `command` instead of the login shell', async () => {
    const c = await connect({ command: 'echo from-command; exit 5' });
    await c.waitFor(/from-command/);
    await c.closed;
    assert.deepEqual(c.messages.at(-1), { type: 'exit', exit_code: 5 });
  });

  it('closing the socket ends the shell and everything it started, hang-up ignored or not', async () => {
    const c = await connect();
    c.send('nohup sleep 4242 >/dev/null 2>&1 & sleep 4343 & echo started-$((6*7))\n');
    await c.waitFor(/started-42/);
    // Positive control: they run while the terminal is open.
    const during = await userProcesses();
    assert.match(during, /sleep 4242/);
    assert.match(during, /sleep 4343/);
    c.ws.close();
    await c.closed;
    let left = '';
    for (let i = 0; i < 40; i++) {
      left = await userProcesses();
      if (!/sleep 4[23]4[23]/.test(left)) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    assert.doesNotMatch(left, /sleep 4242|sleep 4343/);
    await waitFor(() => t.services.terminals.countIn(instanceId) === 0);
  });

  it('refuses before the upgrade: no key 401, another organization 404, bad size 400, a plain GET 426', async () => {
    const missing = await handshake(path(), {});
    assert.equal(missing.status, 401);
    assert.equal(missing.body.error, 'missing_api_key');
    const other = await t.newOrg();
    const foreign = await handshake(path(), other.headers);
    assert.equal(foreign.status, 404);
    assert.equal(foreign.body.error, 'profile_not_found');
    const bad = await handshake(`${path()}?cols=0`, org.headers);
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error, 'validation_error');
    const noRoom = await handshake(path('nowhere'), org.headers);
    assert.equal(noRoom.status, 404);
    assert.equal(noRoom.body.error, 'instance_not_found');
    const plain = await fetch(`${url}${path()}`, { headers: org.headers });
    assert.equal(plain.status, 426);
    assert.equal(((await plain.json()) as { error: string }).error, 'upgrade_required');
  });

  it('keeps at most ROOMKIT_MAX_TERMINALS_PER_INSTANCE open at once', async () => {
    const open = [];
    for (let i = 0; i < MAX_TERMINALS; i++) open.push(await connect());
    const refused = await handshake(path(), org.headers);
    assert.equal(refused.status, 429);
    assert.equal(refused.body.error, 'too_many_terminals');
    for (const c of open) c.ws.close();
    await Promise.all(open.map((c) => c.closed));
    await waitFor(() => t.services.terminals.countIn(instanceId) === 0);
    const again = await connect();
    again.ws.close();
    await again.closed;
  });

  it('opens with a single-use ticket instead of the Authorization header', async () => {
    const res = await t.app.inject({ method: 'POST', url: `${path()}/ticket`, headers: org.headers });
    assert.equal(res.statusCode, 201, res.body);
    const { ticket } = res.json() as { ticket: string };
    const c = await connect({ ticket }, {});
    c.send('echo via-ticket\n');
    await c.waitFor(/via-ticket\r\n/);
    c.ws.close();
    await c.closed;
    const reused = await handshake(`${path()}?ticket=${ticket}`, {});
    assert.equal(reused.status, 401);
    assert.equal(reused.body.error, 'invalid_terminal_ticket');
    // A ticket opens only the room it was made for.
    const other = (await t.app.inject({ method: 'POST', url: `${path()}/ticket`, headers: org.headers })).json() as { ticket: string };
    const elsewhere = await handshake(`${path('elsewhere')}?ticket=${other.ticket}`, {});
    assert.equal(elsewhere.status, 401);
  });

  it('records opening a terminal in the audit trail, without what it carried', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/api/audit?action=terminal.open', headers: org.headers });
    assert.equal(res.statusCode, 200, res.body);
    const events = (res.json() as { events: Record<string, unknown>[] }).events;
    assert.ok(events.length >= 3, res.body);
    assert.ok(events.some((e) => e.status === 101 && e.decision === 'allowed' && e.instance_id === instanceId), res.body);
    assert.ok(events.some((e) => e.command === 'echo from-command; exit 5'), res.body);
    assert.doesNotMatch(res.body, /typed-into-cat|via-ticket/);
  });

  it('the SDK: write, onData, resize, exited', async () => {
    const rk = new Roomkit({ baseUrl: url, apiKey: org.apiKey });
    const terminal = await rk.room('term', ROOM).terminal({ cols: 90, rows: 20 });
    let out = '';
    terminal.onData((d) => (out += Buffer.from(d).toString('utf8')));
    terminal.write('stty size\n');
    await waitFor(() => /^20 90\r?$/m.test(out));
    terminal.resize(70, 10);
    terminal.write('stty size; exit 9\n');
    assert.equal(await terminal.exited, 9);
    assert.match(out, /^10 70\r?$/m);
  });

  it('`roomkit shell` with piped input runs it and exits with the shell\'s code', async () => {
    const child = spawn(process.execPath, [BIN, 'shell', '--profile', 'term', ROOM], {
      env: { ...process.env, ROOMKIT_URL: url, ROOMKIT_API_KEY: org.apiKey },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.stdin.end('echo shell-says-$((20+22))\nexit 7\n');
    const [code] = (await once(child, 'close')) as [number | null];
    assert.equal(code, 7, stderr);
    assert.match(stdout, /shell-says-42/);
  });

  it('`roomkit shell` ends when its input ends, even when it ends before the shell reads its terminal', async () => {
    const shell = async (input: string) => {
      const child = spawn(process.execPath, [BIN, 'shell', '--profile', 'term', ROOM], {
        env: { ...process.env, ROOMKIT_URL: url, ROOMKIT_API_KEY: org.apiKey },
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      let stdout = '';
      child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
      const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
      child.stdin.end(input);
      const [code] = (await once(child, 'close')) as [number | null];
      clearTimeout(timer);
      return { code, stdout };
    };
    // Empty input: the end of input reached the shell before it read its terminal.
    const empty = await shell('');
    assert.equal(empty.code, 0, JSON.stringify(empty.stdout));
    assert.match(empty.stdout, /logout/);
  });

  it('a deleted instance closes its terminal with the reason (4001)', async () => {
    const c = await connect();
    c.send('echo before-delete\n');
    await c.waitFor(/before-delete\r\n/);
    const deleted = await t.app.inject({ method: 'DELETE', url: `/api/profile/${profileId}/room/${ROOM}`, headers: org.headers });
    assert.equal(deleted.statusCode, 200, deleted.body);
    const closed = await c.closed;
    assert.equal(closed.code, 4001);
    const last = c.messages.at(-1);
    assert.equal(last?.type, 'closed');
    assert.equal(last?.reason, 'instance_stopped');
    assert.match(String(last?.message), /deleted/);
  });
});

/** Polls `check` every 100 ms for up to 15 s. */
function waitFor(check: () => boolean): Promise<void> {
  return untilTrue('the terminal to get there', check, { timeoutMs: 15_000, everyMs: 100 });
}
