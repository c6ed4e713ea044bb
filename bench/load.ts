// Load and soak benchmark: sustained mixed traffic against a real roomkit service (its
// own `roomkit serve` process, real gVisor instances) for a set time, then throughput,
// latency percentiles and errors per kind of request, and the service process's
// resident memory and open descriptors over time with a verdict: flat, or how much they
// grew and with what. Next to it, the floor measured in the same run: the same mix at
// the same concurrency on the same instances without the service (`runsc exec` of the
// same programs; `GET /healthz` for requests that do no work in an instance).
//
//   npm run bench:load -- --duration-s 60 --instances 4 --concurrency 8
//
// Options: --duration-s (60), --instances (4), --concurrency (8), --floor-s (15),
// --sample-s (2), --warmup-s (a fifth of the duration, at most 30), --idle-s (10, samples
// after the load), --seed (1). As root. The service's quotas and rate limits are raised
// through its environment so that the load measures the service, not its limits; the
// output says which. Everything it starts is stopped and removed at the end, also on
// Ctrl-C or an error; a built image is cached only when ROOMKIT_IMAGES_DIR names a
// directory (else the image is built once, about 20 s, before anything is timed).
import { rmSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { mountsUnder } from '../src/host/mounts.ts';
import { listNetns } from '../src/network/netns.ts';
import { InstanceHandle } from '../src/runtimes/gvisor/instance-handle.ts';
import { Runsc } from '../src/runtimes/gvisor/runsc.ts';
import { type Context, type Kind, KINDS, type Outcome, pick, random, READ_FILE, READ_FILE_TEXT, type Target } from './load-mix.ts';
import { busyShare, hostCpu, type Sample, sample, table, verdict } from './process-sampler.ts';
import { type BenchServiceProcess, startBenchServiceProcess } from './setup.ts';
import { percentile } from './stats.ts';

const { values: opts } = parseArgs({
  options: {
    'duration-s': { type: 'string', default: '60' },
    instances: { type: 'string', default: '4' },
    concurrency: { type: 'string', default: '8' },
    'floor-s': { type: 'string', default: '15' },
    'sample-s': { type: 'string', default: '2' },
    'warmup-s': { type: 'string' },
    'idle-s': { type: 'string', default: '10' },
    seed: { type: 'string', default: '1' },
  },
});
const num = (name: keyof typeof opts, min: number): number => {
  const v = Number(opts[name]);
  if (!Number.isFinite(v) || v < min) {
    console.error(`--${name} must be a number of at least ${min}, got ${opts[name]}`);
    process.exit(2);
  }
  return v;
};
const DURATION_S = num('duration-s', 5);
const INSTANCES = Math.floor(num('instances', 1));
const CONCURRENCY = Math.floor(num('concurrency', 1));
const FLOOR_S = num('floor-s', 1);
const SAMPLE_S = num('sample-s', 0.2);
const WARMUP_S = opts['warmup-s'] === undefined ? Math.min(30, DURATION_S / 5) : num('warmup-s', 0);
const IDLE_S = num('idle-s', 0);
const SEED = Math.floor(num('seed', 0));

/** Output of `seq 1 2000`, which the mix's output command prints. */
const SEQ_OUTPUT_BYTES = 8893;

// Raised so that the load measures the service: every quota far above what the run can
// reach, the request rate limits off (0), and the per-instance caps above the concurrency.
const RAISED: Record<string, string> = {
  ROOMKIT_QUOTA_INSTANCES: String(Math.max(20, INSTANCES)),
  ROOMKIT_QUOTA_MEMORY_MB: String(1024 * 1024),
  ROOMKIT_QUOTA_VCPUS: '100000',
  ROOMKIT_QUOTA_DISK_MB: String(1024 * 1024 * 1024),
  ROOMKIT_QUOTA_CONCURRENT_COMMANDS: '100000',
  ROOMKIT_QUOTA_COMMANDS_PER_MINUTE: '1000000',
  ROOMKIT_RATE_LIMIT_KEY_REQUESTS: '0',
  ROOMKIT_RATE_LIMIT_ORG_REQUESTS: '0',
  ROOMKIT_RATE_LIMIT_RAW_CLIENT_REQUESTS: '0',
  ROOMKIT_RATE_LIMIT_RAW_INSTANCE_REQUESTS: '0',
  ROOMKIT_MAX_COMMANDS_PER_INSTANCE: String(Math.min(1024, Math.max(16, CONCURRENCY))),
  ROOMKIT_MAX_RAW_READS_PER_INSTANCE: String(Math.min(64, Math.max(4, CONCURRENCY))),
};

interface Answered {
  kind: Kind;
  ms: number;
  outcome: Outcome;
}

const stop = new AbortController();
let interrupted = false;
const onSignal = (signal: string) => {
  if (interrupted) {
    console.error(`\n${signal} again: still stopping the service and its instances; one moment`);
    return;
  }
  interrupted = true;
  console.error(`\n${signal}: stopping the load, then the service and its instances`);
  stop.abort();
};
process.on('SIGINT', () => onSignal('SIGINT'));
process.on('SIGTERM', () => onSignal('SIGTERM'));

/** `CONCURRENCY` workers, each sending one request after another until `seconds` have passed. */
async function drive(seconds: number, ctx: Context, targets: Target[], run: (kind: Kind, ctx: Context, target: Target, n: number) => Promise<Outcome>, seedOffset: number, progress?: (done: number) => void): Promise<Answered[]> {
  const records: Answered[] = [];
  const deadline = performance.now() + seconds * 1000;
  let n = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async (_, w) => {
      const next = random(SEED * 1000 + seedOffset + w);
      while (performance.now() < deadline && !ctx.signal.aborted) {
        const kind = pick(next);
        const target = targets[Math.floor(next() * targets.length)]!;
        const started = performance.now();
        let outcome: Outcome;
        try {
          outcome = await run(kind, ctx, target, n++);
        } catch (err) {
          if (ctx.signal.aborted) break;
          outcome = { status: 0, error: `network: ${(err as Error).cause ?? (err as Error).message}` };
        }
        records.push({ kind, ms: performance.now() - started, outcome });
        progress?.(records.length);
      }
    }),
  );
  return records;
}

