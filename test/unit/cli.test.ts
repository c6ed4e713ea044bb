// The `roomkit` command as a user runs it: key creation (also while the service runs on
// the same data directory), the first start of an empty data directory, graceful
// shutdown, the Node version hand-over and error output. What needs root (doctor,
// images, the service run by an unprivileged user) is in test/host/cli-host.test.ts.
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { copyFileSync, existsSync, mkdirSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { API_KEY_PATTERN } from '../../src/core/apikeys.ts';
import { startTestApp } from '../support/app.ts';
import { BIN, collect, run, scratchDirs, startServer, type Server } from '../support/cli.ts';
import { PACKAGE_ROOT } from '../../src/config.ts';
import { FakeRuntime } from '../support/fake-runtime.ts';

const tempDir = scratchDirs();

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe('roomkit keys create', () => {
  it('--json prints exactly one JSON object {organization_id, api_key}', async () => {
    const dataDir = tempDir();
    const res = await run(['keys', 'create', '--org', 'acme', '--json', '--data-dir', dataDir]);
    assert.equal(res.code, 0, res.stderr);
    const lines = res.stdout.split('\n').filter(Boolean);
    assert.equal(lines.length, 1, res.stdout);
    const body = JSON.parse(lines[0]!);
    assert.deepEqual(Object.keys(body).sort(), ['api_key', 'organization_id']);
    assert.match(body.organization_id, UUID);
    assert.match(body.api_key, API_KEY_PATTERN);
    assert.match(body.api_key, /^rk_live_/);

    // The same organization again: same id, a new key of the asked environment.
    const again = await run(['keys', 'create', '--org', 'acme', '--env', 'test', '--json', '--data-dir', dataDir]);
    const second = JSON.parse(again.stdout);
    assert.equal(second.organization_id, body.organization_id);
    assert.match(second.api_key, /^rk_test_/);
    assert.notEqual(second.api_key, body.api_key);
  });

  it('without --json says the key is shown once', async () => {
    const res = await run(['keys', 'create', '--org', 'plain', '--data-dir', tempDir()]);
    assert.equal(res.code, 0, res.stderr);
    assert.match(res.stdout, /API key: rk_live_[0-9a-f]{32}\n/);
    assert.match(res.stdout, /not shown again/);
  });

  it('refuses a bad organization name or environment with a one-line error', async () => {
    const bad = await run(['keys', 'create', '--org', 'no spaces', '--data-dir', tempDir()]);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /^roomkit: error: organization name "no spaces" is not allowed/);
    assert.equal(bad.stderr.trim().split('\n').length, 1);
    const env = await run(['keys', 'create', '--org', 'x', '--env', 'prod', '--data-dir', tempDir()]);
    assert.notEqual(env.code, 0);
    assert.match(env.stderr, /prod/);
    assert.doesNotMatch(env.stderr, /\n\s+at /);
  });

  it('leaves the running service\'s commands alone (it opens the store, not the services)', async () => {
    const t = await startTestApp({ fake: new FakeRuntime({ commandDelayMs: 5000 }) });
    try {
      const org = await t.newOrg();
      const room = `/api/profile/${org.defaultProfileId}/room/busy`;
      assert.equal((await t.app.inject({ method: 'POST', url: room, headers: org.headers })).statusCode, 201);
      const started = await t.app.inject({ method: 'POST', url: `${room}/command`, headers: org.headers, payload: { command: 'sleep 5', background: true } });
      assert.equal(started.statusCode, 202, started.body);
      const res = await run(['keys', 'create', '--org', 'beside', '--json', '--data-dir', t.dataDir]);
      assert.equal(res.code, 0, res.stderr);
      const row = await t.services.db.selectFrom('commands').select('state').where('id', '=', started.json().command_id).executeTakeFirstOrThrow();
      // Still running, or ended on its own if the CLI was slow; never recorded as interrupted by it.
      assert.notEqual(row.state, 'interrupted');
    } finally {
      await t.close();
    }
  });
});

