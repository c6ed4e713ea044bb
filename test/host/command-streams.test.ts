// Streamed and background commands on a real gVisor instance, over real HTTP: the
// Server-Sent Events of a command as it prints, what happens when the client goes away,
// background commands read from an offset, and kill with a signal.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';
import { until } from '../support/until.ts';

let t: TestApp;
let org: TestOrg;
let profileId: string;
let instanceId: string;
let base: string;

const room = () => `/api/profile/${profileId}/room/main`;

interface SseEvent {
  event: string;
  data: any;
  /** Milliseconds from the request to the event's arrival. */
  at: number;
}

/**
 * POSTs a command over HTTP and reads its event stream as it arrives; `until` may stop
 * reading early (the connection is then closed, as a client that goes away does).
 */
async function streamCommand(body: Record<string, unknown>, options: { headers?: Record<string, string>; until?: (e: SseEvent) => boolean } = {}) {
  const controller = new AbortController();
  const started = Date.now();
  const res = await fetch(`${base}${room()}/command`, {
    method: 'POST',
    headers: { ...org.headers, 'content-type': 'application/json', ...options.headers },
    body: JSON.stringify(body),
    signal: controller.signal,
  });
  const events: SseEvent[] = [];
  if (!res.headers.get('content-type')?.startsWith('text/event-stream')) return { res, events, json: (await res.json()) as any };
  const decoder = new TextDecoder();
  let buffered = '';
  const reader = res.body!.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffered += decoder.decode(value, { stream: true });
      let cut: number;
      while ((cut = buffered.indexOf('\n\n')) >= 0) {
        const block = buffered.slice(0, cut);
        buffered = buffered.slice(cut + 2);
        const lines = block.split('\n').filter((l) => !l.startsWith(':'));
        if (lines.length === 0) continue;
        const event = lines.find((l) => l.startsWith('event: '))!.slice(7);
        const data = JSON.parse(lines.find((l) => l.startsWith('data: '))!.slice(6));
        const e = { event, data, at: Date.now() - started };
        events.push(e);
        if (options.until?.(e)) {
          controller.abort();
          return { res, events, json: undefined as any };
        }
      }
    }
  } catch (err) {
    if (!controller.signal.aborted) throw err;
  }
  return { res, events, json: undefined as any };
}

async function api(method: 'GET' | 'POST' | 'DELETE', url: string, payload?: Record<string, unknown>) {
  return t.app.inject({ method, url, headers: org.headers, ...(payload ? { payload } : {}) });
}

/** Polls a command until it is no longer running. */
async function waitForEnd(commandId: string, timeoutMs = 20_000) {
  return until(
    `command ${commandId} to end`,
    async () => {
      const res = await api('GET', `${room()}/commands/${commandId}`);
      assert.equal(res.statusCode, 200, res.body);
      const body = res.json();
      return body.state !== 'running' ? body : undefined;
    },
    { timeoutMs, everyMs: 200 },
  );
}

/** Processes in the instance whose command line starts with a match of `pattern`. */
async function countProcesses(pattern: string): Promise<number> {
  const res = await api('POST', `${room()}/command`, { command: `ps -eo args | grep -c -- '^${pattern}' || true` });
  return Number(res.json().result.output.trim());
}

before(async () => {
  t = await startTestApp({ gvisorPool: '10.226.0.0/24' });
  assert.ok('runtime' in t.services.runtime, 'the gVisor runtime is not available');
  org = await t.newOrg();
  const profile = await api('POST', '/api/profiles', { name: 'streams', memory_mb: 512, disk_mb: 1024, network: { egress: 'none' }, command_timeout_s: 30 });
  assert.equal(profile.statusCode, 201, profile.body);
  profileId = profile.json().profile_id;
  const created = await api('POST', room());
  assert.equal(created.statusCode, 201, created.body);
  instanceId = created.json().instance_id;
  base = await t.app.listen({ host: '127.0.0.1', port: 0 });
});

after(async () => {
  await t.closeLeavingNothing();
});