const ms = (v: number) => (Number.isNaN(v) ? '-' : v < 10 ? v.toFixed(1) : v.toFixed(0)).padStart(6);
const pcts = (values: number[]) => `${ms(percentile(values, 50))} ${ms(percentile(values, 95))} ${ms(percentile(values, 99))}`;

function report(load: Answered[], floor: Answered[], loadS: number, floorS: number, cpu: { load: string; floor: string }): void {
  const failed = (r: Answered) => r.outcome.error !== undefined;
  const commands = load.filter((r) => r.kind.name.startsWith('command'));
  console.log(`through the service: ${load.length} requests in ${loadS.toFixed(1)} s = ${(load.length / loadS).toFixed(1)} requests/s (commands ${(commands.length / loadS).toFixed(1)}/s), ${load.filter(failed).length} failed`);
  console.log(`floor, no service:   ${floor.length} operations in ${floorS.toFixed(1)} s = ${(floor.length / floorS).toFixed(1)} operations/s, ${floor.filter(failed).length} failed`);
  console.log(`        the service's throughput is ${((100 * load.length) / loadS / (floor.length / floorS)).toFixed(0)}% of the floor's at the same concurrency`);
  console.log(`        the host's CPUs were busy ${cpu.load} of the time under the load and ${cpu.floor} under the floor (all processes, other users' too)\n`);
  console.log(`${'kind'.padEnd(34)} ${'n'.padStart(6)} ${'per s'.padStart(6)}    p50    p95    p99 ms  errors | floor ${''.padEnd(28)} ${'n'.padStart(5)}    p50    p95    p99 ms`);
  for (const kind of KINDS) {
    const mine = load.filter((r) => r.kind === kind);
    const theirs = floor.filter((r) => r.kind === kind);
    console.log(
      `${kind.name.padEnd(34)} ${String(mine.length).padStart(6)} ${(mine.length / loadS).toFixed(1).padStart(6)} ${pcts(mine.map((r) => r.ms))}    ${String(mine.filter(failed).length).padStart(5)} | ${kind.floorLabel.padEnd(34)} ${String(theirs.length).padStart(5)} ${pcts(theirs.map((r) => r.ms))}`,
    );
  }
  const all = load.map((r) => r.ms);
  console.log(`${'all'.padEnd(34)} ${String(load.length).padStart(6)} ${(load.length / loadS).toFixed(1).padStart(6)} ${pcts(all)}    ${String(load.filter(failed).length).padStart(5)} | ${'all'.padEnd(34)} ${String(floor.length).padStart(5)} ${pcts(floor.map((r) => r.ms))}`);

  const errors = new Map<string, number>();
  for (const r of [...load.map((r) => ['service', r] as const), ...floor.map((r) => ['floor', r] as const)]) {
    if (r[1].outcome.error === undefined) continue;
    const status = r[1].outcome.status === 0 ? '' : `${r[1].outcome.status} `;
    const key = `${r[0]}: ${status}${r[1].outcome.error} (${r[1].kind.name})`;
    errors.set(key, (errors.get(key) ?? 0) + 1);
  }
  console.log(`\nerrors by status and code: ${errors.size === 0 ? 'none' : ''}`);
  for (const [key, count] of [...errors].sort((a, b) => b[1] - a[1])) console.log(`  ${String(count).padStart(6)}  ${key}`);
}