describe('roomkit serve', () => {
  let dataDir: string;
  let server: Server;
  before(async () => {
    dataDir = tempDir();
    server = await startServer(dataDir);
  });
  after(async () => {
    if (server.child.exitCode === null) await server.stop();
  });

  it('creates a first organization and key on an empty data directory, readable only by the owner', async () => {
    const file = join(dataDir, 'initial-api-key');
    assert.ok(existsSync(file));
    assert.equal(statSync(file).mode & 0o777, 0o600);
    const key = readFileSync(file, 'utf8').trim();
    assert.match(key, API_KEY_PATTERN);
    assert.match(server.output().stderr, /initial-api-key/);
    const res = await fetch(`${server.url}/api/profiles`, { headers: { authorization: `Bearer ${key}` } });
    assert.equal(res.status, 200);
    const body = (await res.json()) as { profiles: { name: string }[] };
    assert.deepEqual(body.profiles.map((p) => p.name), ['default', 'code-interpreter']);
  });

  it('accepts a key that `keys create` makes while it runs on the same data directory', async () => {
    const res = await run(['keys', 'create', '--org', 'second', '--json', '--data-dir', dataDir]);
    assert.equal(res.code, 0, res.stderr);
    const { api_key, organization_id } = JSON.parse(res.stdout);
    const profiles = await fetch(`${server.url}/api/profiles`, { headers: { authorization: `Bearer ${api_key}` } });
    assert.equal(profiles.status, 200);
    const body = (await profiles.json()) as { profiles: { name: string; profile_id: string }[] };
    assert.deepEqual(body.profiles.map((p) => p.name), ['default', 'code-interpreter']);
    const row = await fetch(`${server.url}/api/profiles/${body.profiles[0]!.profile_id}`, {
      headers: { authorization: `Bearer ${api_key}` },
    });
    assert.equal(row.status, 200);
    assert.match(organization_id, UUID);
  });

  it('does not create another first key on the next start', async () => {
    const before = readFileSync(join(dataDir, 'initial-api-key'), 'utf8');
    const second = await startServer(dataDir);
    const stopped = await second.stop();
    assert.equal(stopped.code, 0);
    assert.equal(readFileSync(join(dataDir, 'initial-api-key'), 'utf8'), before);
    assert.doesNotMatch(second.output().stderr, /First start/);
  });

  it('shuts down gracefully on SIGTERM: exit 0, logs it, frees the port', async () => {
    // An idle keep-alive connection must not hold the shutdown up.
    const keepAlive = await fetch(`${server.url}/healthz`, { headers: { connection: 'keep-alive' } });
    assert.equal(keepAlive.status, 200);
    const started = Date.now();
    const res = await server.stop();
    assert.equal(res.code, 0, res.stderr);
    assert.equal(res.signal, null);
    assert.ok(Date.now() - started < 10_000, 'shutdown took too long');
    const logs = res.stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l) as { msg: string });
    const messages = logs.map((l) => l.msg);
    assert.ok(messages.includes('shutting down'));
    assert.equal(messages.at(-1), 'shutdown complete');
    await assert.rejects(fetch(`${server.url}/healthz`));
  });

  it('never writes the API key into its logs', () => {
    const key = readFileSync(join(dataDir, 'initial-api-key'), 'utf8').trim();
    assert.ok(!server.output().stdout.includes(key));
  });

  it('reports a bad option in one line and exits 2', async () => {
    const res = await run(['serve', '--port', '99999', '--data-dir', tempDir()]);
    assert.equal(res.code, 2);
    assert.equal(res.stderr, 'roomkit: error: option port must be a whole number from 0 to 65535, got "99999"\n');
  });

  it('reports a port in use without a stack trace', async () => {
    const first = await startServer(tempDir());
    try {
      const port = new URL(first.url).port;
      const res = await run(['serve', '--port', port, '--data-dir', tempDir()]);
      assert.equal(res.code, 1);
      assert.match(res.stderr, /roomkit: error: .*EADDRINUSE|address already in use/);
      assert.doesNotMatch(res.stderr, /\n\s+at /);
    } finally {
      await first.stop();
    }
  });
});

