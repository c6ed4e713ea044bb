// Code contexts on a real gVisor instance over the REST API: state kept between runs,
// rich results (the last expression, display(), a matplotlib figure as PNG with chart
// data and as a file in files_changed, a pandas table as HTML), an exception's traceback,
// runaway code stopped by its time limit, by an interrupt and by its client going away
// (and code that ignores the interrupt ended), two contexts apart, a
// restart, a delete, the refusals, the stream's order, a pause with memory, a JavaScript
// context, and the
// run_code tool through MCP (state kept, a chart as image content). One
// instance, of a profile whose image has matplotlib, pandas and Node.js, serves every test (its
// image takes minutes to build on a cold cache).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';

let t: TestApp;
let org: TestOrg;
let profileId: string;
let base: string;

const room = () => `/api/profile/${profileId}/room/main`;

async function api(method: 'GET' | 'POST' | 'DELETE', url: string, payload?: Record<string, unknown>) {
  return t.app.inject({ method, url, headers: org.headers, ...(payload ? { payload } : {}) });
}

async function newContext(body: Record<string, unknown> = {}): Promise<string> {
  const res = await api('POST', `${room()}/contexts`, body);
  assert.equal(res.statusCode, 201, res.body);
  return res.json().context_id;
}

async function run(contextId: string, code: string, extra: Record<string, unknown> = {}) {
  const res = await api('POST', `${room()}/contexts/${contextId}/run`, { code, ...extra });
  assert.equal(res.statusCode, 200, res.body);
  return res.json();
}

before(async () => {
  t = await startTestApp({ gvisorPool: '10.245.0.0/25' });
  assert.ok('runtime' in t.services.runtime, 'the gVisor runtime is not available');
  org = await t.newOrg();
  const profile = await api('POST', '/api/profiles', {
    name: 'code',
    packages: ['python3-matplotlib', 'python3-pandas', 'nodejs'],
    memory_mb: 1024,
    disk_mb: 2048,
    network: { egress: 'none' },
    command_timeout_s: 60,
  });
  assert.equal(profile.statusCode, 201, profile.body);
  profileId = profile.json().profile_id;
  const created = await api('POST', room());
  assert.equal(created.statusCode, 201, created.body);
  base = await t.app.listen({ host: '127.0.0.1', port: 0 });
});

after(async () => {
  await t.closeLeavingNothing();
});

