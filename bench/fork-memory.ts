// A fork WITH memory into 10 rooms through the HTTP API (a source running an HTTP
// server and a shell holding a value in memory), beside a floor measured in the same
// run: raw `runsc checkpoint --leave-running` of the same kind of sandbox (same image,
// runsc, flags and network stack, an HTTP server under init) and 10 raw `runsc restore`s
// of it, each into a namespace, veth and overlay of its own, as many at a time as the
// runtime restores (ROOMKIT_RESTORES_AT_ONCE, the CPU count by default), until each
// copy's server answers at its own address. While each fork runs,
// the source's server is asked every 50 ms: how many answers, how many needed a second
// try (a connection open at the checkpoint is dropped), how many failed, and the
// slowest; and when the copies reached each state of their start. Target (issue 21):
// the fork's total at most 3 s, the source serving throughout.
//
//   npm run bench:fork      (as root; ROOMKIT_BENCH_RUNS=3 by default)
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PROFILE_DEFAULTS } from '../src/core/profile-schema.ts';
import { ImageStore } from '../src/images/builder.ts';
import type { Lease } from '../src/network/pool.ts';
import { type RawSandbox, withRawSandbox } from './raw-sandbox.ts';
import { startBenchService } from './setup.ts';
import { percentile, summary } from './stats.ts';

const RUNS = Number(process.env.ROOMKIT_BENCH_RUNS ?? 3);
const ROOMS = 10;

const bench = await startBenchService('10.218.0.0/25');
const { config, log, base, headers, dataDir, services, organizationId } = bench;
const RESTORES_AT_ONCE = config.restoresAtOnce;

