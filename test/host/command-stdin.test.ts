// stdout and stderr apart, and a command's stdin, on real gVisor instances over the API:
// the result's and the status's stream fields (exact byte counts, truncation per
// stream), the `stream` of each streamed output event, one-shot input (text and bytes),
// input sent to a running background command and closed, the refusals, the audit
// record of a write, the SDK and the CLI.
//
// Across the two streams, the agent reads stdout and stderr from separate pipes: writes
// a few milliseconds apart may arrive swapped, so no check here relies on the order of
// quick writes to different streams.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { after, before, describe, it } from 'node:test';
import { Roomkit } from '../../sdk/src/index.ts';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';
import { BIN } from '../support/cli.ts';
import { until } from '../support/until.ts';

/** The output limit of the agent app: small, so that truncation per stream is cheap to reach. */
const MAX_OUTPUT = 1024;
/** Its stdin limit per request. */
const MAX_STDIN = 4096;

let t: TestApp;
let org: TestOrg;
let profileId: string;
let base: string;

const room = () => `/api/profile/${profileId}/room/main`;

async function api(method: 'GET' | 'POST' | 'DELETE', url: string, payload?: Record<string, unknown>, app: TestApp = t, who: TestOrg = org) {
  return app.app.inject({ method, url, headers: who.headers, ...(payload ? { payload } : {}) });
}

async function run(payload: Record<string, unknown>) {
  const res = await api('POST', `${room()}/command`, payload);
  assert.equal(res.statusCode, 200, res.body);
  return res.json().result;
}

/** Polls a command until `done` holds for its status. */
async function waitFor(commandId: string, done: (status: any) => boolean, url = room(), app = t, who = org, timeoutMs = 20_000) {
  let last = '';
  return until(
    `command ${commandId} to get there`,
    async () => {
      const res = await api('GET', `${url}/commands/${commandId}`, undefined, app, who);
      assert.equal(res.statusCode, 200, res.body);
      last = res.body;
      const status = res.json();
      return done(status) ? status : undefined;
    },
    { timeoutMs, everyMs: 100, detail: () => last },
  );
}

interface SseEvent {
  event: string;
  data: any;
}

/** POSTs a streamed command over HTTP and reads all of its events. */
async function streamCommand(url: string, who: TestOrg, body: Record<string, unknown>): Promise<SseEvent[]> {
  const res = await fetch(url, { method: 'POST', headers: { ...who.headers, 'content-type': 'application/json' }, body: JSON.stringify({ ...body, stream: true }) });
  assert.ok(res.headers.get('content-type')?.startsWith('text/event-stream'), await res.clone().text());
  const text = await res.text();
  return text
    .split('\n\n')
    .map((block) => block.split('\n').filter((l) => l !== '' && !l.startsWith(':')))
    .filter((lines) => lines.length > 0)
    .map((lines) => ({ event: lines.find((l) => l.startsWith('event: '))!.slice(7), data: JSON.parse(lines.find((l) => l.startsWith('data: '))!.slice(6)) }));
}

before(async () => {
  t = await startTestApp({ gvisorPool: '10.241.0.0/24', config: { maxOutputBytes: MAX_OUTPUT, maxStdinBytes: MAX_STDIN } });
  assert.ok('runtime' in t.services.runtime, 'the gVisor runtime is not available');
  org = await t.newOrg();
  const profile = await api('POST', '/api/profiles', { name: 'stdin', memory_mb: 512, disk_mb: 1024, network: { egress: 'none' }, command_timeout_s: 30 });
  assert.equal(profile.statusCode, 201, profile.body);
  profileId = profile.json().profile_id;
  const created = await api('POST', room());
  assert.equal(created.statusCode, 201, created.body);
  base = await t.app.listen({ host: '127.0.0.1', port: 0 });
});

after(async () => {
  await t.closeLeavingNothing();
});

