// Create latency of an instance through the HTTP API, with a cached image, next to the
// floors measured in the same run: raw `runsc create` + `start` of the same root
// filesystem (fresh overlay, fresh network namespace) without the service, and the same
// followed by the first exec's output (`runsc exec … echo`); a cold create until its
// first command's output (POST …/room/… then POST …/command, the target of issue 21:
// at most 1.3 times that floor); and a create that claims an instance from a profile's
// warm pool (booted before the request).
//
//   npm run bench:create     (as root, also the first of `npm run bench`;
//                             ROOMKIT_BENCH_RUNS=20 by default;
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

  // Floors: what runsc itself takes for the same root filesystem, to a started sandbox
  // and to the first exec's output; then the service: POST .../room/... until it answers
  // `ready`, over HTTP, then its first command. The three alternate, so that all see the
  // same host, and each floor runs once the service's own work after a create (its
  // network slot and layer made again) is done, so that it never slows a floor.
  const floor: number[] = [];
  const floorFirstOutput: number[] = [];
  const floorDir = join(dataDir, 'floor');
  const created: number[] = [];
  const firstOutput: number[] = [];
  const firstCommand: number[] = [];
  const deleted: number[] = [];
  const stateTimes = new Map<string, number[]>();
  for (let i = 0; i < RUNS; i++) {
    await serviceSettled(i > 0);
    await withRawSandbox(floorDir, `c${i}`, image, spec, async (sandbox) => {
      const started = performance.now();
      await sandbox.start();
      floor.push(performance.now() - started);
    });
    await withRawSandbox(floorDir, `e${i}`, image, spec, async (sandbox) => {
      const started = performance.now();
      await sandbox.start();
      const said = await sandbox.runsc(['exec', '--user=1000:1000', sandbox.id, '/bin/echo', 'hello']);
      floorFirstOutput.push(performance.now() - started);
      if (said.stdout.trim() !== 'hello') throw new Error(`the floor's exec printed ${JSON.stringify(said.stdout)}`);
    });

    const url = `${base}/api/profile/${profile.profile_id}/room/bench-${i}`;
    const startedAt = Date.now();
    const started = performance.now();
    const res = await fetch(url, { method: 'POST', headers, body: '{}' });
    const took = performance.now() - started;
    const answeredAt = Date.now();
    const body = (await res.json()) as { state: string; state_history: { state: string; at: string }[] };
    if (res.status !== 201 || body.state !== 'ready') throw new Error(`create ${i} answered ${res.status}: ${JSON.stringify(body)}`);
    const command = await fetch(`${url}/command`, { method: 'POST', headers, body: JSON.stringify({ command: 'echo hello' }) });
    const ran = (await command.json()) as { result?: { output: string } };
    firstOutput.push(performance.now() - started);
    firstCommand.push(performance.now() - started - took);
    if (command.status !== 200 || ran.result?.output.trim() !== 'hello') throw new Error(`the first command of ${i} answered ${command.status}: ${JSON.stringify(ran)}`);
    created.push(took);
    const history = body.state_history;
    // What the HTTP request spends outside the states: before the row is written, and
    // after `ready` until the answer (wall clock, to the millisecond).
    push(stateTimes, 'POST -> active', Date.parse(history[0]!.at) - startedAt);
    push(stateTimes, 'ready -> answer', answeredAt - Date.parse(history[history.length - 1]!.at));
    for (let s = 1; s < history.length; s++) {
      push(stateTimes, history[s]!.state, Date.parse(history[s]!.at) - Date.parse(history[s - 1]!.at));
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

  const p50 = (values: number[]) => percentile(values, 50);
  console.log(`floor   runsc create+start (same rootfs, fresh netns)   ${summary(floor)}`);
  console.log(`floor   runsc create+start+exec echo, to its output     ${summary(floorFirstOutput)}`);
  console.log(`roomkit POST .../room/... -> ready (HTTP, 7 states)     ${summary(created)}`);
  console.log(`        overhead over create+start at p50: ${(p50(created) - p50(floor)).toFixed(0)} ms`);
  console.log(`roomkit cold create -> first command's output (HTTP)   ${summary(firstOutput)}`);
  console.log(`        at p50: ${(p50(firstOutput) / p50(floorFirstOutput)).toFixed(2)}x the floor to the first output (target <= 1.3)`);
  console.log(`        of which the first command, from the create's answer:  ${summary(firstCommand)}`);
  console.log(`roomkit POST .../room/... claiming a warm pool instance ${summary(claimed)}`);
  console.log(`        at p50: ${(p50(claimed) / p50(floor)).toFixed(3)}x the floor, ${(p50(claimed) / p50(created)).toFixed(3)}x a cold create (target <= 15 ms)`);
  console.log(`roomkit DELETE .../room/... -> stopped                  ${summary(deleted)}\n`);
  console.log('time spent reaching each state (from the previous one), from state_history, and outside them:');
  for (const [state, values] of stateTimes) console.log(`  ${state.padEnd(18)} ${summary(values)}`);
} finally {
  await bench.close();
}

/**
 * Waits until the service has made again what the last create took (a network slot and
 * a writable layer, a little after each create), or at most 10 s.
 */
async function serviceSettled(afterCreate: boolean): Promise<void> {
  const { runtime } = bench;
  for (const deadline = Date.now() + 10_000; Date.now() < deadline; ) {
    await new Promise((r) => setTimeout(r, 200));
    // Layers are made once a create has said which size.
    const layersMade = !afterCreate || runtime.layerSlots.available >= runtime.layerSlots.size;
    if (runtime.networkSlots.available >= runtime.networkSlots.size && layersMade) return;
  }
}

function push(lists: Map<string, number[]>, key: string, value: number): void {
  const list = lists.get(key) ?? [];
  list.push(value);
  lists.set(key, list);
}
