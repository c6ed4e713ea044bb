// `roomkit build` and `roomkit templates` against a server listening on a port, over the
// runtime double for builds: the directory's files and Dockerfile are sent, the log is
// printed as the build writes it with a summary after, a failed build exits 1 with its
// reason, and `templates` lists, shows and deletes. Real builds: test/host/templates.test.ts.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type TestApp } from '../support/app.ts';
import { BuildingRuntime } from '../support/building-runtime.ts';
import { run } from '../support/cli.ts';

const runtime = new BuildingRuntime();
let t: TestApp;
let env: NodeJS.ProcessEnv;
const dir = mkdtempSync(join(tmpdir(), 'roomkit-cli-build-'));

before(async () => {
  t = await startTestApp({ fake: runtime });
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  const org = await t.newOrg();
  env = { ROOMKIT_URL: `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`, ROOMKIT_API_KEY: org.apiKey };
  mkdirSync(join(dir, 'lib'));
  mkdirSync(join(dir, '.git'));
  writeFileSync(join(dir, 'app.py'), 'print(1)\n');
  writeFileSync(join(dir, 'lib', 'util.py'), 'X = 1\n');
  writeFileSync(join(dir, '.git', 'HEAD'), 'ref: refs/heads/main\n');
  writeFileSync(join(dir, 'Dockerfile'), 'FROM debian:bookworm\nWORKDIR /srv\nCOPY . ./\nRUN python3 app.py\n');
  writeFileSync(join(dir, 'Broken.dockerfile'), 'FROM debian:bookworm\nRUN false\n');
});
after(async () => {
  rmSync(dir, { recursive: true, force: true });
  await t.close();
});

describe('roomkit build and templates', () => {
  it('sends the directory and its Dockerfile, prints the steps as they run and a summary', async () => {
    const built = await run(['build', '-t', 'cli-app', dir], { env });
    assert.equal(built.code, 0, built.stderr);
    assert.match(built.stdout, /step 1\/3: WORKDIR \/srv\n[\s\S]*step 3\/3: RUN python3 app.py\n[\s\S]*built in /);
    assert.match(built.stderr, /^built cli-app: 3 steps, 0 cached in [\d.]+ s, 4 KiB; a profile uses it with "image": "template:cli-app"\n$/);
    // Every file of the directory but version control's went to the build.
    const written = [...runtime.files.values()].flatMap((files) => [...files.keys()]).sort();
    assert.deepEqual(written, ['/srv/Broken.dockerfile', '/srv/Dockerfile', '/srv/app.py', '/srv/lib/util.py']);
    const again = await run(['build', '-t', 'cli-app', dir], { env });
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stderr, /3 steps, 3 cached/);
  });

  it('exits 1 with the reason when the build fails', async () => {
    const failed = await run(['build', '-t', 'cli-broken', '-f', join(dir, 'Broken.dockerfile'), dir], { env });
    assert.equal(failed.code, 1, failed.stderr);
    assert.match(failed.stdout, /it went wrong\n/);
    assert.match(failed.stderr, /^roomkit: the build of cli-broken failed after [\d.]+ s \(1 steps, 0 cached\): line 2: RUN false: exited with code 1/);
    const missing = await run(['build', '-t', 'x', join(dir, 'lib')], { env });
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /cannot read the Dockerfile .*lib\/Dockerfile/);
  });

  it('lists, shows and deletes templates', async () => {
    const listed = await run(['templates'], { env });
    assert.equal(listed.code, 0, listed.stderr);
    assert.match(listed.stdout, /^NAME +STATE +BASE +SIZE +UPDATED\n/);
    assert.match(listed.stdout, /\ncli-app +ready +debian:bookworm /);
    assert.match(listed.stdout, /\ncli-broken +failed +- +- /);
    const shown = await run(['templates', 'show', 'cli-app'], { env });
    assert.equal(shown.code, 0, shown.stderr);
    assert.match(shown.stdout, /^workdir +\/srv$/m);
    const removed = await run(['templates', 'rm', 'cli-app'], { env });
    assert.equal(removed.code, 0, removed.stderr);
    assert.equal(removed.stdout, 'deleted template cli-app\n');
    const gone = await run(['templates', 'show', 'cli-app'], { env });
    assert.equal(gone.code, 1);
    assert.match(gone.stderr, /template_not_found/);
  });
});
