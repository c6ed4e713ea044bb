// The Python SDK (python/) against a real server listening on a port, with real gVisor
// instances: runs its unittest suite (python/tests) with the server's URL and a key of
// a fresh organization in ROOMKIT_URL and ROOMKIT_API_KEY, and fails with the suite's
// output when any of its tests fails. The suite shares one instance between its tests
// (the README's quick start makes a second one), checks every operation of
// /openapi.json against the SDK's methods, runs the README's agent-loop recipe with a
// scripted model, and installs the package with pip.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, it } from 'node:test';
import { PACKAGE_ROOT } from '../../src/config.ts';
import { startTestApp, type TestApp } from '../support/app.ts';
import { hostObjects, NOTHING } from '../support/host.ts';

let t: TestApp;
let baseUrl: string;

before(async () => {
  t = await startTestApp({ gvisorPool: '10.247.0.0/24' });
  assert.ok('runtime' in t.services.runtime, 'the gVisor runtime is not available');
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  baseUrl = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
});

after(async () => {
  const dataDir = t.dataDir;
  try {
    // Stops whatever instance the suite left (it deletes its own as it exits).
    await t.services.close();
    assert.deepEqual({ ...(await hostObjects(dataDir)), egressRules: [] }, NOTHING);
  } finally {
    await t.close();
  }
});

/** Runs a program to its end, its stdout and stderr together as one text. */
function run(command: string, args: string[], options: { cwd: string; env: NodeJS.ProcessEnv; timeoutMs: number }): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: options.cwd, env: options.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (output += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (output += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

it('the Python SDK passes its tests against this server', async () => {
  const org = await t.newOrg();
  const { ROOMKIT_URL: _url, ROOMKIT_API_KEY: _key, PYTHONPATH: _path, ...env } = process.env;
  const { code, output } = await run('python3', ['-m', 'unittest', 'discover', '-v', '-s', 'tests', '-t', '.'], {
    cwd: join(PACKAGE_ROOT, 'python'),
    env: { ...env, ROOMKIT_URL: baseUrl, ROOMKIT_API_KEY: org.apiKey, PYTHONDONTWRITEBYTECODE: '1' },
    timeoutMs: 10 * 60_000,
  });
  assert.equal(code, 0, `python3 -m unittest failed (exit ${code}):\n${output}`);
  const ran = /^Ran (\d+) tests? in/m.exec(output);
  assert.ok(ran && Number(ran[1]) >= 35, `expected the whole suite to run:\n${output}`);
  assert.doesNotMatch(output, /skipped|expected failures/, `no Python test may be skipped here:\n${output}`);
  process.stdout.write(output.split('\n').filter((l) => /^Ran |^OK/.test(l)).join('\n') + '\n');
});