describe('a code context', () => {
  it('keeps a variable from one run to the next, and answers the last expression as the main result', async () => {
    const id = await newContext();
    const first = await run(id, 'x = 41\nprint("set")');
    assert.equal(first.stdout, 'set\n');
    assert.deepEqual(first.results, []);
    assert.equal(first.error, null);
    assert.equal(first.execution_count, 1);
    const second = await run(id, 'import os, subprocess\nsubprocess.run(["echo", "from a child"])\nx + 1');
    assert.equal(second.execution_count, 2);
    assert.equal(second.stdout, 'from a child\n');
    assert.deepEqual(second.results, [{ is_main_result: true, text: '42' }]);
  });

  it('runs in its cwd with its env, and a run\'s env only for that run', async () => {
    const made = await api('POST', `${room()}/contexts`, { cwd: '/tmp', env: { GREETING: 'hi' } });
    assert.equal(made.statusCode, 201, made.body);
    assert.equal(made.json().cwd, '/tmp');
    assert.equal(made.json().language, 'python');
    const id = made.json().context_id;
    const r = await run(id, 'import os\n(os.getcwd(), os.environ["GREETING"], os.environ.get("ONCE"))', { env: { ONCE: 'yes' } });
    assert.equal(r.results[0].text, "('/tmp', 'hi', 'yes')");
    assert.equal((await run(id, 'os.environ.get("ONCE")')).results.length, 0, 'None is no result');
  });

  it('returns a matplotlib figure as PNG with chart data, written as a file with a public_url', async () => {
    const id = await newContext();
    const r = await run(
      id,
      'import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [2, 4, 8], label="growth")\nplt.title("Growth")\nplt.xlabel("day")\nplt.ylabel("size")\nplt.show()',
    );
    assert.equal(r.error, null, JSON.stringify(r.error));
    assert.equal(r.results.length, 1);
    const figure = r.results[0];
    assert.equal(figure.is_main_result, false);
    assert.ok(Buffer.from(figure.png, 'base64').subarray(1, 4).equals(Buffer.from('PNG')), 'a PNG');
    assert.equal(figure.chart.type, 'line');
    assert.equal(figure.chart.title, 'Growth');
    assert.equal(figure.chart.x_label, 'day');
    assert.equal(figure.chart.x_unit, null);
    assert.equal(figure.chart.x_scale, 'linear');
    assert.equal(figure.chart.x_tick_labels.length, figure.chart.x_ticks.length);
    assert.ok(figure.chart.y_ticks.includes(4), `y ticks ${JSON.stringify(figure.chart.y_ticks)}`);
    assert.deepEqual(figure.chart.elements, [{ label: 'growth', points: [[1, 2], [2, 4], [3, 8]] }]);
    assert.match(figure.path, /^\/home\/user\/\.roomkit\/outputs\/.+\.png$/);
    assert.equal(r.files_changed.length, 1);
    const file = r.files_changed[0];
    assert.equal(file.path, figure.path);
    assert.equal(file.status, 'created');
    assert.equal(file.mime_type, 'image/png');
    assert.ok(file.public_url, 'linked');
    const served = await fetch(`${base}${file.public_url}`);
    assert.equal(served.status, 200);
    assert.deepEqual(Buffer.from(await served.arrayBuffer()), Buffer.from(figure.png, 'base64'));
  });

  it('shows a pandas DataFrame as HTML and text, and display() calls in order', async () => {
    const id = await newContext();
    const r = await run(id, 'import pandas as pd\ndisplay("first")\ndf = pd.DataFrame({"a": [1, 2]})\ndf');
    assert.equal(r.results.length, 2);
    assert.deepEqual(r.results[0], { is_main_result: false, text: "'first'" });
    assert.equal(r.results[1].is_main_result, true);
    assert.match(r.results[1].html, /<table/);
    assert.match(r.results[1].text, /a\n0\s+1\n1\s+2/);
  });

  it('returns an exception with its traceback, and stays usable', async () => {
    const id = await newContext();
    await run(id, 'kept = "still here"');
    const r = await run(id, 'def f():\n    return 1 / 0\nf()');
    assert.equal(r.error.name, 'ZeroDivisionError');
    assert.equal(r.error.value, 'division by zero');
    assert.match(r.error.traceback, /File "<cell-2>", line 2, in f/);
    assert.doesNotMatch(r.error.traceback, /code-context/, 'no frame of the driver');
    assert.equal((await run(id, 'kept')).results[0].text, "'still here'");
  });

  it('stops a runaway loop at its time limit, and the context goes on', async () => {
    const id = await newContext();
    await run(id, 'n = 0');
    const started = Date.now();
    const r = await run(id, 'while True:\n    n += 1', { timeout_s: 2 });
    assert.ok(Date.now() - started < 10_000);
    assert.equal(r.timed_out, true);
    assert.equal(r.interrupted, true);
    assert.equal(r.restarted, false);
    assert.equal(r.error.name, 'KeyboardInterrupt');
    assert.equal((await run(id, 'n > 0')).results[0].text, 'True');
  });

  it('stops a run when interrupted, and the context goes on', async () => {
    const id = await newContext();
    const running = api('POST', `${room()}/contexts/${id}/run`, { code: 'import time\nwhile True:\n    time.sleep(0.1)' });
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const interrupted = await api('POST', `${room()}/contexts/${id}/interrupt`);
    assert.equal(interrupted.statusCode, 200, interrupted.body);
    assert.deepEqual(interrupted.json(), { context_id: id, interrupted: true });
    const r = (await running).json();
    assert.equal(r.error.name, 'KeyboardInterrupt');
    assert.equal(r.timed_out, false);
    assert.equal((await run(id, '1 + 1')).results[0].text, '2');
    const idle = await api('POST', `${room()}/contexts/${id}/interrupt`);
    assert.equal(idle.json().interrupted, false);
  });

  it('ends code that ignores the interrupt, and answers that the context was started again', async () => {
    const id = await newContext();
    await run(id, 'lost = 1');
    const r = await run(id, 'import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass', { timeout_s: 1 });
    assert.equal(r.timed_out, true);
    assert.equal(r.restarted, true);
    assert.equal(r.error.name, 'KeyboardInterrupt');
    assert.match(r.error.value, /did not stop within 3 s/);
    const next = await run(id, 'lost');
    assert.equal(next.error.name, 'NameError', 'a new interpreter');
    assert.equal(next.restarted, false);
  });

  it('interrupts the code of a client that went away, so the next run is not held up', async () => {
    const id = await newContext();
    const gone = new AbortController();
    const abandoned = fetch(`${base}${room()}/contexts/${id}/run`, {
      method: 'POST',
      headers: { ...org.headers, 'content-type': 'application/json' },
      body: JSON.stringify({ code: 'import time\nwhile True:\n    time.sleep(0.1)' }),
      signal: gone.signal,
    }).catch(() => undefined);
    await new Promise((resolve) => setTimeout(resolve, 1000));
    gone.abort();
    await abandoned;
    const started = Date.now();
    assert.equal((await run(id, '"next"')).results[0].text, "'next'");
    assert.ok(Date.now() - started < 10_000, 'the abandoned run was stopped (its limit is 60 s)');
  });

  it('keeps two contexts apart, and a restart clears one', async () => {
    const a = await newContext();
    const b = await newContext();
    await run(a, 'who = "a"');
    await run(b, 'who = "b"');
    assert.equal((await run(a, 'who')).results[0].text, "'a'");
    assert.equal((await run(b, 'who')).results[0].text, "'b'");
    const restarted = await api('POST', `${room()}/contexts/${a}/restart`);
    assert.equal(restarted.statusCode, 200, restarted.body);
    const after = await run(a, 'who');
    assert.equal(after.error.name, 'NameError');
    assert.equal(after.execution_count, 1);
    assert.equal((await run(b, 'who')).results[0].text, "'b'");
    const listed = await api('GET', `${room()}/contexts`);
    const ids = listed.json().contexts.map((c: { context_id: string }) => c.context_id);
    assert.ok(ids.includes(a) && ids.includes(b));
  });

  it('answers 404 context_not_found once deleted', async () => {
    const id = await newContext();
    const deleted = await api('DELETE', `${room()}/contexts/${id}`);
    assert.equal(deleted.statusCode, 204, deleted.body);
    for (const res of [
      await api('POST', `${room()}/contexts/${id}/run`, { code: '1' }),
      await api('GET', `${room()}/contexts/${id}`),
      await api('DELETE', `${room()}/contexts/${id}`),
    ]) {
      assert.equal(res.statusCode, 404, res.body);
      assert.equal(res.json().error, 'context_not_found');
    }
  });

  it('refuses an unknown language and a cwd that does not exist, with clear messages', async () => {
    const language = await api('POST', `${room()}/contexts`, { language: 'cobol' });
    assert.equal(language.statusCode, 400);
    assert.equal(language.json().error, 'validation_error');
    assert.match(language.json().message, /unknown language "cobol"/);
    const cwd = await api('POST', `${room()}/contexts`, { cwd: '/no/such/dir' });
    assert.equal(cwd.statusCode, 400, cwd.body);
    assert.equal(cwd.json().error, 'validation_error');
    assert.match(cwd.json().message, /\/no\/such\/dir: No such file or directory/);
  });

  it('streams a run\'s events in order', async () => {
    const id = await newContext();
    const res = await fetch(`${base}${room()}/contexts/${id}/run`, {
      method: 'POST',
      headers: { ...org.headers, 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ code: 'import sys, time\nprint("one", flush=True)\ntime.sleep(0.2)\nprint("two", file=sys.stderr)\ndisplay(3)\n1/0' }),
    });
    assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
    const events = (await res.text())
      .split('\n\n')
      .filter((block) => block.startsWith('event: '))
      .map((block) => ({ event: block.split('\n')[0]!.slice(7), data: JSON.parse(block.split('\n')[1]!.slice(6)) }));
    assert.deepEqual(
      events.map((e) => e.event),
      ['stdout', 'stderr', 'result', 'error', 'end'],
    );
    assert.deepEqual(events[0]!.data, { text: 'one\n' });
    assert.equal(events[3]!.data.name, 'ZeroDivisionError');
    assert.equal(events[4]!.data.execution_count, 1);
  });

  it('runs JavaScript too: globals kept, the last expression, errors, an interrupt', async () => {
    const made = await api('POST', `${room()}/contexts`, { language: 'javascript' });
    assert.equal(made.statusCode, 201, made.body);
    assert.equal(made.json().language, 'javascript');
    const id = made.json().context_id;
    const first = await run(id, 'let n = 1; console.log("from js")');
    assert.equal(first.stdout, 'from js\n');
    assert.deepEqual(first.results, []);
    assert.deepEqual((await run(id, 'display([1, 2]); ({ n: n + 1 })')).results, [
      { is_main_result: false, text: '[ 1, 2 ]' },
      { is_main_result: true, text: '{ n: 2 }' },
    ]);
    const stopped = await run(id, 'while (true) n++', { timeout_s: 1 });
    assert.equal(stopped.timed_out, true);
    assert.equal(stopped.restarted, false);
    assert.equal(stopped.error.name, 'KeyboardInterrupt');
    assert.equal((await run(id, 'n > 1')).results[0].text, 'true');
    const failed = await run(id, 'function f() { return null.x }\nf()');
    assert.equal(failed.error.name, 'TypeError');
    assert.match(failed.error.traceback, /at f \(<cell-5>:1:/);
  });

  it('runs bash too: variables, functions and cwd kept, a non-zero status as the error, an interrupt, exit', async () => {
    const id = await newContext({ language: 'bash' });
    const first = await run(id, 'n=41; greet() { echo "hi $1"; }; cd /tmp; echo to-err >&2');
    assert.deepEqual([first.stdout, first.stderr, first.error, first.results], ['', 'to-err\n', null, []]);
    const second = await run(id, 'greet "$((n + 1))"; pwd; echo "[$ONCE]"', { env: { ONCE: 'a b' } });
    assert.equal(second.stdout, 'hi 42\n/tmp\n[a b]\n');
    assert.equal((await run(id, 'echo "[$ONCE]"')).stdout, '[]\n', 'a run\'s env is for that run only');
    const failed = await run(id, 'echo before; false');
    assert.equal(failed.stdout, 'before\n');
    assert.deepEqual(failed.error, { name: 'ExitStatus', value: '1', traceback: 'exit status 1' });
    const stopped = await run(id, 'while :; do n=$((n + 1)); done; echo never', { timeout_s: 1 });
    assert.equal(stopped.timed_out, true);
    assert.equal(stopped.restarted, false);
    assert.equal(stopped.error.name, 'KeyboardInterrupt');
    assert.equal(stopped.stdout, '');
    const running = api('POST', `${room()}/contexts/${id}/run`, { code: 'sleep 30; echo never' });
    await new Promise((resolve) => setTimeout(resolve, 1000));
    assert.equal((await api('POST', `${room()}/contexts/${id}/interrupt`)).json().interrupted, true);
    const interrupted = (await running).json();
    assert.equal(interrupted.error.name, 'KeyboardInterrupt');
    assert.ok(interrupted.duration_ms < 10_000, `interrupted after ${interrupted.duration_ms} ms`);
    assert.equal((await run(id, '[ "$n" -gt 41 ] && echo kept')).stdout, 'kept\n');
    const exited = await run(id, 'exit 3');
    assert.equal(exited.error.name, 'ExitStatus');
    assert.equal(exited.error.value, '3');
    assert.match(exited.error.traceback, /the next run has a new one/);
    const fresh = await run(id, 'echo "[$n]"; pwd');
    assert.equal(fresh.stdout, '[]\n/home/user\n', 'a new shell, in the context\'s cwd');
    assert.equal(fresh.error, null);
    assert.equal((await run(id, 'word="héllo ✓"; echo "$word"')).stdout, 'héllo ✓\n', 'code that is not ASCII reaches the shell as it is');
  });

  it('survives a pause and resume with memory', async () => {
    const id = await newContext();
    await run(id, 'remembered = [1, 2, 3]');
    const paused = await api('POST', `${room()}/pause`);
    assert.equal(paused.statusCode, 200, paused.body);
    assert.equal(paused.json().pause?.memory_kept, true, paused.body);
    const resumed = await api('POST', `${room()}/resume`);
    assert.equal(resumed.statusCode, 200, resumed.body);
    assert.equal((await run(id, 'sum(remembered)')).results[0].text, '6');
  });
});

