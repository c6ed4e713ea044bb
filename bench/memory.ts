// Memory of idle instances of the default profile, next to the floor measured in the
// same run: raw runsc sandboxes of the same root filesystem running `sleep infinity`
// without the service. Two groups of N run at once (the floor and the service's), so
// that each is measured with the same sandboxes sharing runsc's pages. For each instance: its host processes' RSS and PSS
// by role, its memory cgroup, and the guest's own view (bench/memory-sampler.ts); then
// how much the service process grows per instance, and how many idle instances fit in
// 24 GiB by their memory against how many admission would place there.
//
//   npm run bench:memory [-- --instances N]    (as root; N=5 by default; part of npm run bench)
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { readdirSync, readFileSync } from 'node:fs';
import { PROFILE_DEFAULTS } from '../src/core/profile-schema.ts';
import { ImageStore } from '../src/images/builder.ts';
import { type CgroupView, cgroupView, GUEST_ROLES, GUEST_SCRIPT, type GuestView, HOST_ROLES, type HostView, hostView, parseGuestView } from './memory-sampler.ts';
import { type RawSandbox, withRawSandbox } from './raw-sandbox.ts';
import { type BenchService, startBenchService } from './setup.ts';
import { percentile } from './stats.ts';

const { values: options } = parseArgs({ options: { instances: { type: 'string', default: '5' } } });
const INSTANCES = Number(options.instances);
if (!Number.isInteger(INSTANCES) || INSTANCES < 1 || INSTANCES > 30) {
  console.error('--instances must be a whole number from 1 to 30');
  process.exit(2);
}
/** Idle for this long after the last instance is ready before the first sample. */
const SETTLE_MS = 5_000;
const SAMPLES = 3;
const SAMPLE_GAP_MS = 2_000;
/** The host size the fit is given for. */
const HOST_MIB = 24 * 1024;

const MIB = 1024 * 1024;
const mib = (bytes: number) => bytes / MIB;

interface Group {
  label: string;
  ids: string[];
  /** GUEST_SCRIPT's output from inside the instance. */
  guest(index: number): Promise<string>;
}

interface Measured {
  host: HostView[];
  cgroup: CgroupView[];
  guest: GuestView;
}

/** Creates `count` instances of the service's default profile, one after another, over HTTP; their ids. */
async function createInstances(bench: BenchService, room: string, count: number): Promise<string[]> {
  const profile = (await bench.services.profiles.list(bench.organizationId))[0]!;
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const res = await fetch(`${bench.base}/api/profile/${profile.profile_id}/room/${room}-${i}`, { method: 'POST', headers: bench.headers, body: '{}' });
    const body = (await res.json()) as { instance_id: string; state: string };
    if (res.status !== 201 || body.state !== 'ready') throw new Error(`create ${room}-${i} answered ${res.status}: ${JSON.stringify(body)}`);
    ids.push(body.instance_id);
  }
  return ids;
}

async function deleteInstances(bench: BenchService, room: string, count: number): Promise<void> {
  const profile = (await bench.services.profiles.list(bench.organizationId))[0]!;
  for (let i = 0; i < count; i++) {
    const res = await fetch(`${bench.base}/api/profile/${profile.profile_id}/room/${room}-${i}`, { method: 'DELETE', headers: bench.headers });
    if (res.status !== 200) throw new Error(`delete ${room}-${i} answered ${res.status}`);
  }
}

function serviceGroup(label: string, bench: BenchService, ids: string[]): Group {
  return {
    label,
    ids,
    async guest(index) {
      const result = await bench.runtime.exec(ids[index]!, ['/bin/sh', '-c', GUEST_SCRIPT], { as: 'root', timeoutMs: 30_000 });
      if (result.code !== 0) throw new Error(`the guest listing in ${ids[index]} exited ${result.code}: ${result.stderr}`);
      return result.stdout;
    },
  };
}

/** `count` raw sandboxes at once, each in its own namespace, removed after `use`. */
async function withRawSandboxes(count: number, start: (name: string, use: (sandbox: RawSandbox) => Promise<void>) => Promise<void>, use: (sandboxes: RawSandbox[]) => Promise<void>, held: RawSandbox[] = []): Promise<void> {
  if (held.length === count) return use(held);
  await start(`m${held.length}`, async (sandbox) => {
    await sandbox.start();
    await withRawSandboxes(count, start, use, [...held, sandbox]);
  });
}

/** The service process's resident memory and JS heap after a full garbage collection, so that they count what is held, not garbage. */
function serviceMemory(): { rss: number; heap: number } {
  (runInNewContext('gc') as () => void)();
  const { rss, heapUsed } = process.memoryUsage();
  return { rss, heap: heapUsed };
}

