// E2B's code interpreter package (`@e2b/code-interpreter` from npm), pointed at a real
// roomkit listening on a port with real gVisor instances, as a team's E2B code would be:
// only its API URL, sandbox URL and key changed. `Sandbox.create()` starts the
// organization's code-interpreter profile (given Node.js here, for a JavaScript
// context); one sandbox serves every test but the last, which kills its own during a
// run. Its image takes minutes to build on a cold cache.
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { type BoxAndWhiskerChart, type LineChart, type OutputMessage, type PieChart, Sandbox, type SuperChart, TimeoutError } from '@e2b/code-interpreter';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';

let t: TestApp;
let org: TestOrg;
let opts: { apiKey: string; apiUrl: string; sandboxUrl: string };
let sbx: Sandbox;
const made: string[] = [];

async function create(): Promise<Sandbox> {
  const sandbox = await Sandbox.create(opts);
  made.push(sandbox.sandboxId);
  return sandbox;
}

before(async () => {
  t = await startTestApp({ gvisorPool: '10.244.64.0/26' });
  assert.ok('runtime' in t.services.runtime, 'the gVisor runtime is not available');
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  const base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  org = await t.newOrg();
  const profiles = await t.app.inject({ method: 'GET', url: '/api/profiles', headers: org.headers });
  const profile = (profiles.json() as { profiles: { profile_id: string; name: string; packages: string[] }[] }).profiles.find((p) => p.name === 'code-interpreter');
  assert.ok(profile, profiles.body);
  const patched = await t.app.inject({
    method: 'PATCH',
    url: `/api/profiles/${profile.profile_id}`,
    headers: org.headers,
    payload: { packages: [...profile.packages, 'nodejs'], memory_mb: 1024, disk_mb: 2048, network: { egress: 'none' }, command_timeout_s: 60 },
  });
  assert.equal(patched.statusCode, 200, patched.body);
  // The profile's image is built first, through REST: a build takes longer than an HTTP client waits for a create's answer.
  const warm = await t.app.inject({ method: 'POST', url: `/api/profile/${profile.profile_id}/room/image-build`, headers: org.headers });
  assert.equal(warm.statusCode, 201, warm.body);
  await t.app.inject({ method: 'DELETE', url: `/api/profile/${profile.profile_id}/room/image-build`, headers: org.headers });
  opts = { apiKey: org.apiKey, apiUrl: `${base}/e2b`, sandboxUrl: `${base}/e2b/envd` };
  sbx = await create();
});

after(async () => {
  try {
    for (const id of made) await Sandbox.kill(id, opts).catch(() => {});
    await t.closeLeavingNothing();
  } catch (err) {
    console.error(`e2b-code-interpreter test: sandboxes ${made.join(', ')}, data directory ${t.dataDir}`);
    throw err;
  }
});