async function main(): Promise<number> {
  console.log(`roomkit load benchmark: ${DURATION_S} s of mixed traffic on ${INSTANCES} instances, ${CONCURRENCY} requests in flight, seed ${SEED}`);
  console.log('quotas and limits raised for the benchmark (environment of the service it starts), so that the load measures the service:');
  console.log(`  ${Object.entries(RAISED).map(([k, v]) => `${k}=${v}`).join(' ')}\n`);
  let service: BenchServiceProcess | undefined;
  let ok = false;
  try {
    service = await startBenchServiceProcess('10.237.0.0/24', RAISED);
    const { base, headers, pid, tag, dataDir } = service;
    const runsc = new Runsc({ root: join(service.dataDir, 'runsc') });
    const ctx: Context = { base, headers, runsc, signal: stop.signal };
    console.log(`service: pid ${pid} at ${base}; images ${process.env.ROOMKIT_IMAGES_DIR ? `cached in ${process.env.ROOMKIT_IMAGES_DIR}` : 'built in its scratch data directory'}`);

    const profile = await fetch(`${base}/api/profiles`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ name: 'bench-load', memory_mb: 512, disk_mb: 1024, network: { egress: 'none' }, command_timeout_s: 60 }),
    });
    const { profile_id: profileId } = (await profile.json()) as { profile_id: string };
    const createStarted = performance.now();
    const targets = await Promise.all(
      Array.from({ length: INSTANCES }, async (_, i) => {
        const roomUrl = `${base}/api/profile/${profileId}/room/load-${i}`;
        const res = await fetch(roomUrl, { method: 'POST', headers, body: '{}', signal: stop.signal });
        const body = (await res.json()) as { instance_id?: string; state?: string; error?: string; message?: string };
        if (res.status !== 201 || body.state !== 'ready') throw new Error(`instance ${i} did not start: ${res.status} ${JSON.stringify(body)}`);
        const put = await fetch(`${roomUrl}/file/${READ_FILE}`, { method: 'PUT', headers, body: JSON.stringify({ content: READ_FILE_TEXT }), signal: stop.signal });
        if (put.status !== 201) throw new Error(`writing ${READ_FILE} answered ${put.status}: ${await put.text()}`);
        // Its record names its network (a slot's, when it took one made ahead).
        return { instanceId: body.instance_id!, roomUrl, netns: new InstanceHandle(join(dataDir, 'instances'), tag, body.instance_id!).netns };
      }),
    );
    console.log(`${INSTANCES} instances (512 MB, 1 vCPU, 1024 MB disk, egress none) created in parallel in ${((performance.now() - createStarted) / 1000).toFixed(1)} s\n`);

    // Warm: each kind once per instance, both ways, untimed (the walker, the image's index, connections).
    for (const target of targets) for (const kind of KINDS) await Promise.all([kind.service(ctx, target, 0), kind.floor(ctx, target, 0)]);

    const floorCpu = hostCpu();
    const floorStarted = performance.now();
    const floor = await drive(FLOOR_S, ctx, targets, (kind, c, t, n) => kind.floor(c, t, n), 500);
    const floorS = (performance.now() - floorStarted) / 1000;
    const floorBusy = busyShare(floorCpu, hostCpu());
    if (stop.signal.aborted) return 130;

    const samples: Sample[] = [];
    let done = 0;
    const loadCpu = hostCpu();
    const loadStarted = performance.now();
    const at = () => (performance.now() - loadStarted) / 1000;
    samples.push(await sample(pid, base, 0, 0));
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        await sleep(SAMPLE_S * 1000);
        if (sampling) samples.push(await sample(pid, base, at(), done));
      }
    })();
    const load = await drive(DURATION_S, ctx, targets, (kind, c, t, n) => kind.service(c, t, n), 0, (d) => (done = d));
    const loadS = at();
    const loadBusy = busyShare(loadCpu, hostCpu());
    sampling = false;
    await sampler;
    samples.push(await sample(pid, base, at(), done));
    if (stop.signal.aborted) console.log('(interrupted: figures of the part that ran)\n');
    const after: Sample[] = [];
    for (let waited = 0; waited < IDLE_S && !stop.signal.aborted; waited += SAMPLE_S) {
      await sleep(SAMPLE_S * 1000);
      after.push(await sample(pid, base, at(), done));
    }

    report(load, floor, loadS, floorS, { load: loadBusy, floor: floorBusy });
    const first = samples[0]!;
    const last = samples.at(-1)!;
    const cpu = last.cpuS - first.cpuS;
    console.log(`\nservice process CPU: ${cpu.toFixed(1)} s in ${loadS.toFixed(0)} s (${((100 * cpu) / loadS).toFixed(0)}% of one core), ${((1000 * cpu) / Math.max(1, load.length)).toFixed(2)} ms per request; its runsc children are not included`);
    console.log(`\nservice process (pid ${pid}) over time, sampled every ${SAMPLE_S} s (/proc/${pid}/status and /fd, and its /metrics):`);
    console.log(table([...samples, ...after]));
    const outputs = load.filter((r) => r.kind.name.startsWith('command: seq') && r.outcome.error === undefined).length;
    const notes = [
      `the service keeps ended commands' output in memory for 15 minutes, up to ROOMKIT_COMMAND_OUTPUT_RETAIN_BYTES (64 MiB) in all; this run's ${outputs} output commands printed ${((outputs * SEQ_OUTPUT_BYTES) / 1024 / 1024).toFixed(1)} MiB`,
      'V8 lets its heap grow until its collector settles on a size; a longer run (--duration-s 600) shows whether the growth levels off',
    ];
    const steady = samples.filter((s) => s.atS >= WARMUP_S);
    console.log(`\nverdict, over the steady part (after ${WARMUP_S.toFixed(0)} s of warm-up):`);
    console.log(verdict(steady, after, CONCURRENCY, notes).text);
    ok = true;
    return 0;
  } finally {
    if (service) {
      await service.close();
      const left = [...listNetns(service.tag), ...mountsUnder(service.dataDir)];
      console.log(`\nservice stopped, its instances deleted, its data directory removed${left.length === 0 ? '; nothing of it is left on the host' : `; LEFT ON THE HOST: ${left.join(' ')}`}`);
      if (ok || interrupted) rmSync(service.logFile, { force: true });
      else console.log(`the service's log: ${service.logFile}`);
    }
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    if (interrupted) {
      console.error('interrupted; everything the benchmark started is stopped');
      process.exit(130);
    }
    console.error(err);
    process.exit(1);
  },
);