/** Sandboxes running on the whole host now (runsc-sandbox processes): how many share runsc's pages, which PSS divides. */
function sandboxesOnHost(): number {
  let count = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').startsWith('runsc-sandbox\0')) count++;
    } catch {
      // ended meanwhile
    }
  }
  return count;
}

/** Host and cgroup samples of every instance of every group, SAMPLES times; then the guest's view once (its exec would show up on the host). */
async function measure(groups: Group[]): Promise<Measured[][]> {
  const measured = groups.map((g) => g.ids.map((): Measured => ({ host: [], cgroup: [], guest: { inUse: 0, rssByRole: { agent: 0, 'root service': 0, 'tini, sleep': 0, other: 0 } } })));
  for (let s = 0; s < SAMPLES; s++) {
    if (s > 0) await sleep(SAMPLE_GAP_MS);
    groups.forEach((group, g) =>
      group.ids.forEach((id, i) => {
        const host = hostView(id);
        const cgroup = cgroupView(id);
        if (!host || !cgroup) throw new Error(`${group.label}: sandbox ${id} has no cgroup to read`);
        measured[g]![i]!.host.push(host);
        measured[g]![i]!.cgroup.push(cgroup);
      }),
    );
  }
  for (const [g, group] of groups.entries()) {
    for (let i = 0; i < group.ids.length; i++) measured[g]![i]!.guest = parseGuestView(await group.guest(i));
  }
  return measured;
}

type Row = [label: string, value: (m: Measured) => number, unit?: 'count'];

const median = (values: number[]) => percentile(values, 50);
const hostRow = (label: string, f: (h: HostView) => number): Row => [label, (m) => median(m.host.map(f))];
const cgroupRow = (label: string, f: (c: CgroupView) => number): Row => [label, (m) => median(m.cgroup.map(f))];

const ROWS: Row[] = [
  ['host processes in its cgroup', (m) => median(m.host.map((h) => h.processes)), 'count'],
  hostRow('host RSS, summed', (h) => h.total.rss),
  hostRow('host PSS, summed', (h) => h.total.pss),
  ...HOST_ROLES.map((role) => hostRow(`  ${role}`, (h) => h.byRole[role].pss)),
  hostRow('host private (USS), summed', (h) => h.total.private),
  cgroupRow('cgroup usage', (c) => c.usage),
  cgroupRow('  rss (anonymous)', (c) => c.rss),
  cgroupRow('  cache', (c) => c.cache),
  cgroupRow('    of it shmem (guest memory)', (c) => c.shmem),
  cgroupRow('  kernel', (c) => c.kernel),
  ['guest: memory in use (meminfo)', (m) => m.guest.inUse],
  ...GUEST_ROLES.map((role): Row => [`guest RSS: ${role}`, (m) => m.guest.rssByRole[role]]),
];

/** Each row's value per instance of a group. */
const perInstance = (row: Row, group: Measured[]) => group.map((m) => row[1](m));

function table(groups: Group[], measured: Measured[][]): string {
  const cell = (row: Row, values: number[]) => {
    const f = (v: number) => (row[2] === 'count' ? String(v) : mib(v).toFixed(1));
    return `${f(percentile(values, 50))} (${f(Math.min(...values))}-${f(Math.max(...values))})`.padStart(24);
  };
  const head = `${'per instance, MiB: p50 (min-max)'.padEnd(34)}${groups.map((g) => g.label.padStart(24)).join('')}`;
  const lines = ROWS.map((row) => `${row[0].padEnd(34)}${measured.map((group) => cell(row, perInstance(row, group))).join('')}`);
  return [head, ...lines].join('\n');
}