describe('the code interpreter package against roomkit', () => {
  it("starts in the organization's code-interpreter profile and keeps state from one run to the next", async () => {
    assert.equal((await sbx.getInfo()).name, 'code-interpreter');
    const first = await sbx.runCode('x = 1');
    assert.equal(first.error, undefined);
    assert.deepEqual(first.results, []);
    const second = await sbx.runCode('x + 1');
    assert.equal(second.text, '2');
    assert.equal(second.executionCount, 2);
    const contexts = await sbx.listCodeContexts();
    assert.equal(contexts.length, 1, 'the default Python context');
    assert.equal(contexts[0]?.language, 'python');
    // The same context is roomkit's: REST lists it in the sandbox's room.
    const rest = await t.app.inject({ method: 'GET', url: '/api/instances?limit=50', headers: org.headers });
    const instance = (rest.json() as { instances: { instance_id: string; profile_id: string; room_id: string }[] }).instances.find((i) => i.instance_id === sbx.sandboxId);
    assert.ok(instance, rest.body);
    const { profile_id, room_id } = instance;
    const listed = await t.app.inject({ method: 'GET', url: `/api/profile/${profile_id}/room/${room_id}/contexts`, headers: org.headers });
    assert.deepEqual((listed.json() as { contexts: { context_id: string }[] }).contexts.map((c) => c.context_id), [contexts[0]?.id]);
  });

  it('streams stdout and stderr to their callbacks as the code prints them', async () => {
    const out: OutputMessage[] = [];
    const err: OutputMessage[] = [];
    const execution = await sbx.runCode('import sys\nprint("to out")\nprint("to err", file=sys.stderr)', { onStdout: (m) => void out.push(m), onStderr: (m) => void err.push(m) });
    assert.deepEqual(out.map((m) => m.line).join(''), 'to out\n');
    assert.deepEqual(err.map((m) => m.line).join(''), 'to err\n');
    assert.equal(err[0]?.error, true);
    assert.deepEqual(execution.logs, { stdout: ['to out\n'], stderr: ['to err\n'] });
  });

  it('returns a matplotlib chart as a PNG result with its chart data', async () => {
    const execution = await sbx.runCode(
      'import matplotlib.pyplot as plt\nplt.bar(["a", "b"], [3, 5], label="counts")\nplt.title("Counts")\nplt.show()',
    );
    assert.equal(execution.error, undefined, JSON.stringify(execution.error));
    assert.equal(execution.results.length, 1);
    const chart = execution.results[0]!;
    assert.equal(chart.isMainResult, false);
    assert.ok(Buffer.from(chart.png ?? '', 'base64').subarray(1, 4).equals(Buffer.from('PNG')), 'a PNG');
    assert.ok(chart.formats().includes('png'));
    const data = chart.chart as { type: string; title: string; elements: { label: string; value: number }[] } | undefined;
    assert.equal(data?.type, 'bar');
    assert.equal(data?.title, 'Counts');
    assert.deepEqual(data?.elements.map((e) => [e.label, e.value]), [['a', 3], ['b', 5]]);
  });

  it("gives a chart's units, scales, ticks and per-kind elements in the package's chart types", async () => {
    const execution = await sbx.runCode(
      [
        'import matplotlib.pyplot as plt',
        'fig, (line, pie, box) = plt.subplots(1, 3)',
        'line.plot([1, 10, 100], [1, 2, 3], label="growth")',
        'line.set_xscale("log")',
        'line.set_xlabel("Time (s)")',
        'line.set_ylabel("Size [MB]")',
        'pie.pie([1, 3], labels=["small", "large"])',
        'box.boxplot([[1, 2, 3, 4, 5, 40]], labels=["A"])',
        'plt.show()',
      ].join('\n'),
    );
    assert.equal(execution.error, undefined, JSON.stringify(execution.error));
    const chart = execution.results[0]?.chart as SuperChart | undefined;
    assert.equal(chart?.type, 'superchart');
    const [line, pie, box] = chart!.elements as [LineChart, PieChart, BoxAndWhiskerChart];
    assert.equal(line.type, 'line');
    assert.deepEqual([line.x_unit, line.y_unit, line.x_scale, line.y_scale], ['s', 'MB', 'log', 'linear']);
    assert.ok(line.x_ticks.includes(10) && line.x_ticks.includes(100), `log ticks ${JSON.stringify(line.x_ticks)}`);
    assert.equal(line.x_tick_labels.length, line.x_ticks.length);
    assert.deepEqual(line.elements, [{ label: 'growth', points: [[1, 1], [10, 2], [100, 3]] }]);
    assert.equal(pie.type, 'pie');
    assert.deepEqual(pie.elements.map((e) => [e.label, Math.round(e.angle), e.radius]), [['small', 90], ['large', 270]].map(([l, a]) => [l, a, 1]));
    assert.equal(box.type, 'box_and_whisker');
    assert.deepEqual(box.elements, [{ label: 'A', min: 1, first_quartile: 2.25, median: 3.5, third_quartile: 4.75, max: 5, outliers: [40] }]);
  });

  it('shows a pandas table as HTML and text', async () => {
    const execution = await sbx.runCode('import pandas as pd\npd.DataFrame({"a": [1, 2], "b": [3, 4]})');
    const table = execution.results[0];
    assert.equal(table?.isMainResult, true);
    assert.match(table?.html ?? '', /<table/);
    assert.match(table?.text ?? '', /a\s+b\n0\s+1\s+3\n1\s+2\s+4/);
  });

  it("answers an exception in the SDK's error shape, with its traceback, and the context goes on", async () => {
    const seen: unknown[] = [];
    const execution = await sbx.runCode('def f():\n    return 1 / 0\nf()', { onError: (e) => void seen.push(e) });
    assert.equal(execution.error?.name, 'ZeroDivisionError');
    assert.equal(execution.error?.value, 'division by zero');
    assert.match(execution.error?.traceback ?? '', /line 2, in f/);
    assert.equal(seen.length, 1);
    assert.equal((await sbx.runCode('x')).text, '1', 'state kept');
  });

  it("gives a run its env vars for that run only, and a context its cwd", async () => {
    const once = await sbx.runCode('import os\nos.environ.get("ONCE")', { envs: { ONCE: 'yes' } });
    assert.equal(once.text, "'yes'");
    assert.deepEqual((await sbx.runCode('os.environ.get("ONCE")')).results, [], 'None is no result');
    const context = await sbx.createCodeContext({ cwd: '/tmp' });
    assert.equal(context.cwd, '/tmp');
    assert.equal(context.language, 'python');
    assert.equal((await sbx.runCode('import os\nos.getcwd()', { context })).text, "'/tmp'");
    await sbx.removeCodeContext(context);
  });

  it('runs JavaScript, in a context made for it and in its default one', async () => {
    const context = await sbx.createCodeContext({ language: 'js' });
    assert.equal(context.language, 'javascript');
    await sbx.runCode('let n = 20', { context });
    assert.equal((await sbx.runCode('n * 2 + 2', { context })).text, '42');
    const byLanguage = await sbx.runCode('console.log("from node")', { language: 'javascript' });
    assert.deepEqual(byLanguage.logs.stdout, ['from node\n']);
    await sbx.removeCodeContext(context.id);
  });

  it("runs bash in its default context: variables and cwd kept, a failing command as the error", async () => {
    const first = await sbx.runCode('greeting=hello; cd /tmp', { language: 'bash' });
    assert.equal(first.error, undefined, JSON.stringify(first.error));
    const second = await sbx.runCode('echo "$greeting from $PWD"', { language: 'bash' });
    assert.deepEqual(second.logs.stdout, ['hello from /tmp\n']);
    const failed = await sbx.runCode('ls /no/such', { language: 'bash' });
    assert.equal(failed.error?.name, 'ExitStatus');
    assert.equal(failed.error?.value, '2');
    assert.match(failed.logs.stderr.join(''), /No such file or directory/);
  });

  it('creates, lists, restarts and removes contexts: two are apart, a restart clears one, a removed one is gone', async () => {
    const a = await sbx.createCodeContext();
    const b = await sbx.createCodeContext();
    await sbx.runCode('v = "a"', { context: a });
    await sbx.runCode('v = "b"', { context: b });
    assert.equal((await sbx.runCode('v', { context: a })).text, "'a'");
    const ids = (await sbx.listCodeContexts()).map((c) => c.id);
    assert.ok(ids.includes(a.id) && ids.includes(b.id), JSON.stringify(ids));
    await sbx.restartCodeContext(a);
    assert.equal((await sbx.runCode('v', { context: a })).error?.name, 'NameError');
    assert.equal((await sbx.runCode('v', { context: b })).text, "'b'");
    await sbx.removeCodeContext(a);
    await sbx.removeCodeContext(b);
    assert.ok(!(await sbx.listCodeContexts()).some((c) => c.id === a.id || c.id === b.id));
    await assert.rejects(sbx.runCode('1', { context: a }), /404|not found|no code context/i);
  });

  it('interrupts code whose client gave up (its timeoutMs), and the context keeps its state', async () => {
    const context = await sbx.createCodeContext();
    await sbx.runCode('kept = 7\nticks = 0', { context });
    const started = Date.now();
    await assert.rejects(sbx.runCode('import time\nwhile True:\n    ticks += 1\n    time.sleep(0.05)', { context, timeoutMs: 1500 }), TimeoutError);
    assert.ok(Date.now() - started < 10_000);
    // The next run waits its turn behind the interrupted one, which stops at once.
    const after = await sbx.runCode('(kept, ticks > 0)', { context });
    assert.equal(after.text, '(7, True)');
    const ticks = (await sbx.runCode('ticks', { context })).text;
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal((await sbx.runCode('ticks', { context })).text, ticks, 'the loop no longer runs');
    await sbx.removeCodeContext(context);
  });

  it('lists the default Python context on a fresh sandbox, the one a run without a context uses', async () => {
    const fresh = await create();
    const first = await fresh.listCodeContexts();
    assert.deepEqual(first.map((c) => [c.language, c.cwd]), [['python', '/home/user']]);
    await fresh.runCode('seen = 1');
    const again = await fresh.listCodeContexts();
    assert.deepEqual(again.map((c) => c.id), [first[0]!.id], 'the run went to it');
    assert.equal((await fresh.runCode('seen', { context: first[0]! })).text, '1');
    await fresh.removeCodeContext(first[0]!.id);
    assert.deepEqual(await fresh.listCodeContexts(), [], 'a default removed stays removed in the listing');
    await Sandbox.kill(fresh.sandboxId, opts);
  });

  it('ends a run whose sandbox is killed during it, as the SDK expects of a sandbox gone', async () => {
    const doomed = await create();
    await doomed.runCode('1');
    const running = doomed.runCode('import time\ntime.sleep(60)');
    await new Promise((resolve) => setTimeout(resolve, 1500));
    assert.equal(await Sandbox.kill(doomed.sandboxId, opts), true);
    await assert.rejects(running, (err: Error) => err instanceof TimeoutError && /killed|timeout/i.test(err.message));
  });
});