describe('stdout and stderr through the agent', () => {
  it('come apart in the result with exact byte counts, and both stay in output', async () => {
    const r = await run({ command: "printf 'out1\\n'; printf 'err1\\n' >&2; sleep 0.2; printf 'out2\\n'; printf 'caf\\303\\251' >&2" });
    assert.equal(r.stdout, 'out1\nout2\n');
    assert.equal(r.stderr, 'err1\ncafé');
    assert.equal(r.stdout_bytes, 10);
    assert.equal(r.stderr_bytes, 10);
    assert.equal(r.stdout_truncated, false);
    assert.equal(r.stderr_truncated, false);
    assert.equal(r.output_bytes, 20);
    // The interleaving of quick writes to the two streams may differ; every character is there.
    assert.equal(Buffer.byteLength(r.output), 20);
    assert.deepEqual([...r.output].sort(), [...(r.stdout + r.stderr)].sort());
  });

  it('are each cut in the middle at the output limit, on their own', async () => {
    const r = await run({ command: "head -c 3000 /dev/zero | tr '\\0' a; printf 'short' >&2" });
    assert.equal(r.stdout_bytes, 3000);
    assert.equal(r.stdout_truncated, true);
    assert.match(r.stdout, /^a{512}\n\[\.\.\. 1976 bytes of output omitted \.\.\.\]\na{512}$/);
    assert.equal(r.stderr, 'short');
    assert.equal(r.stderr_bytes, 5);
    assert.equal(r.stderr_truncated, false);
    assert.equal(r.output_bytes, 3005);
    assert.equal(r.output_truncated, true);
  });

  it('are told apart in streamed output events, whose offsets run on without a gap', async () => {
    const events = await streamCommand(`${base}${room()}/command`, org, { command: 'echo out; sleep 0.3; echo err >&2; sleep 0.3; echo out2' });
    const outputs = events.filter((e) => e.event === 'output').map((e) => e.data);
    assert.ok(outputs.length >= 3, JSON.stringify(outputs));
    let offset = 0;
    for (const piece of outputs) {
      assert.equal(piece.offset, offset);
      assert.ok(['stdout', 'stderr'].includes(piece.stream), JSON.stringify(piece));
      offset += Buffer.byteLength(piece.data);
    }
    const of = (stream: string) => outputs.filter((p) => p.stream === stream).map((p) => p.data).join('');
    assert.equal(of('stdout'), 'out\nout2\n');
    assert.equal(of('stderr'), 'err\n');
    const result = events.at(-1)!;
    assert.equal(result.event, 'result');
    assert.equal(result.data.result.stdout, 'out\nout2\n');
    assert.equal(result.data.result.stderr, 'err\n');
  });

  it('are in a background command\'s status while it runs and once it ended', async () => {
    const res = await api('POST', `${room()}/command`, { command: 'echo early; echo warn >&2; sleep 1; echo late', background: true });
    assert.equal(res.statusCode, 202, res.body);
    const started = res.json();
    assert.equal(started.stdin_open, false);
    const running = await waitFor(started.command_id, (s) => s.stdout === 'early\n' && s.stderr === 'warn\n');
    assert.equal(running.state, 'running');
    assert.equal(running.stdout_bytes, 6);
    const ended = await waitFor(started.command_id, (s) => s.state !== 'running');
    assert.equal(ended.stdout, 'early\nlate\n');
    assert.equal(ended.stderr, 'warn\n');
    assert.equal(ended.stdout_bytes, 11);
    assert.equal(ended.stderr_bytes, 5);
  });
});