describe('a streamed command', () => {
  it('sends started, the output as it is printed with exact offsets, then the CommandResult', async () => {
    const { res, events } = await streamCommand({ command: 'echo one; sleep 1; echo two >&2; sleep 1; printf "drei\\n"; touch streamed.txt; exit 3', stream: true });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('cache-control'), 'no-store');
    assert.equal(events[0]!.event, 'started');
    assert.equal(events[0]!.data.instance_id, instanceId);
    const outputs = events.filter((e) => e.event === 'output');
    const last = events.at(-1)!;
    assert.equal(last.event, 'result');
    assert.deepEqual(events.map((e) => e.event), ['started', ...outputs.map(() => 'output'), 'result']);
    // Pieces are contiguous and add up to the result's output.
    let offset = 0;
    for (const piece of outputs) {
      assert.equal(piece.data.offset, offset);
      offset += Buffer.byteLength(piece.data.data);
    }
    const streamed = outputs.map((e) => e.data.data).join('');
    assert.equal(streamed, 'one\ntwo\ndrei\n');
    // Each piece says its stream: stdout or stderr through the agent, `output` without it.
    const apart = last.data.result.stderr !== null;
    for (const piece of outputs) assert.ok(apart ? ['stdout', 'stderr'].includes(piece.data.stream) : piece.data.stream === 'output', JSON.stringify(piece.data));
    if (apart) assert.equal(outputs.filter((e) => e.data.stream === 'stderr').map((e) => e.data.data).join(''), 'two\n');
    assert.equal(last.data.result.output, streamed);
    assert.equal(last.data.result.exit_code, 3);
    assert.equal(last.data.status, 'error');
    assert.equal(last.data.command_id, events[0]!.data.command_id);
    assert.deepEqual(last.data.result.files_changed.map((c: { path: string }) => c.path), ['/home/user/streamed.txt']);
    // Printed a second apart, and received as printed, not all at the end.
    const first = outputs.find((e) => e.data.data.includes('one'))!;
    assert.ok(last.at - first.at >= 1500, `"one" came ${first.at} ms in, the result ${last.at} ms in`);
  });

  it('streams for Accept: text/event-stream too, and answers JSON without it', async () => {
    const streamed = await streamCommand({ command: 'echo accept' }, { headers: { accept: 'text/event-stream' } });
    assert.equal(streamed.events.at(-1)!.data.result.output, 'accept\n');
    const plain = await streamCommand({ command: 'echo plain' });
    assert.equal(plain.res.status, 200);
    assert.equal(plain.json.result.output, 'plain\n');
  });

  it('answers errors before the command starts with the Error body, not a stream', async () => {
    const res = await fetch(`${base}/api/profile/${profileId}/room/no-instance/command`, {
      method: 'POST',
      headers: { ...org.headers, 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ command: 'true' }),
    });
    assert.equal(res.status, 404);
    assert.equal(((await res.json()) as { error: string }).error, 'instance_not_found');
    const both = await api('POST', `${room()}/command`, { command: 'true', stream: true, background: true });
    assert.equal(both.statusCode, 400);
    assert.match(both.json().message, /exclude each other/);
  });

  it('keeps running when the client goes away, and its output and result stay readable by id', async () => {
    const { events } = await streamCommand(
      { command: 'echo before; sleep 2; echo after; echo done > left-behind.txt', stream: true },
      { until: (e) => e.event === 'output' },
    );
    const commandId = events[0]!.data.command_id;
    const ended = await waitForEnd(commandId);
    assert.equal(ended.state, 'exited');
    assert.equal(ended.exit_code, 0);
    assert.equal(ended.output, 'before\nafter\n');
    assert.deepEqual(ended.files_changed.map((c: { path: string }) => c.path), ['/home/user/left-behind.txt']);
  });

  it('is killed with every process when the client goes away, if it asked for that', async () => {
    const { events } = await streamCommand(
      { command: 'echo waiting; sleep 727 & sleep 728', stream: true, kill_on_disconnect: true },
      { until: (e) => e.event === 'output' },
    );
    const ended = await waitForEnd(events[0]!.data.command_id);
    assert.equal(ended.state, 'killed');
    assert.equal(ended.exit_code, 137);
    assert.equal(await countProcesses('sleep 72[78]'), 0);
  });
});

