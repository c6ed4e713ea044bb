// Code contexts through the clients, on a real gVisor instance of the default profile
// (every image has python3): the TypeScript SDK's room.contexts (create, list, get, run
// with and without streaming callbacks, interrupt, restart, delete) and `roomkit
// run-code` (a room's default context kept between runs, code from stdin, an exception's
// exit code and traceback, --json). The Python SDK's contexts are in its own suite
// (python/tests/test_contexts.py, run by python-sdk.test.ts).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { type Room, Roomkit, RoomkitError } from '../../sdk/src/index.ts';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';
import { collect, MAIN, run } from '../support/cli.ts';

let t: TestApp;
let org: TestOrg;
let baseUrl: string;
let room: Room;

before(async () => {
  t = await startTestApp({ gvisorPool: '10.244.128.0/26' });
  assert.ok('runtime' in t.services.runtime, 'the gVisor runtime is not available');
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  baseUrl = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  org = await t.newOrg();
  room = new Roomkit({ baseUrl, apiKey: org.apiKey }).room('default', 'ctx');
  await room.create();
});

after(async () => {
  await t.closeLeavingNothing();
});

describe("the TypeScript SDK's code contexts", () => {
  it('keeps state between runs, lists and gets the context, and answers results and errors', async () => {
    const context = await room.contexts.create();
    assert.equal(context.language, 'python');
    assert.equal(context.cwd, '/home/user');
    assert.equal((await context.run('x = 41')).error, null);
    const answered = await context.run('x + 1');
    assert.deepEqual(answered.results, [{ is_main_result: true, text: '42' }]);
    assert.equal(answered.execution_count, 2);
    assert.deepEqual((await room.contexts.list()).map((c) => c.contextId), [context.contextId]);
    assert.equal((await room.contexts.get(context.contextId)).language, 'python');
    const failed = await context.run('1 / 0');
    assert.equal(failed.error?.name, 'ZeroDivisionError');
    assert.equal((await context.run('x', { env: { ONCE: '1' } })).results[0]?.text, '41');
    await context.delete();
  });

  it('streams output, results and the error to their callbacks, in order, and answers the same result', async () => {
    const context = await room.contexts.create({ env: { GREETING: 'hello' } });
    const seen: string[] = [];
    const result = await context.run('import os, sys\nprint(os.environ["GREETING"])\nprint("oops", file=sys.stderr)\ndisplay(7)\nraise ValueError("bad")', {
      onStdout: (text) => seen.push(`out:${text}`),
      onStderr: (text) => seen.push(`err:${text}`),
      onResult: (shown) => seen.push(`result:${shown.text}`),
      onError: (error) => seen.push(`error:${error.name}`),
    });
    assert.deepEqual(seen, ['out:hello\n', 'err:oops\n', 'result:7', 'error:ValueError']);
    assert.equal(result.stdout, 'hello\n');
    assert.equal(result.error?.value, 'bad');
    await context.delete();
  });

  it('interrupts a run, restarts a context (its variables gone), and answers a deleted one as context_not_found', async () => {
    const context = await room.contexts.create();
    await context.run('kept = 1');
    const running = context.run('while True: pass', { onStdout: () => {} });
    // The run is under way once the interrupt finds it.
    let interrupted = false;
    for (let i = 0; i < 50 && !interrupted; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      interrupted = (await context.interrupt()).interrupted;
    }
    assert.ok(interrupted, 'the interrupt found the run');
    const stopped = await running;
    assert.equal(stopped.interrupted, true);
    assert.equal(stopped.error?.name, 'KeyboardInterrupt');
    assert.equal((await context.run('kept')).results[0]?.text, '1', 'state kept');
    const restarted = await context.restart();
    assert.equal(restarted.contextId, context.contextId);
    assert.equal((await context.run('kept')).error?.name, 'NameError');
    await context.delete();
    const gone = await context.run('1').then(
      () => undefined,
      (err: unknown) => err,
    );
    assert.ok(gone instanceof RoomkitError);
    assert.equal(gone.code, 'context_not_found');
  });
});

describe('roomkit run-code', () => {
  const cli = (args: string[]) => run(['run-code', '--url', baseUrl, 'ctx', ...args], { env: { ROOMKIT_API_KEY: org.apiKey } });

  it("runs in the room's default context, kept from one run to the next", async () => {
    const first = await cli(['y = 5\nprint("set")']);
    assert.equal(first.code, 0, first.stderr);
    assert.equal(first.stdout, 'set\n');
    assert.match(first.stderr, /started a python context [0-9a-f-]{36}/);
    const second = await cli(['y * 2']);
    assert.equal(second.code, 0, second.stderr);
    assert.equal(second.stdout, '10\n');
    assert.equal(second.stderr, '', 'no second context');
  });

  it('reads the code from stdin with -, and prints --json', async () => {
    const child = spawn(process.execPath, [MAIN, 'run-code', '--url', baseUrl, '--json', 'ctx', '-'], {
      env: { ...process.env, ROOMKIT_API_KEY: org.apiKey },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    child.stdin.end('y + 1\n');
    const res = await collect(child);
    assert.equal(res.code, 0, res.stderr);
    const body = JSON.parse(res.stdout) as { results: { text: string }[]; error: unknown };
    assert.equal(body.results[0]?.text, '6');
    assert.equal(body.error, null);
  });

  it('exits 1 with the traceback on stderr when the code raises, and 2 for --context with --language', async () => {
    const raised = await cli(['def f():\n    return {}["missing"]\nf()']);
    assert.equal(raised.code, 1);
    assert.match(raised.stderr, /KeyError: 'missing'/);
    assert.match(raised.stderr, /in f/);
    const both = await cli(['--language', 'python', '--context', '00000000-0000-4000-8000-000000000000', '1']);
    assert.equal(both.code, 2);
    assert.match(both.stderr, /do not go together/);
    const missing = await cli(['--context', '00000000-0000-4000-8000-000000000000', '1']);
    assert.equal(missing.code, 125);
    assert.match(missing.stderr, /context_not_found/);
  });
});
