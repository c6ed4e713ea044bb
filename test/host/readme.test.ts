// The README's examples, run as a reader would run them: every `sh` block from the first
// start on, one after another in one bash (they share API, AUTH, PROFILE), then the Python
// and TypeScript blocks, against a real server with real gVisor instances. The only
// changes to the text, each for a reason:
// - http://127.0.0.1:8080 becomes the test server's address (a port of its own);
// - .roomkit/initial-api-key becomes a key file of the test's organization;
// - `npx roomkit` becomes `node bin/roomkit.mjs` (npx outside the repository would
//   look for the package in the registry);
// - blocks that install or measure are not run: scripts/start and scripts/test (the
//   suite is that block), the SDK's `npm pack` (test/host/sdk-package.test.ts packs and
//   installs it), `npm run bench…` (benchmarks, not tests) and `npm install -g` (global
//   installs: test/unit/cli.test.ts links the directory and checks the release tarball);
// - in the TypeScript block, '@roomkit/sdk' is the SDK's source in this repository (the
//   package's build is what sdk-package.test.ts checks);
// - the E2B block runs with the E2B variables its shell block sets, pointed at the test
//   server, and the organization's key.
// Every curl's HTTP status is collected: any 4xx or 5xx fails the test, as does any
// command that fails. The organization's profile has no egress, so the example's
// `apt-get install` cannot leave this machine (it fails inside, which the walk-through
// does not check).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { PACKAGE_ROOT } from '../../src/config.ts';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';

const README = readFileSync(join(PACKAGE_ROOT, 'README.md'), 'utf8');
const BIN = join(PACKAGE_ROOT, 'bin', 'roomkit.mjs');

let t: TestApp;
let org: TestOrg;
let base: string;
let work: string;
let keyFile: string;

interface Block {
  lang: string;
  text: string;
  line: number;
}

function blocks(markdown: string): Block[] {
  const found: Block[] = [];
  const fence = /^```(\w*)\n([\s\S]*?)^```$/gm;
  for (let m = fence.exec(markdown); m !== null; m = fence.exec(markdown)) {
    found.push({ lang: m[1] ?? '', text: m[2] ?? '', line: markdown.slice(0, m.index).split('\n').length });
  }
  return found;
}

function adapt(text: string): string {
  return text.replaceAll('http://127.0.0.1:8080', base).replaceAll('.roomkit/initial-api-key', keyFile).replaceAll('npx roomkit', `node ${BIN}`);
}

