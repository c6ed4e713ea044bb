// Density: how many idle instances of the default profile one host carries. Starts N of
// them through the API, a few at a time, with the service's own admission (by measured
// use, pausing idle instances under memory pressure); then reports memory per idle
// instance (host RSS and PSS of its processes, its cgroup's usage, what admission
// counts), the host memory used (MemTotal - MemAvailable, against before the first
// create), how many were paused for pressure, the CPU an idle unfrozen one uses and how
// many CPU pressure froze, and how many the host killed (none should be), beside a floor
// measured in the same run: raw runsc sandboxes of the same image, without the service. Everything it started is removed at the end, also after
// Ctrl-C or SIGTERM (the first signal stops the creates and cleans up).
//
//   npm run bench:density [-- --instances N] [--at-once C] [--floor K] [--time-limit-s S]
//   (as root; N=200, C=4, K=5, S=3600 by default)
import { readFileSync, statfsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { PROFILE_DEFAULTS } from '../src/core/profile-schema.ts';
import { ImageStore } from '../src/images/builder.ts';
import { readHostMemory } from '../src/host/meminfo.ts';
import { CpuSampler } from '../src/host/cpu-stat.ts';
import { cpuUsedMs } from '../src/runtimes/gvisor/freezer.ts';
import { cgroupView, hostView } from './memory-sampler.ts';
import { type RawSandbox, withRawSandbox } from './raw-sandbox.ts';
import { startBenchService } from './setup.ts';
import { percentile } from './stats.ts';

const { values: options } = parseArgs({
  options: {
    instances: { type: 'string', default: '200' },
    'at-once': { type: 'string', default: '4' },
    floor: { type: 'string', default: '5' },
    'time-limit-s': { type: 'string', default: '3600' },
  },
});
const N = Number(options.instances);
const AT_ONCE = Number(options['at-once']);
const FLOOR = Number(options.floor);
const TIME_LIMIT_MS = Number(options['time-limit-s']) * 1000;
for (const [name, value, max] of [['instances', N, 1000], ['at-once', AT_ONCE, 32], ['floor', FLOOR, 30]] as const) {
  if (!Number.isInteger(value) || value < 1 || value > max) {
    console.error(`--${name} must be a whole number from 1 to ${max}`);
    process.exit(2);
  }
}
if (!(TIME_LIMIT_MS > 0)) {
  console.error('--time-limit-s must be a positive number');
  process.exit(2);
}
/** Idle for this long after the last create before sampling. */
const SETTLE_MS = 10_000;
/** How long idle CPU is measured over. */
const CPU_WINDOW_MS = 10_000;
/** A /30 per instance: 1024 addresses hold 256 instances. */
const POOL = '10.232.0.0/22';
const MIB = 1024 * 1024;
const mib = (bytes: number) => (bytes / MIB).toFixed(1);

// The first signal stops starting instances and lets every cleanup below run.
const stop = new AbortController();
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (stop.signal.aborted) return;
    console.error(`\n${signal}: no more creates; removing everything this benchmark started`);
    stop.abort(new Error(`interrupted by ${signal}`));
  });
}

