// Create-to-ready latency of an instance through the HTTP API, with a cached image,
// next to the floor measured in the same run: raw `runsc create` + `start` of the same
// root filesystem (fresh overlay, fresh network namespace) without the service; and a
// create that claims an instance from a profile's warm pool (booted before the request).
//
//   npm run bench            (as root; ROOMKIT_BENCH_RUNS=20 by default;
//                             ROOMKIT_BENCH_NETWORK_POOL, default 10.217.0.0/24)
import { closeSync, mkdirSync, openSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { run, runChecked } from '../src/host/run.ts';
import { mountOverlay, unmountAll } from '../src/host/mounts.ts';
import { ociSpec } from '../src/runtimes/gvisor/bundle.ts';
import { removeCgroups } from '../src/runtimes/gvisor/cgroups.ts';
import { ImageStore } from '../src/images/builder.ts';
import { DEFAULT_HOST_TASKS_PER_INSTANCE } from '../src/config.ts';
import { PROFILE_DEFAULTS } from '../src/core/profile-schema.ts';
import { startBenchService } from './setup.ts';
import { percentile, summary } from './stats.ts';

const RUNS = Number(process.env.ROOMKIT_BENCH_RUNS ?? 20);

const bench = await startBenchService(process.env.ROOMKIT_BENCH_NETWORK_POOL ?? '10.217.0.0/24');
const { config, log, services, base, headers, dataDir } = bench;

try {
  const profile = (await services.profiles.list(bench.organizationId))[0]!;
  const spec = { ...PROFILE_DEFAULTS, home: '/home/user' };

  console.log(`roomkit create-to-ready benchmark, ${RUNS} runs each, cached image\n`);
  const images = new ImageStore({ dir: config.imagesDir, log });
  const buildStarted = Date.now();
  const image = await images.ensure({ image: profile.image, packages: profile.packages, user: profile.user, home: profile.home });
  console.log(`image ${image.key} ready (${((Date.now() - buildStarted) / 1000).toFixed(1)} s, built once before timing)\n`);

  // Floor: what runsc itself takes for the same root filesystem.
  const floor: number[] = [];
  const floorDir = join(dataDir, 'floor');
  const runscRoot = join(floorDir, 'runsc');
  mkdirSync(runscRoot, { recursive: true });
  for (let i = 0; i < RUNS; i++) {
    const dir = join(floorDir, `c${i}`);
    for (const d of ['upper', 'work', 'rootfs', 'bundle']) mkdirSync(join(dir, d), { recursive: true });
    await mountOverlay({ lower: image.rootfs, upper: join(dir, 'upper'), work: join(dir, 'work'), target: join(dir, 'rootfs') });
    mkdirSync(join(dir, 'rootfs', 'tmp'), { recursive: true });
    const id = `floor-${process.pid}-${i}`;
    writeFileSync(join(dir, 'bundle', 'config.json'), JSON.stringify(ociSpec({ instanceId: id, rootfs: join(dir, 'rootfs'), hostname: 'floor', spec, maxHostTasks: DEFAULT_HOST_TASKS_PER_INSTANCE })));
    const netns = `rkbench-${process.pid}-${i}`;
    const runsc = (args: string[], outputFd?: number) =>
      runChecked('nsenter', [`--net=/var/run/netns/${netns}`, 'runsc', `--root=${runscRoot}`, '--network=host', '--platform=ptrace', ...args], {
        timeoutMs: 30_000,
        ...(outputFd === undefined ? {} : { outputFd }),
      });
    try {
      await runChecked('ip', ['netns', 'add', netns], { timeoutMs: 10_000 });
      const started = performance.now();
      const fd = openSync(join(dir, 'console.log'), 'a');
      try {
        await runsc(['create', `--bundle=${join(dir, 'bundle')}`, id], fd);
      } finally {
        closeSync(fd);
      }
      await runsc(['start', id]);
      floor.push(performance.now() - started);
    } finally {
      // Whatever happened, nothing of the floor run stays on the host.
      await run('nsenter', [`--net=/var/run/netns/${netns}`, 'runsc', `--root=${runscRoot}`, '--network=host', 'delete', '--force', id], { timeoutMs: 30_000 });
      await run('ip', ['netns', 'del', netns], { timeoutMs: 10_000 });
      await unmountAll(dir);
      removeCgroups(id);
    }
  }

  // The service: POST .../room/... until it answers `ready`, over HTTP.
  const created: number[] = [];
  const deleted: number[] = [];
  const stateTimes = new Map<string, number[]>();
  for (let i = 0; i < RUNS; i++) {
    const url = `${base}/api/profile/${profile.profile_id}/room/bench-${i}`;
    const started = performance.now();
    const res = await fetch(url, { method: 'POST', headers, body: '{}' });
    const took = performance.now() - started;
    const body = (await res.json()) as { state: string; state_history: { state: string; at: string }[] };
    if (res.status !== 201 || body.state !== 'ready') throw new Error(`create ${i} answered ${res.status}: ${JSON.stringify(body)}`);
    created.push(took);
    const history = body.state_history;
    for (let s = 1; s < history.length; s++) {
      const step = history[s]!;
      const list = stateTimes.get(step.state) ?? [];
      list.push(Date.parse(step.at) - Date.parse(history[s - 1]!.at));
      stateTimes.set(step.state, list);
    }
    const delStarted = performance.now();
    const del = await fetch(url, { method: 'DELETE', headers });
    if (del.status !== 200) throw new Error(`delete ${i} answered ${del.status}`);
    deleted.push(performance.now() - delStarted);
  }

  // Warm pool: a profile of the same image keeps one instance booted; each run waits
  // until the pool holds a ready one, then times the create that claims it.
  const pooled = await fetch(`${base}/api/profiles`, { method: 'POST', headers, body: JSON.stringify({ name: 'bench-warm', warm_pool: 1 }) });
  const warmProfile = ((await pooled.json()) as { profile_id: string }).profile_id;
  const claimed: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const deadline = Date.now() + 120_000;
    for (;;) {
      const profile = (await (await fetch(`${base}/api/profiles/${warmProfile}`, { headers })).json()) as { warm_pool_instances: { ready: number } };
      if (profile.warm_pool_instances.ready >= 1) break;
      if (Date.now() > deadline) throw new Error('the warm pool did not refill within 120 s');
      await new Promise((r) => setTimeout(r, 50));
    }
    const url = `${base}/api/profile/${warmProfile}/room/warm-${i}`;
    const started = performance.now();
    const res = await fetch(url, { method: 'POST', headers, body: '{}' });
    const took = performance.now() - started;
    const body = (await res.json()) as { state: string; claimed_at: string | null };
    if (res.status !== 201 || body.state !== 'ready' || body.claimed_at === null) throw new Error(`claim ${i} answered ${res.status}: ${JSON.stringify(body)}`);
    claimed.push(took);
    const del = await fetch(url, { method: 'DELETE', headers });
    if (del.status !== 200) throw new Error(`delete of warm-${i} answered ${del.status}`);
  }
  await fetch(`${base}/api/profiles/${warmProfile}`, { method: 'DELETE', headers });

  console.log(`floor   runsc create+start (same rootfs, fresh netns)   ${summary(floor)}`);
  console.log(`roomkit POST .../room/... -> ready (HTTP, 7 states)     ${summary(created)}`);
  console.log(`        overhead over the floor at p50: ${(percentile(created, 50) - percentile(floor, 50)).toFixed(0)} ms`);
  console.log(`roomkit POST .../room/... claiming a warm pool instance ${summary(claimed)}`);
  console.log(`        at p50: ${(percentile(claimed, 50) / percentile(floor, 50)).toFixed(3)}x the floor, ${(percentile(claimed, 50) / percentile(created, 50)).toFixed(3)}x a cold create`);
  console.log(`roomkit DELETE .../room/... -> stopped                  ${summary(deleted)}\n`);
  console.log('time spent reaching each state (from the previous one), from state_history:');
  for (const [state, values] of stateTimes) console.log(`  ${state.padEnd(18)} ${summary(values)}`);
} finally {
  await bench.close();
}