describe('stdin', () => {
  it('gives a command its input at once, as text or as base64 bytes', async () => {
    const text = await run({ command: 'cat; echo done >&2', stdin: 'hello\nwörld\n' });
    assert.equal(text.stdout, 'hello\nwörld\n');
    assert.equal(text.stderr, 'done\n');
    const bytes = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    const binary = await run({ command: 'tee /tmp/in.bin | wc -c; od -An -tx1 /tmp/in.bin | tr -d " \\n"', stdin: bytes.toString('base64'), stdin_encoding: 'base64' });
    assert.equal(binary.stdout, `256\n${bytes.toString('hex')}`);
    // Without stdin the command's is empty (end of input at once).
    assert.equal((await run({ command: 'wc -c' })).stdout.trim(), '0');
  });

  it('stays open for a background command that asks, is fed in two writes, then closed', async () => {
    const res = await api('POST', `${room()}/command`, { command: 'while read line; do echo "got $line"; done; echo eof >&2', background: true, stdin: 'zero\n', stdin_open: true });
    assert.equal(res.statusCode, 202, res.body);
    const { command_id: commandId, stdin_open: open } = res.json();
    assert.equal(open, true);
    const stdin = (payload: Record<string, unknown>) => api('POST', `${room()}/commands/${commandId}/stdin`, payload);
    const first = await stdin({ data: 'one\n' });
    assert.equal(first.statusCode, 200, first.body);
    assert.deepEqual(first.json(), { command_id: commandId, bytes: 4, total_bytes: 4, closed: false });
    const seen = await waitFor(commandId, (s) => s.stdout === 'got zero\ngot one\n');
    assert.equal(seen.state, 'running');
    assert.equal(seen.stdin_open, true);
    const second = await stdin({ data: Buffer.from('two\n').toString('base64'), encoding: 'base64', close: true });
    assert.equal(second.statusCode, 200, second.body);
    assert.deepEqual(second.json(), { command_id: commandId, bytes: 4, total_bytes: 8, closed: true });
    const ended = await waitFor(commandId, (s) => s.state !== 'running');
    assert.equal(ended.state, 'exited');
    assert.equal(ended.exit_code, 0);
    assert.equal(ended.stdout, 'got zero\ngot one\ngot two\n');
    assert.equal(ended.stderr, 'eof\n');
    assert.equal(ended.stdin_open, false);
  });

  it('refuses what it cannot do with the Error body', async () => {
    const expectError = (res: { statusCode: number; body: string; json(): any }, status: number, code: string) => {
      assert.equal(res.statusCode, status, res.body);
      assert.equal(res.json().error, code, res.body);
      assert.ok(res.json().message.length > 20, res.body);
    };
    const stdinOf = (id: string, payload: Record<string, unknown>) => api('POST', `${room()}/commands/${id}/stdin`, payload);

    // An unknown command; stdin_open without background; too much input; not base64.
    expectError(await stdinOf('6d1c0a1e-2b3c-4d5e-8f90-123456789abc', { data: 'x' }), 404, 'command_not_found');
    expectError(await api('POST', `${room()}/command`, { command: 'cat', stdin_open: true }), 400, 'validation_error');
    const tooMuch = await api('POST', `${room()}/command`, { command: 'wc -c', stdin: 'x'.repeat(MAX_STDIN + 1) });
    expectError(tooMuch, 413, 'stdin_too_large');
    assert.match(tooMuch.json().message, /ROOMKIT_MAX_STDIN_BYTES/);
    // At the limit it is taken.
    assert.equal((await run({ command: 'wc -c', stdin: 'x'.repeat(MAX_STDIN) })).stdout.trim(), String(MAX_STDIN));
    expectError(await api('POST', `${room()}/command`, { command: 'cat', stdin: 'not base64!', stdin_encoding: 'base64' }), 400, 'validation_error');

    // A running command whose stdin is not open.
    const sleeper = await api('POST', `${room()}/command`, { command: 'sleep 30', background: true });
    assert.equal(sleeper.statusCode, 202, sleeper.body);
    const sleeperId = sleeper.json().command_id;
    const notOpen = await stdinOf(sleeperId, { data: 'x' });
    expectError(notOpen, 409, 'stdin_not_open');
    assert.match(notOpen.json().message, /stdin_open/);
    assert.equal((await api('POST', `${room()}/commands/${sleeperId}/kill`, {})).statusCode, 200);
    // An ended command.
    expectError(await stdinOf(sleeperId, { data: 'x' }), 409, 'command_not_running');

    // An open stdin: nothing to do; too much at once; a write after the close.
    const reader = await api('POST', `${room()}/command`, { command: 'cat > /dev/null; sleep 30', background: true, stdin_open: true });
    assert.equal(reader.statusCode, 202, reader.body);
    const readerId = reader.json().command_id;
    expectError(await stdinOf(readerId, {}), 400, 'validation_error');
    expectError(await stdinOf(readerId, { data: 'y'.repeat(MAX_STDIN + 1) }), 413, 'stdin_too_large');
    assert.equal((await stdinOf(readerId, { close: true })).statusCode, 200);
    expectError(await stdinOf(readerId, { data: 'late' }), 409, 'stdin_not_open');
    assert.equal((await api('POST', `${room()}/commands/${readerId}/kill`, {})).statusCode, 200);
  });

  it('records a write in the audit trail as command.stdin, never the input', async () => {
    const secret = 'stdin-secret-that-must-never-be-recorded-41c7';
    const res = await api('POST', `${room()}/command`, { command: 'cat', background: true, stdin_open: true });
    const commandId = res.json().command_id;
    assert.equal((await api('POST', `${room()}/commands/${commandId}/stdin`, { data: secret, close: true })).statusCode, 200);
    await waitFor(commandId, (s) => s.state !== 'running');
    await t.services.audit.flush();
    const events = (await api('GET', '/api/audit?limit=200')).json().events as any[];
    const write = events.find((e) => e.action === 'command.stdin');
    assert.ok(write, JSON.stringify(events.map((e) => e.action)));
    assert.equal(write.command_id, commandId);
    assert.equal(write.decision, 'allowed');
    assert.ok(!JSON.stringify(events).includes(secret), 'the input is in the audit trail');
  });
});

