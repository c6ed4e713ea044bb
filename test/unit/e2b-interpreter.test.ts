// E2B's code interpreter protocol (port 49999) over the runtime double, which runs no
// interpreter: how the `@e2b/code-interpreter` package's calls reach the adapter (at
// E2B_SANDBOX_URL and at a sandbox's 49999 host name), the credential they carry (the
// traffic token its create answers), and the refusals before any interpreter would
// start, as the package raises them. What a context does through it is tested on real
// instances (test/host/e2b-code-interpreter.test.ts).
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { NotFoundError, Sandbox as BaseSandbox } from 'e2b';
import { Sandbox, SandboxError, TimeoutError } from '@e2b/code-interpreter';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';

const PREVIEW_DOMAIN = 'interpreters.example.test';

let t: TestApp;
let org: TestOrg;
let base: string;
let opts: { apiKey: string; apiUrl: string; sandboxUrl: string };

before(async () => {
  t = await startTestApp({ config: { previewDomain: PREVIEW_DOMAIN } });
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  org = await t.newOrg();
  opts = { apiKey: org.apiKey, apiUrl: `${base}/e2b`, sandboxUrl: `${base}/e2b/envd` };
});

after(async () => {
  await t.close();
});

// A failed runCode leaves the package's request timer running (a minute, holding the
// test process open): runs meant to fail set no request timeout.
const failing = { requestTimeoutMs: 0 };

const tokenOf = (sandbox: BaseSandbox) => (sandbox as unknown as { envdAccessToken: string }).envdAccessToken;

describe("E2B's code interpreter protocol", () => {
  it("starts the package's default template in the organization's code-interpreter profile, answering a traffic token equal to the access token", async () => {
    const sandbox = await Sandbox.create(opts);
    assert.equal((await sandbox.getInfo()).name, 'code-interpreter');
    assert.equal((sandbox as unknown as { trafficAccessToken: string }).trafficAccessToken, tokenOf(sandbox));
    await sandbox.kill();
  });

  it('takes the traffic token or the access token, for its own sandbox only', async () => {
    const a = await Sandbox.create(opts);
    const b = await Sandbox.create(opts);
    const list = (sandboxId: string, headers: Record<string, string>) =>
      fetch(`${base}/e2b/envd/contexts`, { headers: { 'E2b-Sandbox-Id': sandboxId, 'E2b-Sandbox-Port': '49999', ...headers } });
    assert.equal((await list(a.sandboxId, {})).status, 401);
    const byTraffic = await list(a.sandboxId, { 'E2B-Traffic-Access-Token': tokenOf(a) });
    assert.equal(byTraffic.status, 200);
    assert.deepEqual(await byTraffic.json(), []);
    assert.equal((await list(a.sandboxId, { 'X-Access-Token': tokenOf(a) })).status, 200);
    assert.equal((await list(b.sandboxId, { 'E2B-Traffic-Access-Token': tokenOf(a) })).status, 401, "a token is good for its sandbox only");
    assert.deepEqual(await a.listCodeContexts(), [], 'the package lists through the same route');
    await a.kill();
    await b.kill();
  });

  it("is served at a sandbox's 49999 host name too, as the package addresses it without E2B_SANDBOX_URL", async () => {
    const sandbox = await Sandbox.create(opts);
    const res = await t.app.inject({
      method: 'GET',
      url: '/contexts',
      headers: { host: `49999-${sandbox.sandboxId}.${PREVIEW_DOMAIN}`, 'e2b-traffic-access-token': tokenOf(sandbox) },
    });
    assert.equal(res.statusCode, 200, res.body);
    assert.deepEqual(res.json(), []);
    await sandbox.kill();
  });

  it('answers a context that is not there as a NotFoundError, its empty-bodied JSON requests included', async () => {
    const sandbox = await Sandbox.create(opts);
    const missing = '00000000-0000-4000-8000-000000000000';
    await assert.rejects(sandbox.removeCodeContext(missing), NotFoundError);
    await assert.rejects(sandbox.restartCodeContext(missing), NotFoundError);
    await assert.rejects(sandbox.runCode('1', { ...failing, context: { id: missing, language: 'python', cwd: '/home/user' } }), NotFoundError);
    await sandbox.kill();
  });

  it('refuses a context where the runtime keeps no stdin open, and a language no context speaks', async () => {
    const sandbox = await Sandbox.create(opts);
    await assert.rejects(sandbox.createCodeContext({ language: 'python' }), (err: Error) => err instanceof SandboxError && /409/.test(err.message));
    await assert.rejects(sandbox.runCode('1', failing), (err: Error) => err instanceof SandboxError && /409/.test(err.message));
    await assert.rejects(sandbox.createCodeContext({ language: 'cobol' }), (err: Error) => err instanceof SandboxError && /400/.test(err.message));
    const raw = await fetch(`${base}/e2b/envd/execute`, {
      method: 'POST',
      headers: { 'E2b-Sandbox-Id': sandbox.sandboxId, 'X-Access-Token': tokenOf(sandbox), 'Content-Type': 'application/json' },
      body: JSON.stringify({ code: '1', context_id: '00000000-0000-4000-8000-000000000000', language: 'python' }),
    });
    assert.equal(raw.status, 400);
    assert.match(((await raw.json()) as { message: string }).message, /context or a language, not both/);
    await sandbox.kill();
  });

  it("answers 502 once the sandbox is gone, which the package raises as the sandbox's timeout", async () => {
    const sandbox = await Sandbox.create(opts);
    await sandbox.kill();
    await assert.rejects(sandbox.runCode('1', failing), TimeoutError);
    await assert.rejects(sandbox.listCodeContexts(), TimeoutError);
  });
});
