// The `roomkit` commands that need root and gVisor: doctor on a host that has
// everything, building and pruning images ahead of time, and the service started by an
// unprivileged user, which must run and say that instances need root.
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { MAIN, run, scratchDirs } from '../support/cli.ts';

const tempDir = scratchDirs();

describe('roomkit doctor', () => {
  it('checks the host and says it can run instances (the test set-up installs everything)', async () => {
    const res = await run(['doctor', '--json', '--data-dir', tempDir()]);
    const report = JSON.parse(res.stdout) as { ok: boolean; checks: { name: string; ok: boolean; optional?: boolean; fix?: string }[] };
    const failed = report.checks.filter((c) => !c.ok && !c.optional);
    assert.deepEqual(failed, []);
    assert.equal(report.ok, true);
    assert.equal(res.code, 0);
    for (const name of ['root', 'runsc', 'runsc runs a sandbox', 'mmdebstrap', 'nftables', 'overlayfs', 'network namespaces', 'cgroups', 'free disk']) {
      assert.ok(report.checks.some((c) => c.name === name), `no check named ${name}`);
    }
  });

  it('prints one line per check and a verdict', async () => {
    const res = await run(['doctor', '--data-dir', tempDir()]);
    assert.match(res.stdout, /^ok {4}linux: platform linux$/m);
    assert.match(res.stdout, /This host can run roomkit instances\.\n$/);
  });
});

describe('roomkit images', () => {
  it('builds a profile\'s image ahead of time, lists it, and prunes what no instance or snapshot uses', async () => {
    const dataDir = tempDir();
    const imagesDir = join(dataDir, 'own-images');
    const env = { ROOMKIT_IMAGES_DIR: imagesDir };
    await run(['keys', 'create', '--org', 'imgs', '--data-dir', dataDir]);
    const unknown = await run(['images', 'build', 'nope', '--data-dir', dataDir], { env });
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /no profile "nope" in organization imgs \(profiles: default, code-interpreter\)/);

    const built = await run(['images', 'build', 'default', '--json', '--data-dir', dataDir], { env });
    assert.equal(built.code, 0, built.stderr);
    const image = JSON.parse(built.stdout) as { key: string; image: string; rootfs: string };
    assert.equal(image.image, 'debian:bookworm');
    assert.ok(existsSync(join(image.rootfs, 'usr', 'bin', 'python3')));
    assert.ok(existsSync(join(image.rootfs, 'home', 'user')));

    const listed = await run(['images', 'list', '--json', '--data-dir', dataDir], { env });
    assert.deepEqual((JSON.parse(listed.stdout) as { key: string }[]).map((i) => i.key), [image.key]);

    // A snapshot taken over the image keeps it: an instance started from the snapshot needs it.
    const snapshotDir = join(dataDir, 'snapshots', randomUUID());
    mkdirSync(snapshotDir, { recursive: true });
    writeFileSync(join(snapshotDir, 'snapshot.json'), JSON.stringify({ snapshotId: 'x', sourceInstanceId: 'y', imageKey: image.key, createdAt: new Date().toISOString() }));
    const kept = await run(['images', 'prune', '--json', '--data-dir', dataDir], { env });
    assert.deepEqual(JSON.parse(kept.stdout).removed, []);
    assert.ok(existsSync(image.rootfs));
    rmSync(snapshotDir, { recursive: true });

    const pruned = await run(['images', 'prune', '--json', '--data-dir', dataDir], { env });
    assert.deepEqual(JSON.parse(pruned.stdout).removed, [image.key]);
    assert.ok(!existsSync(image.rootfs));
  });
});

describe('roomkit serve without root', () => {
  it('runs, and answers instance creation with 503 runtime_unavailable saying root is needed', async () => {
    const dataDir = tempDir();
    // An unprivileged user (nobody) owns the data directory and runs the service.
    execFileSync('chown', ['65534:65534', dataDir]);
    const child = spawn('setpriv', ['--reuid', '65534', '--regid', '65534', '--clear-groups', process.execPath, MAIN, 'serve', '--port', '0', '--data-dir', dataDir], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    try {
      let stderr = '';
      child.stderr.setEncoding('utf8');
      const url = await new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no start: ${stderr}`)), 20_000);
        child.stderr.on('data', (d: string) => {
          stderr += d;
          const match = /listening on (http:\/\/\S+) /.exec(stderr);
          if (match?.[1]) {
            clearTimeout(timer);
            resolve(match[1]);
          }
        });
      });
      const key = readFileSync(join(dataDir, 'initial-api-key'), 'utf8').trim();
      const headers = { authorization: `Bearer ${key}` };
      const profiles = (await (await fetch(`${url}/api/profiles`, { headers })).json()) as { profiles: { profile_id: string }[] };
      const res = await fetch(`${url}/api/profile/${profiles.profiles[0]!.profile_id}/room/r`, { method: 'POST', headers });
      assert.equal(res.status, 503);
      const body = (await res.json()) as { error: string; message: string };
      assert.equal(body.error, 'runtime_unavailable');
      assert.match(body.message, /must run as root/);
    } finally {
      child.kill('SIGTERM');
      await once(child, 'close');
    }
  });
});