describe('the roomkit bin', () => {
  // The machine's own Node may be older than 24; the bin must hand over to Node 24.
  const systemNode = ['/usr/bin/node', '/usr/local/bin/node'].find((p) => existsSync(p));

  it('runs under an older system Node by handing over to Node 24', { skip: !systemNode && 'no system node' }, async () => {
    const version = execFileSync(systemNode!, ['--version'], { encoding: 'utf8' }).trim();
    const res = await run(['--version'], { node: systemNode!, script: BIN });
    assert.equal(res.code, 0, `${version}: ${res.stderr}`);
    assert.match(res.stdout, /^\d+\.\d+\.\d+ \(API 1\.0\.0\)\n$/);
  });

  it('shuts the service down once when a stop signal reaches the whole process group, as Ctrl-C and supervisors send it', { skip: !systemNode && 'no system node' }, async () => {
    // Under an older Node the bin runs the service as its child and forwards signals, so
    // a signal to the group reaches the service twice: from the group, and forwarded.
    const child = spawn(systemNode!, [BIN, 'serve', '--port', '0', '--data-dir', tempDir()], {
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, ROOMKIT_RUNTIME: 'none' },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
    try {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no start: ${stderr}`)), 20_000);
        child.stderr.setEncoding('utf8').on('data', (d: string) => {
          stderr += d;
          if (/listening on http/.test(stderr)) {
            clearTimeout(timer);
            resolve();
          }
        });
      });
      process.kill(-child.pid!, 'SIGTERM');
      const [code, signal] = await exited;
      const messages = stdout.split('\n').filter(Boolean).map((l) => (JSON.parse(l) as { msg: string }).msg);
      assert.ok(!messages.includes('second signal during shutdown; exiting at once'), messages.join(' | '));
      assert.deepEqual([code, signal], [0, null], stderr);
      assert.equal(messages.filter((m) => m === 'shutting down').length, 1);
      assert.ok(messages.includes('shutdown complete'), messages.join(' | '));
    } finally {
      if (child.exitCode === null && child.signalCode === null) process.kill(-child.pid!, 'SIGKILL');
    }
  });

  it('passes the exit code of the command through', async () => {
    const res = await run(['keys', 'create', '--org', 'bad name'], { node: systemNode ?? process.execPath, script: BIN });
    assert.equal(res.code, 2);
  });

  it('goes on PATH with npm install -g of its directory, and runs from any directory', async () => {
    const prefix = tempDir();
    execFileSync('npm', ['install', '-g', '--prefix', prefix, '--offline', '--no-audit', '--no-fund', PACKAGE_ROOT], { stdio: 'ignore' });
    const installed = join(prefix, 'bin', 'roomkit');
    const child = spawn(installed, ['--version'], { cwd: tmpdir(), env: { ...process.env, PATH: `${dirname(systemNode ?? process.execPath)}:/usr/bin:/bin` }, stdio: ['ignore', 'pipe', 'pipe'] });
    const res = await collect(child);
    assert.equal(res.code, 0, res.stderr);
    assert.match(res.stdout, /^\d+\.\d+\.\d+ \(API 1\.0\.0\)\n$/);
  });

  it('scripts/release writes a tarball of the committed tree with what setup installs from', () => {
    const out = join(tempDir(), 'roomkit.tar.gz');
    execFileSync(join(PACKAGE_ROOT, 'scripts', 'release'), [out], { stdio: ['ignore', 'pipe', 'ignore'] });
    const listed = execFileSync('tar', ['tzf', out], { encoding: 'utf8' }).split('\n');
    for (const path of ['roomkit/package.json', 'roomkit/package-lock.json', 'roomkit/bin/roomkit.mjs', 'roomkit/scripts/setup', 'roomkit/src/cli/main.ts']) {
      assert.ok(listed.includes(path), `${path} is not in the release`);
    }
    assert.ok(!listed.some((p) => p.startsWith('roomkit/node_modules/') || p.startsWith('roomkit/.tools/')), 'nothing installed goes into it');
  });

  it('inside node_modules (npm install -g of a packed tarball) says how to install it instead', async () => {
    const copy = join(tempDir(), 'lib', 'node_modules', 'roomkit');
    mkdirSync(join(copy, 'bin'), { recursive: true });
    copyFileSync(BIN, join(copy, 'bin', 'roomkit.mjs'));
    const res = await run(['--version'], { node: systemNode ?? process.execPath, script: join(copy, 'bin', 'roomkit.mjs') });
    assert.equal(res.code, 1);
    assert.match(res.stderr, /installed inside node_modules .*\n.*unpack the release .*\n.*scripts\/setup and npm install -g \/opt\/roomkit/);
  });
});