describe('the run_code tool through MCP', () => {
  it('keeps state between calls in the room\'s context, and shows a chart as an image', async () => {
    const client = new Client({ name: 'roomkit-test', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { requestInit: { headers: { authorization: `Bearer ${org.apiKey}` } } }));
    try {
      const call = async (code: string) => (await client.callTool({ name: 'run_code', arguments: { room: 'main', profile: 'code', code } })) as CallToolResult;
      const first = await call('total = 40\nprint("set")');
      assert.equal(first.isError, false);
      assert.match((first.content[0] as { text: string }).text, /Output:\nset/);
      const second = await call('total + 2');
      assert.match((second.content[0] as { text: string }).text, /Result:\n42/);
      const chart = await call('import matplotlib.pyplot as plt\nplt.bar(["a", "b"], [1, 2])\nplt.title("Two")\nplt.show()');
      assert.equal(chart.isError, false, JSON.stringify(chart.content[0]));
      assert.match((chart.content[0] as { text: string }).text, /a bar chart "Two", image attached/);
      const image = chart.content.find((c) => c.type === 'image') as { data: string; mimeType: string } | undefined;
      assert.equal(image?.mimeType, 'image/png');
      assert.ok(Buffer.from(image!.data, 'base64').subarray(1, 4).equals(Buffer.from('PNG')));
      const failed = await call('undefined_name');
      assert.equal(failed.isError, true);
      assert.match((failed.content[0] as { text: string }).text, /NameError: name 'undefined_name' is not defined/);
    } finally {
      await client.close();
    }
  });
});