setFlagsFromString('--expose-gc');
const bench = await startBenchService('10.244.0.0/25');
try {
  const { config, log, services, runtime, dataDir } = bench;
  const profile = (await services.profiles.list(bench.organizationId))[0]!;
  console.log(`roomkit memory benchmark: ${INSTANCES} idle instances of the default profile per group, cached image\n`);
  const images = new ImageStore({ dir: config.imagesDir, log });
  const buildStarted = Date.now();
  const image = await images.ensure({ image: profile.image, packages: profile.packages, user: profile.user, home: profile.home });
  console.log(`image ${image.key} ready (${((Date.now() - buildStarted) / 1000).toFixed(1)} s, built once before measuring)\n`);

  // The service's own growth: the first create also loads code, so the figure per instance comes from the others.
  const none = serviceMemory();
  const onIds = await createInstances(bench, 'mem', 1);
  await sleep(1_000);
  const first = serviceMemory();
  onIds.push(...(await createInstances(bench, 'mem-more', INSTANCES - 1)));
  await sleep(1_000);
  const all = serviceMemory();

  await withRawSandboxes(
    INSTANCES,
    (name, use) => withRawSandbox(join(dataDir, 'floor'), name, image, { ...PROFILE_DEFAULTS, home: profile.home }, use),
    async (raw) => {
      await sleep(SETTLE_MS);
      const groups: Group[] = [
        {
          label: 'floor: raw runsc',
          ids: raw.map((s) => s.id),
          guest: async (i) => (await raw[i]!.runsc(['exec', '--user=0:0', raw[i]!.id, '/bin/sh', '-c', GUEST_SCRIPT])).stdout,
        },
        serviceGroup('roomkit', bench, onIds),
      ];
      const onHost = sandboxesOnHost();
      const measured = await measure(groups);
      console.log(table(groups, measured));
      console.log(`\n(${SAMPLES} samples ${SAMPLE_GAP_MS / 1000} s apart from ${SETTLE_MS / 1000} s after the last start, the median of each instance; the guest's view once, after them;`);
      console.log(` PSS shares runsc's pages among the ${onHost} sandboxes on the host at the time, these ${2 * INSTANCES} and any others)\n`);

      const p50 = (g: number, row: Row) => percentile(perInstance(row, measured[g]!), 50);
      const row = (label: string) => ROWS.find((r) => r[0] === label)!;
      const [pssRow, usageRow, kernelRow, agentRow] = [row('host PSS, summed'), row('cgroup usage'), row('  kernel'), row('guest RSS: agent')];
      console.log(`inside the guest the agent's two processes (init, serve) report ${mib(p50(1, agentRow)).toFixed(1)} MiB RSS together, pages they share counted twice`);
      console.log(`roomkit over the floor at p50: host PSS +${mib(p50(1, pssRow) - p50(0, pssRow)).toFixed(1)} MiB, cgroup usage +${mib(p50(1, usageRow) - p50(0, usageRow)).toFixed(1)} MiB\n`);

      const each = (key: 'rss' | 'heap') => (INSTANCES > 1 ? (all[key] - first[key]) / (INSTANCES - 1) : first[key] - none[key]);
      // The heap's growth is part of RSS's; at a few instances RSS's own noise can hide it.
      const growth = Math.max(0, each('rss'), each('heap'));
      const after = INSTANCES > 1 ? ' after the first' : '';
      console.log(`service process after a full GC, with no instance / 1 / ${INSTANCES}: RSS ${[none, first, all].map((m) => mib(m.rss).toFixed(1)).join(' / ')} MiB, JS heap ${[none, first, all].map((m) => mib(m.heap).toFixed(1)).join(' / ')} MiB`);
      console.log(`  per instance${after}: RSS ${mib(each('rss')).toFixed(2)} MiB, JS heap ${mib(each('heap')).toFixed(3)} MiB (the first create also loads code: RSS ${mib(first.rss - none.rss).toFixed(1)} MiB)\n`);

      // What one more idle instance takes: its processes' share of user pages (PSS), the
      // kernel memory of its tasks (in no PSS), and what the service keeps for it.
      const perInstanceMib = mib(p50(1, pssRow) + p50(1, kernelRow) + growth);
      const usage = p50(1, usageRow);
      const cost = runtime.hostCost({ memory_mb: profile.memory_mb, vcpus: profile.vcpus, disk_mb: profile.disk_mb });
      const usableMib = Math.floor((HOST_MIB * config.admitMemoryPercent) / 100) - config.admitReserveMb;
      const admitted = Math.floor(usableMib / Math.max(1, mib(usage)));
      console.log(`idle instances that fit in 24 GiB, by memory alone (nothing else on the host, instances idle as here):`);
      console.log(`  ${Math.floor(HOST_MIB / perInstanceMib)} by host PSS + kernel memory + the service's growth (${perInstanceMib.toFixed(1)} MiB each); ${Math.floor(HOST_MIB / mib(usage))} by cgroup usage (${mib(usage).toFixed(1)} MiB each)`);
      console.log(`  admission places about ${admitted} idle ones: it counts what they use (cgroup usage), beside a reserve of ROOMKIT_ADMIT_RESERVE_MB=${config.admitReserveMb}, within ROOMKIT_ADMIT_MEMORY_PERCENT=${config.admitMemoryPercent} of 24 GiB; each keeps its own limit, memory_mb ${profile.memory_mb} + headroom = ${cost.memoryMb} MiB`);
    },
  );
  await deleteInstances(bench, 'mem', 1);
  await deleteInstances(bench, 'mem-more', INSTANCES - 1);
} finally {
  await bench.close();
}
