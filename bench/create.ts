// Create-to-ready latency of an instance through the HTTP API, with a cached image,
// next to the floor measured in the same run: raw `runsc create` + `start` of the same
// root filesystem (fresh overlay, fresh network namespace) without the service; and a
// create that claims an instance from a profile's warm pool (booted before the request).
//
//   npm run bench            (as root; ROOMKIT_BENCH_RUNS=20 by default;
//                             ROOMKIT_BENCH_NETWORK_POOL, default 10.217.0.0/24)
import { join } from 'node:path';
import { ImageStore } from '../src/images/builder.ts';
import { PROFILE_DEFAULTS } from '../src/core/profile-schema.ts';
import { withRawSandbox } from './raw-sandbox.ts';
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
  for (let i = 0; i < RUNS; i++) {
    await withRawSandbox(floorDir, `c${i}`, image, spec, async (sandbox) => {
      const started = performance.now();
      await sandbox.start();
      floor.push(performance.now() - started);
    });
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