const hostBefore = readHostMemory();
// Disk is admitted by what writable layers may grow to (disk_mb, and memory_mb for a
// saved memory, each): the default profile's 2.5 GB each do not fit 200 times on this
// kind of host, so the benchmark thin-provisions as an operator would
// (ROOMKIT_ADMIT_DISK_PERCENT above 100: layers are sparse files); the floor of real
// free space still holds.
const diskFreeMb = (() => {
  const fs = statfsSync(tmpdir());
  return Math.floor((fs.bavail * fs.bsize) / (1024 * 1024));
})();
const perInstanceDiskMb = PROFILE_DEFAULTS.disk_mb + PROFILE_DEFAULTS.memory_mb;
const admitDiskPercent = Math.min(1000, Math.max(90, Math.ceil(((N + 1) * perInstanceDiskMb * 100) / (diskFreeMb * 0.98))));
const bench = await startBenchService(POOL, {
  // Quotas out of the way: one organization holds every instance.
  quotaInstances: 100_000,
  quotaMemoryMb: 1024 * 1024 * 1024,
  quotaVcpus: 100_000,
  quotaDiskMb: 1024 * 1024 * 1024,
  admitDiskPercent,
  warmPoolMaxInstances: 0,
  // Idle instances become candidates for CPU pressure's freeze (and memory pressure's
  // pause) after 15 s instead of 60, so that a burst of creates on a small host does not
  // wait a minute for the first ones to stop costing CPU.
  pressureIdleS: 15,
});
try {
  const { config, log, services, dataDir } = bench;
  const profile = (await services.profiles.list(bench.organizationId))[0]!;
  const profileId = profile.profile_id;
  console.log(
    `disk: ${diskFreeMb} MB free; ${N} default instances commit ${N * perInstanceDiskMb} MB of limits: ROOMKIT_ADMIT_DISK_PERCENT=${admitDiskPercent}` +
      (admitDiskPercent > 100 ? ' (thin-provisioned: layers take what is written)' : ''),
  );
  console.log(`roomkit density benchmark: ${N} idle instances (memory_mb ${PROFILE_DEFAULTS.memory_mb}, vcpus ${PROFILE_DEFAULTS.vcpus}), ${AT_ONCE} created at a time; floor: ${FLOOR} raw runsc sandboxes`);
  console.log(`host: ${hostBefore.totalMb} MB, ${hostBefore.totalMb - hostBefore.availableMb} MB in use before; admission: ${config.admitMemoryPercent}% with a ${config.admitReserveMb} MB reserve; ROOMKIT_PRESSURE_IDLE_S=${config.pressureIdleS}, ROOMKIT_FREEZE_CPU_PERCENT=${config.freezeCpuPercent}\n`);
  const image = await new ImageStore({ dir: config.imagesDir, log }).ensure({ image: profile.image, packages: profile.packages, user: profile.user, home: profile.home });

  // Creates, a few at a time, until N are made, one is refused or fails, or time is up.
  const started = Date.now();
  const deadline = started + TIME_LIMIT_MS;
  const made: string[] = [];
  const refused: string[] = [];
  let next = 0;
  const worker = async () => {
    while (next < N && refused.length === 0 && !stop.signal.aborted && Date.now() < deadline) {
      const i = next++;
      const res = await fetch(`${bench.base}/api/profile/${profileId}/room/d-${i}`, { method: 'POST', headers: bench.headers, body: '{}' });
      const body = (await res.json()) as { instance_id?: string; state?: string; error?: string; message?: string };
      if (res.status === 201 && body.state === 'ready' && body.instance_id) made.push(body.instance_id);
      else refused.push(`d-${i}: ${res.status} ${body.error ?? body.state}: ${body.message ?? ''}`);
      if (made.length % 20 === 0 && res.status === 201) console.log(`  ${made.length} ready after ${((Date.now() - started) / 1000).toFixed(0)} s`);
    }
  };
  await Promise.all(Array.from({ length: AT_ONCE }, worker));
  const createS = (Date.now() - started) / 1000;
  console.log(`\n${made.length} of ${N} instances ready in ${createS.toFixed(0)} s (${(made.length / createS).toFixed(2)} per second)`);
  for (const line of refused) console.log(`  stopped at: ${line}`);
  if (Date.now() >= deadline) console.log(`  stopped at the time limit of ${TIME_LIMIT_MS / 1000} s`);
  stop.signal.throwIfAborted();
  await sleep(SETTLE_MS, undefined, { signal: stop.signal });

  // The service's instances, idle.
  const rows = await services.db.selectFrom('instances').select(['id', 'state']).where('organization_id', '=', bench.organizationId).execute();
  const byState = new Map<string, number>();
  for (const r of rows) byState.set(r.state, (byState.get(r.state) ?? 0) + 1);
  const running = rows.filter((r) => r.state === 'ready').map((r) => r.id);
  const hostAfter = readHostMemory();
  const service = sample(running, (id) => bench.runtime.memoryInUseMb(id) ?? 0);
  const failedWhy = await services.db
    .selectFrom('instance_events')
    .select(['reason_code'])
    .where('instance_id', 'in', rows.length > 0 ? rows.map((r) => r.id) : [''])
    .where('state', '=', 'failed')
    .execute();
  const killed = failedWhy.filter((e) => e.reason_code === 'out_of_memory' || e.reason_code === 'sandbox_exited').length;
  // CPU while idle: each unfrozen sandbox's CPU time over a window, and the host's.
  const frozen = running.filter((id) => bench.runtime.isFrozen(id)).length;
  const hostCpu = new CpuSampler();
  const serviceCpu = await idleCpuPercent(running.filter((id) => !bench.runtime.isFrozen(id)));
  const hostBusy = hostCpu.busyPercent();
  const serviceRss = Number(/^VmRSS:\s+(\d+) kB$/m.exec(readFileSync('/proc/self/status', 'utf8'))?.[1] ?? 0) * 1024;

  // The floor: raw sandboxes of the same image, measured the same way.
  let floor: Sampled | undefined;
  let floorCpu: number | undefined;
  await withRawSandboxes(FLOOR, (name, use) => withRawSandbox(join(dataDir, 'floor'), name, image, { ...PROFILE_DEFAULTS, home: profile.home }, use), async (raw) => {
    await sleep(SETTLE_MS, undefined, { signal: stop.signal });
    floor = sample(raw.map((s) => s.id), () => 0);
    floorCpu = await idleCpuPercent(raw.map((s) => s.id));
  });

  const line = (label: string, s: Sampled | undefined, key: keyof Sampled['p50']) => `  ${label.padEnd(30)}${(s ? mib(s.p50[key]) : '-').padStart(10)}`;
  console.log(`\nper idle instance, MiB (p50)          roomkit    floor`);
  for (const [label, key] of [['host RSS of its processes', 'rss'], ['host PSS of its processes', 'pss'], ['cgroup usage', 'usage'], ['cgroup kernel memory', 'kernel']] as const) {
    console.log(`${line(label, service, key)}${(floor ? mib(floor.p50[key]) : '-').padStart(9)}`);
  }
  console.log(`${line('counted by admission', service, 'counted')}`);
  const pct = (v: number | undefined) => (v === undefined ? '-' : `${v.toFixed(2)}%`);
  console.log(`  ${'CPU of an unfrozen idle one'.padEnd(30)}${pct(serviceCpu).padStart(10)}${pct(floorCpu).padStart(9)}  (of one core, over ${CPU_WINDOW_MS / 1000} s)`);
  console.log(`\nCPU: host ${hostBusy === undefined ? '-' : `${hostBusy.toFixed(0)}%`} busy over that window; ${frozen} of ${running.length} ready instances frozen by CPU pressure (ROOMKIT_FREEZE_CPU_PERCENT=${config.freezeCpuPercent}; ${services.instances.cpuPressure.frozenCount} freezes since the start)`);
  const usedMb = hostAfter.totalMb - hostAfter.availableMb - (hostBefore.totalMb - hostBefore.availableMb);
  console.log(`\nhost memory used: ${hostAfter.totalMb - hostAfter.availableMb} MB of ${hostAfter.totalMb} MB (${usedMb} MB more than before: ${(usedMb / Math.max(1, made.length)).toFixed(1)} MB per instance made, with the floor's sandboxes stopped)`);
  console.log(`service process RSS: ${mib(serviceRss)} MiB`);
  console.log(`instances by state: ${[...byState].map(([s, n]) => `${s} ${n}`).join(', ')}`);
  console.log(`paused for memory pressure: ${services.instances.memoryPressure.pausedCount}; killed by the host (out_of_memory, sandbox_exited): ${killed}`);
  const capacity = await services.admission.capacity(services.db, bench.runtime);
  console.log(`admission now: ${capacity.memory.in_use_mb} MB in use of ${capacity.memory.limit_mb}, reserve ${capacity.memory.reserve_mb}, room ${capacity.memory.room_mb} MB (${capacity.memory.under_pressure ? 'under pressure' : 'no pressure'}); limits committed: ${capacity.memory.committed_mb} MB`);
} catch (err) {
  // Ctrl-C or SIGTERM: say so and clean up, without a stack trace.
  if (!stop.signal.aborted) throw err;
  console.error(`stopped early (${(stop.signal.reason as Error).message}): no figures`);
} finally {
  console.log('\nremoving every instance (a few at a time)...');
  const removing = Date.now();
  // A shutdown keeps paused instances for the next start: these are deleted first.
  const paused = await bench.services.db.selectFrom('instances').select('id').where('state', 'in', ['paused', 'pausing', 'resuming']).execute();
  for (const { id } of paused) {
    await bench.services.instances.deleteAt({ organizationId: bench.organizationId, instanceId: id }).catch((err: unknown) => console.error(`could not delete paused instance ${id}: ${String(err)}`));
  }
  await bench.close();
  console.log(`removed in ${((Date.now() - removing) / 1000).toFixed(0)} s`);
}