function runIn(dir: string, command: string, args: string[], env: Record<string, string> = {}) {
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
    const child = spawn(command, args, { cwd: dir, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString('utf8')));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

before(async () => {
  t = await startTestApp({ gvisorPool: '10.251.0.0/24' });
  t.gvisor();
  org = await t.newOrg();
  base = await t.app.listen({ host: '127.0.0.1', port: 0 });
  const patched = await t.app.inject({ method: 'PATCH', url: `/api/profiles/${org.defaultProfileId}`, headers: org.headers, payload: { network: { egress: 'none' } } });
  assert.equal(patched.statusCode, 200, patched.body);
  work = mkdtempSync(join(tmpdir(), 'roomkit-readme-'));
  keyFile = join(work, 'initial-api-key');
  writeFileSync(keyFile, org.apiKey, { mode: 0o600 });
});

after(async () => {
  await t.closeLeavingNothing();
  rmSync(work, { recursive: true, force: true });
});

describe("the README's examples", () => {
  it('runs every shell block from the first start on, with no HTTP error and no failed command', async () => {
    const shell = blocks(README).filter((b) => b.lang === 'sh' && !/scripts\/start|npm pack|npm run bench|npm install -g/.test(b.text));
    assert.ok(shell.length >= 5, `found ${shell.length} shell blocks`);
    // Each curl reports its status on stderr; each block's line is marked for the report.
    const script = [
      'set -euo pipefail',
      `curl() { command curl --write-out '%{stderr}HTTP %{http_code} %{method} %{url_effective}\\n' "$@"; }`,
      ...shell.map((b) => `echo "README block at line ${b.line}" >&2\n${adapt(b.text)}`),
    ].join('\n');
    const ran = await runIn(work, 'bash', ['-c', script], { ROOMKIT_URL: base });
    const report = `exit ${ran.code}\n--- stderr\n${ran.stderr.slice(-6000)}\n--- stdout\n${ran.stdout.slice(-3000)}`;
    assert.equal(ran.code, 0, report);
    const statuses = [...ran.stderr.matchAll(/^HTTP (\d{3}) (\S+) (\S+)$/gm)];
    assert.ok(statuses.length >= 20, `only ${statuses.length} requests were made\n${report}`);
    const failed = statuses.filter((s) => Number(s[1]) >= 400 || s[1] === '000');
    assert.deepEqual(failed.map((s) => s.slice(1, 4).join(' ')), [], report);
    // What the walk-through says the answers hold.
    assert.match(ran.stdout, /"output":"42\\n"/, 'the first command printed 42');
    assert.match(ran.stdout, /Exit code: 0\\nOutput:\\n42/, 'the tool call printed 42');
    assert.match(ran.stdout, /^stopped: room session-1, instance /m, 'the CLI block destroyed its room');
  });

  it('runs the Python block with the Python SDK from the repository', async () => {
    const [python] = blocks(README).filter((b) => b.lang === 'python');
    assert.ok(python, 'the README has a Python block');
    const ran = await runIn(work, 'python3', ['-c', `${python.text}\nroom.delete()\n`], {
      PYTHONPATH: join(PACKAGE_ROOT, 'python'),
      ROOMKIT_URL: base,
      ROOMKIT_API_KEY: org.apiKey,
    });
    assert.equal(ran.code, 0, ran.stderr);
    // print() of the output, which ends in a newline; then the code context's main result.
    assert.equal(ran.stdout, 'hello\n\n[1, 2, 3]\n');
  });

  it('runs the TypeScript block with the SDK', async () => {
    const [ts] = blocks(README).filter((b) => b.lang === 'ts' && b.text.includes("'@roomkit/sdk'"));
    assert.ok(ts, 'the README has a TypeScript block');
    // In the repository, where '@roomkit/sdk' resolves as the README says.
    const file = join(PACKAGE_ROOT, `.readme-block-${process.pid}.ts`);
    writeFileSync(file, ts.text.replaceAll("'@roomkit/sdk'", `'${join(PACKAGE_ROOT, 'sdk', 'src', 'index.ts')}'`));
    try {
      const ran = await runIn(PACKAGE_ROOT, process.execPath, [file], { ROOMKIT_URL: base, ROOMKIT_API_KEY: org.apiKey });
      assert.equal(ran.code, 0, ran.stderr);
      assert.match(ran.stdout, /^0 hello\n \[/m);
      assert.match(ran.stdout, /^\[1, 2, 3\]$/m, 'the code context kept rows from one run to the next');
      assert.match(ran.stderr, /404 instance_not_found/);
    } finally {
      rmSync(file, { force: true });
    }
  });

  it("runs the E2B block with E2B's own SDK, the environment set as the README says", async () => {
    const [ts] = blocks(README).filter((b) => b.lang === 'ts' && b.text.includes("from 'e2b'"));
    assert.ok(ts, 'the README has an E2B block');
    const exports = blocks(README).find((b) => b.lang === 'sh' && b.text.includes('E2B_SANDBOX_URL'));
    assert.ok(exports, 'the README says how to set the E2B variables');
    const env = Object.fromEntries([...adapt(exports.text).matchAll(/(E2B_[A-Z_]+)=(\S+)/g)].map((m) => [m[1]!, m[2]!]));
    assert.equal(env.E2B_SANDBOX_URL, `${base}/e2b/envd`);
    const file = join(PACKAGE_ROOT, `.readme-e2b-block-${process.pid}.ts`);
    writeFileSync(file, ts.text);
    try {
      const ran = await runIn(PACKAGE_ROOT, process.execPath, [file], { ...env, E2B_API_KEY: org.apiKey });
      assert.equal(ran.code, 0, ran.stderr);
      assert.equal(ran.stdout, 'hello from e2b code\n\n');
    } finally {
      rmSync(file, { force: true });
    }
  });
});