describe('a background command', () => {
  it('answers 202 at once and is read on from where the last read stopped', async () => {
    const started = Date.now();
    const res = await api('POST', `${room()}/command`, { command: 'for i in 1 2 3 4 5 6; do echo "tick $i"; sleep 0.5; done; echo made > bg.txt', background: true });
    assert.equal(res.statusCode, 202, res.body);
    assert.ok(Date.now() - started < 2000, `answered after ${Date.now() - started} ms`);
    const status = res.json();
    assert.equal(status.state, 'running');
    assert.equal(status.background, true);
    assert.equal(status.exit_code, null);

    let offset = 0;
    const pieces: string[] = [];
    let reads = 0;
    for (;;) {
      const read = await api('GET', `${room()}/commands/${status.command_id}?offset=${offset}`);
      const body = read.json();
      assert.equal(body.output_offset, offset);
      assert.equal(Buffer.byteLength(body.output), body.next_offset - offset);
      pieces.push(body.output);
      offset = body.next_offset;
      reads++;
      if (body.state !== 'running') {
        assert.equal(body.state, 'exited');
        assert.equal(body.exit_code, 0);
        assert.equal(body.output_bytes, offset);
        assert.deepEqual(body.files_changed.map((c: { path: string; status: string }) => [c.path, c.status]), [['/home/user/bg.txt', 'created']]);
        break;
      }
      await new Promise((r) => setTimeout(r, 400));
    }
    assert.equal(pieces.join(''), [1, 2, 3, 4, 5, 6].map((i) => `tick ${i}\n`).join(''));
    assert.ok(pieces.filter((p) => p !== '').length >= 3, `the output came in ${pieces.filter(Boolean).length} reads of ${reads}: not as it was printed`);
  });

  it('is not bound by the profile\'s time limit, but by its own when it gives one', async () => {
    const long = await api('POST', `${room()}/command`, { command: 'true', background: true, timeout_s: 3600 });
    assert.equal(long.statusCode, 202, long.body);
    const limited = await api('POST', `${room()}/command`, { command: 'echo started; sleep 60', background: true, timeout_s: 1 });
    const ended = await waitForEnd(limited.json().command_id);
    assert.equal(ended.state, 'timed_out');
    assert.equal(ended.timed_out, true);
    assert.equal(ended.exit_code, 124);
    assert.equal(ended.output, 'started\n');
  });

  it('keeps its instance from going idle while it runs', async () => {
    const res = await api('POST', `${room()}/command`, { command: 'sleep 5', background: true });
    // As if the idle limit (30 minutes) had long passed, but not the lifetime limit (a day).
    const expired = await t.services.instances.expire(Date.now() + 2 * 3600_000);
    assert.deepEqual(expired, []);
    const killed = await api('POST', `${room()}/commands/${res.json().command_id}/kill`);
    assert.equal(killed.statusCode, 200, killed.body);
  });

  it('is killed with everything it started, and then says killed', async () => {
    const res = await api('POST', `${room()}/command`, { command: 'sleep 737 & (sleep 738 &); echo up; sleep 739', background: true });
    const commandId = res.json().command_id;
    await new Promise((r) => setTimeout(r, 500));
    assert.equal(await countProcesses('sleep 73[789]'), 3);
    const killed = await api('POST', `${room()}/commands/${commandId}/kill`);
    assert.equal(killed.statusCode, 200, killed.body);
    assert.equal(killed.json().state, 'killed');
    assert.equal(killed.json().exit_code, 137);
    assert.equal(await countProcesses('sleep 73[789]'), 0);
    const again = await api('POST', `${room()}/commands/${commandId}/kill`);
    assert.equal(again.statusCode, 409);
    assert.equal(again.json().error, 'command_not_running');
  });

  it('gets the signal it is sent: TERM runs the command\'s own handler', async () => {
    const res = await api('POST', `${room()}/command`, {
      command: 'trap \'echo got TERM; exit 5\' TERM; echo ready; while :; do sleep 0.2; done',
      background: true,
    });
    const commandId = res.json().command_id;
    await new Promise((r) => setTimeout(r, 500));
    const sent = await api('POST', `${room()}/commands/${commandId}/kill`, { signal: 'TERM' });
    assert.equal(sent.statusCode, 200, sent.body);
    const ended = await waitForEnd(commandId);
    assert.equal(ended.state, 'exited');
    assert.equal(ended.exit_code, 5);
    // The shell may also report its `sleep` child's death ("Terminated", on stderr: with the
    // agent it may come before or after the handler's line on stdout).
    assert.match(ended.output, /^ready\n(Terminated\ngot TERM\n|got TERM\n(Terminated\n)?)$/);
  });

  it('is recorded as interrupted, not exited, when its instance is deleted under it', async () => {
    const doomed = `/api/profile/${profileId}/room/doomed`;
    const created = await api('POST', doomed);
    assert.equal(created.statusCode, 201, created.body);
    const res = await api('POST', `${doomed}/command`, { command: 'echo started; sleep 600', background: true });
    assert.equal(res.statusCode, 202, res.body);
    const commandId = res.json().command_id;
    // Deleted once it has surely started (a fixed wait was too short on a busy host).
    for (const until = Date.now() + 10_000; Date.now() < until; ) {
      if ((await api('GET', `${doomed}/commands/${commandId}`)).json().output === 'started\n') break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const deleted = await api('DELETE', doomed);
    assert.equal(deleted.statusCode, 200, deleted.body);
    assert.equal(deleted.json().state, 'stopped');
    const deadline = Date.now() + 10_000;
    let status;
    do {
      status = (await api('GET', `${doomed}/commands/${commandId}`)).json();
      if (status.state !== 'running') break;
      await new Promise((r) => setTimeout(r, 200));
    } while (Date.now() < deadline);
    assert.equal(status.state, 'interrupted');
    // (runsc may add a line of its own about the sandbox going away.)
    assert.match(status.output, /^started\n/);
  });

  it('answers 404 command_not_found for an unknown id, and 400 for a bad signal', async () => {
    const unknown = await api('GET', `${room()}/commands/00000000-0000-4000-8000-000000000000`);
    assert.equal(unknown.statusCode, 404);
    assert.equal(unknown.json().error, 'command_not_found');
    // Killed at once, before its process may even exist: the kill must still end it.
    const res = await api('POST', `${room()}/command`, { command: 'sleep 30', background: true });
    const bad = await api('POST', `${room()}/commands/${res.json().command_id}/kill`, { signal: 'STOP' });
    assert.equal(bad.statusCode, 400);
    assert.equal(bad.json().error, 'validation_error');
    const killed = await api('POST', `${room()}/commands/${res.json().command_id}/kill`);
    assert.equal(killed.statusCode, 200);
    assert.equal(killed.json().state, 'killed');
  });
});
