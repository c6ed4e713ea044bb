// DELETE latency through the HTTP API, request to `stopped`, and how long until the
// host really holds nothing of the instance any more, next to the floors measured in
// the same run on raw sandboxes of the same root filesystem without the service:
// `runsc kill` until the sandbox is dead (the quickest stop runsc offers), and `runsc
// kill` + `runsc delete --force` (runsc's own teardown, which waits until the host's
// init has reaped the sandbox). Then deletes of several instances at once.
//
//   npm run bench            (as root; ROOMKIT_BENCH_RUNS=20 by default)
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { mountsUnder } from '../src/host/mounts.ts';
import { ImageStore } from '../src/images/builder.ts';
import { PROFILE_DEFAULTS } from '../src/core/profile-schema.ts';
import type { InstanceNetworkNames } from '../src/network/netns.ts';
import { withRawSandbox } from './raw-sandbox.ts';
import { startBenchService } from './setup.ts';
import { percentile, summary } from './stats.ts';

const RUNS = Number(process.env.ROOMKIT_BENCH_RUNS ?? 20);
/** Instances deleted at once in the last part. */
const AT_ONCE = 4;

const bench = await startBenchService('10.240.0.128/25');
const { config, log, services, base, headers, dataDir, runtime } = bench;

/** Whether a process exists and is not a zombie. */
function running(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !/^[ZX]/.test(stat.slice(stat.lastIndexOf(')') + 2));
  } catch {
    return false;
  }
}

/** What the host still holds of an instance of the service, by kind (empty when nothing). */
async function heldBy(instanceId: string, names: InstanceNetworkNames): Promise<string[]> {
  const dir = join(dataDir, 'instances', instanceId);
  const held: string[] = [];
  if (mountsUnder(dir).length > 0) held.push('mounts');
  if (existsSync(`/var/run/netns/${names.netns}`) || existsSync(`/sys/class/net/${names.hostIf}`)) held.push('network');
  if (readdirSync('/sys/fs/cgroup').some((h) => existsSync(join('/sys/fs/cgroup', h, 'roomkit', instanceId)))) held.push('cgroups');
  if (readdirSync(join(dataDir, 'runsc')).some((f) => f.includes(instanceId))) held.push('runsc record');
  if (existsSync(dir)) held.push('directory');
  const lease = await services.db.selectFrom('network_leases').select('slot').where('instance_id', '=', instanceId).executeTakeFirst();
  if (lease) held.push('lease');
  return held;
}

try {
  const profile = (await services.profiles.list(bench.organizationId))[0]!;
  const spec = { ...PROFILE_DEFAULTS, home: '/home/user' };
  console.log(`roomkit delete benchmark, ${RUNS} runs each, cached image\n`);
  const images = new ImageStore({ dir: config.imagesDir, log });
  const image = await images.ensure({ image: profile.image, packages: profile.packages, user: profile.user, home: profile.home });

  // Floors: raw sandboxes of the same root filesystem, each in a fresh namespace.
  const killed: number[] = [];
  const killedAndDeleted: number[] = [];
  const floorDir = join(dataDir, 'floor');
  for (let i = 0; i < RUNS; i++) {
    await withRawSandbox(floorDir, `d${i}`, image, spec, async (sandbox) => {
      await sandbox.start();
      const pid = (JSON.parse((await sandbox.runsc(['state', sandbox.id])).stdout) as { pid: number }).pid;
      const started = performance.now();
      await sandbox.runsc(['kill', sandbox.id, 'KILL']);
      while (running(pid)) await sleep(1);
      killed.push(performance.now() - started);
      await sandbox.runsc(['delete', '--force', sandbox.id]);
      killedAndDeleted.push(performance.now() - started);
    });
  }

  // The service: DELETE .../room/... until it answers `stopped`, then the host watched
  // until it holds nothing of the instance.
  const deleted: number[] = [];
  const networkFree: number[] = [];
  const allFree: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const url = `${base}/api/profile/${profile.profile_id}/room/del-${i}`;
    const res = await fetch(url, { method: 'POST', headers, body: '{}' });
    const body = (await res.json()) as { instance_id: string; state: string };
    if (res.status !== 201 || body.state !== 'ready') throw new Error(`create ${i} answered ${res.status}: ${JSON.stringify(body)}`);
    // Its record names its network (a slot's, when it took one made ahead): read before it goes.
    const names = runtime.networkOf(body.instance_id);
    const started = performance.now();
    const del = await fetch(url, { method: 'DELETE', headers });
    const stopped = (await del.json()) as { state: string };
    if (del.status !== 200 || stopped.state !== 'stopped') throw new Error(`delete ${i} answered ${del.status}: ${JSON.stringify(stopped)}`);
    deleted.push(performance.now() - started);
    let networkAt: number | undefined;
    for (;;) {
      const held = await heldBy(body.instance_id, names);
      const now = performance.now() - started;
      if (networkAt === undefined && !held.includes('mounts') && !held.includes('network')) networkAt = now;
      if (held.length === 0) {
        allFree.push(now);
        break;
      }
      if (now > 30_000) throw new Error(`instance ${body.instance_id} still holds ${held.join(', ')} 30 s after its delete`);
      await sleep(5);
    }
    networkFree.push(networkAt ?? Number.NaN);
  }

  // Several instances deleted at once.
  const urls = Array.from({ length: AT_ONCE }, (_, i) => `${base}/api/profile/${profile.profile_id}/room/many-${i}`);
  for (const url of urls) {
    const res = await fetch(url, { method: 'POST', headers, body: '{}' });
    if (res.status !== 201) throw new Error(`create answered ${res.status}: ${await res.text()}`);
  }
  const together = await Promise.all(
    urls.map(async (url) => {
      const started = performance.now();
      const del = await fetch(url, { method: 'DELETE', headers });
      if (del.status !== 200) throw new Error(`delete answered ${del.status}`);
      return performance.now() - started;
    }),
  );

  console.log(`floor   runsc kill KILL -> sandbox dead                     ${summary(killed)}`);
  console.log(`floor   runsc kill KILL + runsc delete --force             ${summary(killedAndDeleted)}`);
  console.log(`roomkit DELETE .../room/... -> stopped (HTTP)              ${summary(deleted)}`);
  console.log(`        vs runsc kill -> dead at p50: ${(percentile(deleted, 50) / percentile(killed, 50)).toFixed(2)}x`);
  console.log(`        after DELETE: mounts and network free               ${summary(networkFree)}`);
  console.log(`        after DELETE: nothing left (runsc, cgroups, lease)  ${summary(allFree)}`);
  console.log(`roomkit ${AT_ONCE} DELETEs at once -> stopped                        ${summary(together)}`);
} finally {
  await bench.close();
}
