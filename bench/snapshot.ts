// Snapshots and forks through the HTTP API, beside floors measured in the same run:
// - a snapshot of a ready instance that changed 1 MB, and one that changed 100 MB: time
//   and the disk each holds, beside a plain sparse copy (`cp --sparse=always`) of the
//   same layer image, which is all the snapshot's copy is;
// - a create from a snapshot, beside a cold create from the image (same profile);
// - a fork into 10 rooms, beside 10 cold creates started at once.
//
//   npm run bench:snapshot      (as root; ROOMKIT_BENCH_RUNS=10 by default)
import { rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { runChecked } from '../src/host/run.ts';
import { startBenchService } from './setup.ts';
import { percentile, summary } from './stats.ts';

const RUNS = Number(process.env.ROOMKIT_BENCH_RUNS ?? 10);
const FORK_ROOMS = 10;
const FORK_RUNS = 3;

const bench = await startBenchService('10.255.0.0/25');
const { base, headers, dataDir, services, organizationId } = bench;

async function call(method: string, url: string, body: unknown, expectStatus: number): Promise<Record<string, any>> {
  const res = await fetch(url, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  const answer = (await res.json()) as Record<string, any>;
  if (res.status !== expectStatus) throw new Error(`${method} ${url} answered ${res.status}: ${JSON.stringify(answer)}`);
  return answer;
}

async function command(roomUrl: string, text: string): Promise<void> {
  const body = await call('POST', `${roomUrl}/command`, { command: text }, 200);
  if (body.result?.exit_code !== 0) throw new Error(`command ${text} failed: ${JSON.stringify(body.result)}`);
}

async function timedMs(fn: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await fn();
  return performance.now() - started;
}

const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`;

try {
  // Enough for 1 + 10 instances of 256 MB at once, and the snapshots taken.
  await services.quotas.setOverrides(organizationId, { instances: 100, memory_mb: 1_000_000, vcpus: 1000, disk_mb: 1_000_000, snapshots: 1000 });
  const profile = await call('POST', `${base}/api/profiles`, { name: 'snap', memory_mb: 256, disk_mb: 2048, network: { egress: 'none' }, idle_timeout_s: 0 }, 201);
  const room = (name: string) => `${base}/api/profile/${profile.profile_id}/room/${name}`;
  console.log(`roomkit snapshot benchmark: ${RUNS} runs each, cached image, instances of 256 MB memory and a 2048 MB disk\n`);

  // One that builds or finds the image.
  await call('POST', room('warm-up'), {}, 201);
  await call('DELETE', room('warm-up'), undefined, 200);

  const source = room('src');
  const instance = await call('POST', source, {}, 201);
  const diskImage = join(dataDir, 'instances', instance.instance_id, 'disk.img');
  const snapshotIds: string[] = [];
  for (const changedMb of [1, 100]) {
    await command(source, `rm -f changed.bin && head -c ${changedMb}M /dev/urandom > changed.bin`);
    const took: number[] = [];
    const floor: number[] = [];
    let diskBytes = 0;
    for (let i = 0; i < RUNS; i++) {
      took.push(
        await timedMs(async () => {
          const snap = await call('POST', `${source}/snapshots`, {}, 201);
          snapshotIds.push(snap.snapshot_id);
          diskBytes = snap.disk_bytes;
        }),
      );
      // Floor: the copy alone, of the same layer image (not frozen: the instance is idle).
      const copy = join(dataDir, 'floor-copy.img');
      floor.push(await timedMs(() => runChecked('cp', ['--sparse=always', diskImage, copy], { timeoutMs: 120_000 })));
      rmSync(copy, { force: true });
    }
    console.log(`instance that changed ${changedMb} MB`);
    console.log(`  snapshot (POST …/snapshots)        ${summary(took)}`);
    console.log(`  floor: cp --sparse=always of layer ${summary(floor)}`);
    console.log(`  disk one snapshot holds            ${mb(diskBytes)} (its disk is 2048 MB; the layer file: ${mb(statSync(diskImage).blocks * 512)})\n`);
  }
  const snapshotId = snapshotIds.at(-1)!;

  // Create from a snapshot beside a cold create.
  const fromSnapshot: number[] = [];
  const cold: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    fromSnapshot.push(await timedMs(() => call('POST', room(`from-${i}`), { snapshot_id: snapshotId }, 201)));
    await call('DELETE', room(`from-${i}`), undefined, 200);
    cold.push(await timedMs(() => call('POST', room(`cold-${i}`), {}, 201)));
    await call('DELETE', room(`cold-${i}`), undefined, 200);
  }
  console.log('create → ready (the snapshot of 100 MB of changes)');
  console.log(`  from a snapshot                    ${summary(fromSnapshot)}`);
  console.log(`  floor: cold create from the image  ${summary(cold)}`);
  console.log(`  ratio of p50s                      ${(percentile(fromSnapshot, 50) / percentile(cold, 50)).toFixed(2)}x\n`);

  // Fork into 10 rooms beside 10 cold creates at once.
  const fork: number[] = [];
  const coldTen: number[] = [];
  const rooms = (prefix: string) => Array.from({ length: FORK_ROOMS }, (_, i) => `${prefix}-${i}`);
  const deleteAll = async (names: string[]) => {
    for (const name of names) await call('DELETE', room(name), undefined, 200);
  };
  for (let run = 0; run < FORK_RUNS; run++) {
    const forked = rooms(`fork${run}`);
    fork.push(
      await timedMs(async () => {
        const result = await call('POST', `${source}/fork`, { rooms: forked }, 201);
        const notReady = result.instances.filter((i: { state: string }) => i.state !== 'ready');
        if (notReady.length > 0) throw new Error(`fork: ${notReady.length} copies not ready: ${JSON.stringify(notReady[0])}`);
      }),
    );
    await deleteAll(forked);
    const fresh = rooms(`ten${run}`);
    coldTen.push(await timedMs(() => Promise.all(fresh.map((name) => call('POST', room(name), {}, 201)))));
    await deleteAll(fresh);
  }
  console.log(`fork into ${FORK_ROOMS} rooms (100 MB of changes), total until every copy is ready`);
  console.log(`  fork (POST …/fork)                 ${summary(fork)}`);
  console.log(`  floor: ${FORK_ROOMS} cold creates at once     ${summary(coldTen)}`);
  console.log(`  ratio of p50s                      ${(percentile(fork, 50) / percentile(coldTen, 50)).toFixed(2)}x`);

  for (const id of snapshotIds) await call('DELETE', `${base}/api/snapshots/${id}`, undefined, 200);
  await call('DELETE', source, undefined, 200);
} finally {
  await bench.runtime.releasesSettled();
  await bench.close();
}
