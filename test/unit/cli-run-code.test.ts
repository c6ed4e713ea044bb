// `roomkit run-code` against a server listening on a port, over the runtime test double,
// which runs no interpreter: the refusals before any code runs, each with its exit code
// (a usage error 2, roomkit's own failure 125) and its one line on stderr. Code that
// runs is in test/host/sdk-contexts.test.ts.
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';
import { run } from '../support/cli.ts';

let t: TestApp;
let org: TestOrg;
let env: NodeJS.ProcessEnv;

before(async () => {
  t = await startTestApp();
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  org = await t.newOrg();
  env = { ROOMKIT_URL: `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`, ROOMKIT_API_KEY: org.apiKey };
  const created = await run(['create', 'cells'], { env });
  assert.equal(created.code, 0, created.stderr);
});
after(() => t.close());

describe('roomkit run-code', () => {
  it('refuses --context with --language as a usage error (exit 2), before any request', async () => {
    const res = await run(['run-code', '--context', '00000000-0000-4000-8000-000000000000', '--language', 'python', 'cells', '1'], { env });
    assert.equal(res.code, 2);
    assert.equal(res.stderr, 'roomkit: error validation_error: --context and --language do not go together: a context has its language\n');
  });

  it("exits 125 with the server's refusal: a room without an instance, a runtime without interpreters, a context that is not there", async () => {
    const empty = await run(['run-code', 'no-instance', '1'], { env });
    assert.equal(empty.code, 125);
    assert.match(empty.stderr, /^roomkit: error instance_not_found: /);
    const double = await run(['run-code', 'cells', 'x = 1'], { env });
    assert.equal(double.code, 125);
    assert.match(double.stderr, /^roomkit: error feature_unavailable: .*cannot run code contexts/);
    const missing = await run(['run-code', '--context', '00000000-0000-4000-8000-000000000000', 'cells', '1'], { env });
    assert.equal(missing.code, 125);
    assert.match(missing.stderr, /^roomkit: error context_not_found: /);
    assert.equal(missing.stdout, '');
  });

  it('needs a key, as every client command does (exit 2)', async () => {
    const res = await run(['run-code', 'cells', '1'], { env: { ...env, ROOMKIT_API_KEY: '' } });
    assert.equal(res.code, 2);
    assert.match(res.stderr, /missing_api_key/);
  });
});