async function call(method: string, url: string, body: unknown, expectStatus: number): Promise<Record<string, any>> {
  const res = await fetch(url, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  const answer = (await res.json()) as Record<string, any>;
  if (res.status !== expectStatus) throw new Error(`${method} ${url} answered ${res.status}: ${JSON.stringify(answer)}`);
  return answer;
}

async function command(roomUrl: string, text: string): Promise<string> {
  const body = await call('POST', `${roomUrl}/command`, { command: text }, 200);
  if (body.result?.exit_code !== 0) throw new Error(`command ${text} failed: ${JSON.stringify(body.result)}`);
  return body.result.output as string;
}

/** The HTTP server at `address` answers (any status); rejects after 5 s. */
async function answers(address: string): Promise<void> {
  await (await fetch(`http://${address}:8000/`, { signal: AbortSignal.timeout(5_000) })).arrayBuffer();
}

/** A /30 of its own per raw sandbox, outside the service's pool. */
function leaseOf(i: number): Lease {
  return { slot: i, hostAddress: `10.218.250.${4 * i + 1}`, guestAddress: `10.218.250.${4 * i + 2}`, prefixLength: 30 };
}

/** Runs `work` over `items`, `atOnce` at a time. */
async function atOnce<T>(items: T[], limit: number, work: (item: T) => Promise<void>): Promise<void> {
  const queue = [...items];
  await Promise.all(Array.from({ length: limit }, async () => {
    for (let item = queue.shift(); item !== undefined; item = queue.shift()) await work(item);
  }));
}

/** Prepares `count` raw sandboxes (each with its own namespace, veth and overlay), hands them to `use`, then removes them all. */
async function withRawSandboxes(floorDir: string, prefix: string, count: number, rootfs: string, firstSlot: number, use: (sandboxes: RawSandbox[]) => Promise<void>): Promise<void> {
  const spec = { ...PROFILE_DEFAULTS, home: '/home/user', network: { egress: 'none' as const } };
  const go = async (made: RawSandbox[]): Promise<void> => {
    if (made.length === count) return use(made);
    const name = `${prefix}${made.length}`;
    await withRawSandbox(floorDir, name, { rootfs }, spec, (sandbox) => go([...made, sandbox]), { lease: leaseOf(firstSlot + made.length) });
  };
  await go([]);
}

/** Floor: raw checkpoint --leave-running of a serving sandbox, and ROOMS restores of it RESTORES_AT_ONCE at a time until each serves. */
async function rawForkFloor(rootfs: string, run: number): Promise<{ checkpoint: number; restores: number }> {
  const floorDir = join(dataDir, 'floor');
  let figures = { checkpoint: 0, restores: 0 };
  await withRawSandboxes(floorDir, `s${run}`, 1, rootfs, 0, async ([source]) => {
    const bundle = join(floorDir, `s${run}0`, 'bundle', 'config.json');
    const oci = JSON.parse(readFileSync(bundle, 'utf8')) as { process: { args: string[] } };
    // Init's stdio off the host's descriptors (as the agent's init does), its server a child of init.
    oci.process.args = ['/bin/sh', '-c', 'exec </dev/null >/dev/null 2>&1; cd /tmp && python3 -m http.server 8000 & wait'];
    writeFileSync(bundle, JSON.stringify(oci));
    await source!.start();
    for (let tries = 0; ; tries++) {
      if (await answers(leaseOf(0).guestAddress).then(() => true, () => false)) break;
      if (tries > 100) throw new Error("the floor's server did not answer in 10 s");
      await new Promise((r) => setTimeout(r, 100));
    }
    const image = join(floorDir, `image${run}`);
    let started = performance.now();
    await source!.runsc(['checkpoint', '--leave-running', `--image-path=${image}`, '--compression=none', source!.id]);
    const checkpoint = performance.now() - started;
    await withRawSandboxes(floorDir, `r${run}x`, ROOMS, rootfs, 1, async (targets) => {
      started = performance.now();
      await atOnce(targets.map((t, i) => ({ t, i })), RESTORES_AT_ONCE, async ({ t, i }) => {
        await t.runsc(['restore', '--detach', `--image-path=${image}`, `--bundle=${join(floorDir, `r${run}x${i}`, 'bundle')}`, t.id]);
        await answers(leaseOf(1 + i).guestAddress);
      });
      figures = { checkpoint, restores: performance.now() - started };
    });
  });
  return figures;
}

try {
  await services.quotas.setOverrides(organizationId, { instances: 100, memory_mb: 1_000_000, vcpus: 1000, disk_mb: 1_000_000, snapshots: 1000 });
  const profile = await call('POST', `${base}/api/profiles`, { name: 'fork', memory_mb: 256, disk_mb: 1024, network: { egress: 'none' }, idle_timeout_s: 0 }, 201);
  const room = (name: string) => `${base}/api/profile/${profile.profile_id}/room/${name}`;
  console.log(`roomkit fork-with-memory benchmark: ${RUNS} runs, ${ROOMS} rooms each, cached image, instances of 256 MB\n`);
  const source = room('src');
  await call('POST', source, {}, 201);
  await command(source, [
    'nohup sh -c \'v=$(head -c 12 /dev/urandom | od -An -tx1); while :; do echo "$v" > /tmp/held.now; sleep 0.2; done\' >/dev/null 2>&1 &',
    'cd /tmp && nohup python3 -m http.server 8000 >/dev/null 2>&1 &',
    'sleep 1',
  ].join('\n'));
  const address = (await command(source, 'hostname -I')).trim().split(' ')[0] ?? '';
  await answers(address);

  const totals: number[] = [];
  /** Per run, per copy: when it reached each state, in ms after the fork was asked for. */
  const timelines: Record<string, number>[][] = [];
  const latencies: number[] = [];
  let asked = 0;
  let retried = 0;
  let failed = 0;
  for (let run = 0; run < RUNS; run++) {
    const rooms = Array.from({ length: ROOMS }, (_, i) => `r${run}-${i}`);
    let forking = true;
    const polling = (async () => {
      while (forking) {
        const started = performance.now();
        asked++;
        try {
          await answers(address).catch(() => {
            retried++;
            return answers(address);
          });
          latencies.push(performance.now() - started);
        } catch {
          failed++;
        }
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    const started = performance.now();
    const startedAt = Date.now();
    const result = await call('POST', `${source}/fork`, { rooms }, 201);
    totals.push(performance.now() - started);
    timelines.push(result.instances.map((i: { state_history: { state: string; at: string }[] }) =>
      Object.fromEntries(i.state_history.map((e) => [e.state, Date.parse(e.at) - startedAt]))));
    forking = false;
    await polling;
    const notReady = result.instances.filter((i: { state: string }) => i.state !== 'ready');
    if (notReady.length > 0) throw new Error(`fork: ${notReady.length} copies not ready: ${JSON.stringify(notReady[0])}`);
    const restored = result.instances.filter((i: { state_history: { state: string; reason_code?: string }[] }) =>
      i.state_history.some((e) => e.state === 'vm_started' && e.reason_code === 'memory_restored'));
    if (restored.length !== ROOMS) throw new Error(`fork: only ${restored.length} of ${ROOMS} copies were restored from memory`);
    for (const name of rooms) await call('DELETE', room(name), undefined, 200);
    await bench.runtime.releasesSettled();
  }
  await call('DELETE', source, undefined, 200);
  await bench.runtime.releasesSettled();

  const images = new ImageStore({ dir: config.imagesDir, log });
  const image = await images.ensure({ image: profile.image, packages: profile.packages, user: profile.user, home: profile.home });
  const floors: { checkpoint: number; restores: number }[] = [];
  for (let run = 0; run < RUNS; run++) floors.push(await rawForkFloor(image.rootfs, run));
  const floorTotals = floors.map((f) => f.checkpoint + f.restores);

  console.log(`roomkit POST …/fork {rooms: ${ROOMS}} -> every copy ready (HTTP)      ${summary(totals)}`);
  console.log(`floor   runsc checkpoint --leave-running                    ${summary(floors.map((f) => f.checkpoint))}`);
  console.log(`floor   ${ROOMS} runsc restores, ${RESTORES_AT_ONCE} at a time, until each serves   ${summary(floors.map((f) => f.restores))}`);
  console.log(`floor   both                                                ${summary(floorTotals)}`);
  console.log(`source during the forks: ${asked} requests, ${retried} needed a second try, ${failed} failed, p50 ${percentile(latencies, 50).toFixed(0)} ms, max ${Math.max(...latencies).toFixed(0)} ms`);
  // Where a fork's time goes: when its copies reached each state (first, median and last copy, over every run).
  for (const state of ['active', 'network_allocated', 'ftap_created', 'image_generated', 'vm_started', 'vm_booted', 'ready']) {
    const at = timelines.flat().map((t) => t[state]).filter((v): v is number => v !== undefined).sort((a, b) => a - b);
    if (at.length > 0) console.log(`copies ${state.padEnd(18)} first ${at[0]} ms, median ${percentile(at, 50).toFixed(0)} ms, last ${at[at.length - 1]} ms after the fork was asked`);
  }
  console.log(`\ntargets: fork p50 ${percentile(totals, 50).toFixed(0)} ms (<= 3000), ${(percentile(totals, 50) / percentile(floorTotals, 50)).toFixed(2)}x its floor; the source failed ${failed} requests (0)`);
} finally {
  await bench.runtime.releasesSettled();
  await bench.close();
}