/** p50 over the sandboxes of the CPU each used over CPU_WINDOW_MS, in percent of one core (from its cgroup). */
async function idleCpuPercent(ids: string[]): Promise<number | undefined> {
  const start = new Map(ids.map((id) => [id, cpuUsedMs(id)]));
  const t0 = performance.now();
  await sleep(CPU_WINDOW_MS, undefined, { signal: stop.signal });
  const elapsed = performance.now() - t0;
  const used: number[] = [];
  for (const [id, before] of start) {
    const after = cpuUsedMs(id);
    if (before !== undefined && after !== undefined) used.push(((after - before) * 100) / elapsed);
  }
  return used.length === 0 ? undefined : percentile(used, 50);
}

interface Sampled {
  p50: { rss: number; pss: number; usage: number; kernel: number; counted: number };
}

/** p50 over the sandboxes of their host processes' RSS and PSS, their cgroup's usage and kernel memory, and what admission counts (MiB → bytes). */
function sample(ids: string[], counted: (id: string) => number): Sampled {
  const rss: number[] = [];
  const pss: number[] = [];
  const usage: number[] = [];
  const kernel: number[] = [];
  const admitted: number[] = [];
  for (const id of ids) {
    const host = hostView(id);
    const cgroup = cgroupView(id);
    if (!host || !cgroup) continue;
    rss.push(host.total.rss);
    pss.push(host.total.pss);
    usage.push(cgroup.usage);
    kernel.push(cgroup.kernel);
    admitted.push(counted(id) * MIB);
  }
  const p = (values: number[]) => (values.length === 0 ? 0 : percentile(values, 50));
  return { p50: { rss: p(rss), pss: p(pss), usage: p(usage), kernel: p(kernel), counted: p(admitted) } };
}

/** `count` raw sandboxes running at once, each removed after `use` whatever happened. */
async function withRawSandboxes(
  count: number,
  start: (name: string, use: (sandbox: RawSandbox) => Promise<void>) => Promise<void>,
  use: (sandboxes: RawSandbox[]) => Promise<void>,
  held: RawSandbox[] = [],
): Promise<void> {
  if (held.length === count) return use(held);
  stop.signal.throwIfAborted();
  await start(`d${held.length}`, async (sandbox) => {
    await sandbox.start();
    await withRawSandboxes(count, start, use, [...held, sandbox]);
  });
}