describe('the SDK and the CLI', () => {
  it('SDK: exec with stdin bytes, a background command fed with sendStdin and closed with closeStdin', async () => {
    const rk = new Roomkit({ baseUrl: base, apiKey: org.apiKey });
    const r = rk.room(profileId, 'main');
    const result = await r.exec('od -An -tx1 | tr -d " \\n"; echo x >&2', { stdin: new Uint8Array([0, 1, 254, 255]) });
    assert.equal(result.result.stdout, '0001feff');
    assert.equal(result.result.stderr, 'x\n');
    const streamed: { data: string; stream: string }[] = [];
    await r.execStream('echo a; sleep 0.3; echo b >&2', { onOutput: (data, { stream }) => streamed.push({ data, stream }) });
    assert.deepEqual(streamed, [{ data: 'a\n', stream: 'stdout' }, { data: 'b\n', stream: 'stderr' }]);
    const handle = await r.execBackground('tr a-z A-Z', { stdinOpen: true });
    assert.equal((await handle.sendStdin('hello ')).total_bytes, 6);
    await r.sendStdin(handle.commandId, new Uint8Array(Buffer.from('world\n')));
    assert.equal((await handle.closeStdin()).closed, true);
    const ended = await handle.wait({ pollIntervalMs: 100 });
    assert.equal(ended.result.stdout, 'HELLO WORLD\n');
  });

  it('CLI: exec gives piped stdin to the command and writes its stderr to stderr', async () => {
    const roomkit = async (args: string[], input: string) => {
      const child = spawn(process.execPath, [BIN, 'exec', '--profile', profileId, ...args], {
        env: { ...process.env, ROOMKIT_URL: base, ROOMKIT_API_KEY: org.apiKey },
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
      child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
      child.stdin.end(input);
      const [code] = (await once(child, 'close')) as [number];
      return { code, stdout, stderr };
    };
    const piped = await roomkit(['main', 'tr a-z A-Z; echo to-err >&2; exit 4'], 'shout\n');
    assert.equal(piped.code, 4, piped.stderr);
    assert.equal(piped.stdout, 'SHOUT\n');
    assert.equal(piped.stderr, 'to-err\n');
    const unread = await roomkit(['--no-stdin', 'main', 'wc -c'], 'not read\n');
    assert.equal(unread.code, 0, unread.stderr);
    assert.equal(unread.stdout.trim(), '0');
  });
});
