// What the load benchmark watches of the service process over time: resident memory
// and threads (/proc/<pid>/status), open descriptors by type (/proc/<pid>/fd), and from
// the service's own /metrics its JS heap, external memory and event-loop lag; then
// whether each stayed flat under the load, or how much it grew and what grew with it.
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

export interface Sample {
  /** Seconds since the load started (negative before it). */
  atS: number;
  rssMib: number;
  threads: number;
  /** CPU time the service process used so far (user + system), in seconds; its children not included. */
  cpuS: number;
  fds: number;
  fdTypes: Record<string, number>;
  heapUsedMib: number;
  externalMib: number;
  /** Event-loop lag p99 since the previous scrape, in ms (prom-client's histogram). */
  lagP99Ms: number;
  /** Requests the load had answered by then. */
  done: number;
}

const mib = (bytes: number) => bytes / 1024 / 1024;

/** Clock ticks per second of /proc/<pid>/stat's times (USER_HZ, 100 on Linux). */
const TICKS_PER_S = 100;

function status(pid: number): { rssMib: number; threads: number; cpuS: number } {
  const text = readFileSync(`/proc/${pid}/status`, 'utf8');
  const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+)`, 'm').exec(text)?.[1] ?? Number.NaN);
  // Fields after the command name, which may hold spaces: state is the 3rd, utime and stime the 14th and 15th.
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const cpuS = (Number(rest[11]) + Number(rest[12])) / TICKS_PER_S;
  return { rssMib: field('VmRSS') / 1024, threads: field('Threads'), cpuS };
}

/** The process's descriptors by what they are: socket, pipe, anon_inode (eventfd, epoll…), file. */
function descriptors(pid: number): { fds: number; fdTypes: Record<string, number> } {
  const fdTypes: Record<string, number> = {};
  let fds = 0;
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    let target: string;
    try {
      target = readlinkSync(`/proc/${pid}/fd/${fd}`);
    } catch {
      continue; // closed between the listing and now
    }
    const type = /^(socket|pipe|anon_inode):/.exec(target)?.[1] ?? 'file';
    fdTypes[type] = (fdTypes[type] ?? 0) + 1;
    fds++;
  }
  return { fds, fdTypes };
}

async function metrics(base: string): Promise<Pick<Sample, 'heapUsedMib' | 'externalMib' | 'lagP99Ms'>> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const value = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? Number.NaN);
  return {
    heapUsedMib: mib(value('nodejs_heap_size_used_bytes')),
    externalMib: mib(value('nodejs_external_memory_bytes')),
    lagP99Ms: value('nodejs_eventloop_lag_p99_seconds') * 1000,
  };
}

/** The host's CPU time so far, busy and in all (jiffies of /proc/stat's first line), for the share that was busy between two readings. */
export function hostCpu(): { busy: number; total: number } {
  const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1, 9).map(Number);
  const total = fields.reduce((a, b) => a + b, 0);
  const idle = fields[3]! + fields[4]!; // idle, iowait
  return { busy: total - idle, total };
}

export function busyShare(from: { busy: number; total: number }, to: { busy: number; total: number }): string {
  return `${((100 * (to.busy - from.busy)) / Math.max(1, to.total - from.total)).toFixed(0)}%`;
}

export async function sample(pid: number, base: string, atS: number, done: number): Promise<Sample> {
  return { atS, ...status(pid), ...descriptors(pid), ...(await metrics(base)), done };
}

export function table(samples: Sample[], rows = 24): string {
  // At most `rows` lines, evenly picked, always the first and the last.
  const step = Math.max(1, Math.ceil(samples.length / rows));
  const shown = samples.filter((_, i) => i % step === 0 || i === samples.length - 1);
  const types = [...new Set(samples.flatMap((s) => Object.keys(s.fdTypes)))].sort();
  const head = `   t (s)  answered   RSS MiB  heap MiB  ext MiB  threads   fds  ${types.map((t) => t.padStart(10)).join('')}  loop lag p99`;
  const lines = shown.map((s) =>
    [
      s.atS.toFixed(0).padStart(8),
      String(s.done).padStart(10),
      s.rssMib.toFixed(1).padStart(9),
      s.heapUsedMib.toFixed(1).padStart(9),
      s.externalMib.toFixed(1).padStart(8),
      String(s.threads).padStart(8),
      String(s.fds).padStart(5),
      ' ' + types.map((t) => String(s.fdTypes[t] ?? 0).padStart(10)).join(''),
      `${s.lagP99Ms.toFixed(1).padStart(9)} ms`,
    ].join(' '),
  );
  return [head, ...lines].join('\n');
}

/** Least-squares slope of y over t (per second). */
function slope(points: [number, number][]): number {
  const n = points.length;
  const mt = points.reduce((s, [t]) => s + t, 0) / n;
  const my = points.reduce((s, [, y]) => s + y, 0) / n;
  const num = points.reduce((s, [t, y]) => s + (t - mt) * (y - my), 0);
  const den = points.reduce((s, [t]) => s + (t - mt) ** 2, 0);
  return den === 0 ? 0 : num / den;
}

export interface Verdict {
  text: string;
  rssFlat: boolean;
  fdsFlat: boolean;
}

/**
 * Flat or not, over the samples of the steady part of the load (after `warmupS`): the
 * trend (least-squares slope) across that span, against a tolerance; RSS is flat
 * within max(16 MiB, 5 %), descriptors within max(4, concurrency / 2), since each
 * request in flight holds a few. Growth is put next to what grew with it, and next to
 * what the service holds by design and gives back (`notes`), and `after` (samples once
 * the load stopped) shows whether it is given back.
 */
export function verdict(steady: Sample[], after: Sample[], concurrency: number, notes: string[]): Verdict {
  if (steady.length < 4) return { text: 'too few samples in the steady part of the load to tell; run longer (--duration-s)', rssFlat: false, fdsFlat: false };
  const span = steady.at(-1)!.atS - steady[0]!.atS;
  const trend = (f: (s: Sample) => number) => slope(steady.map((s) => [s.atS, f(s)])) * span;
  const rssGrowth = trend((s) => s.rssMib);
  const rssMean = steady.reduce((s, x) => s + x.rssMib, 0) / steady.length;
  const rssTolerance = Math.max(16, rssMean * 0.05);
  const fdGrowth = trend((s) => s.fds);
  const fdTolerance = Math.max(4, concurrency / 2);
  const rssFlat = Math.abs(rssGrowth) <= rssTolerance;
  const fdsFlat = Math.abs(fdGrowth) <= fdTolerance;
  const range = (f: (s: Sample) => number, digits: number) => `${Math.min(...steady.map(f)).toFixed(digits)}-${Math.max(...steady.map(f)).toFixed(digits)}`;
  const perMin = (v: number) => (v / span) * 60;
  const lines: string[] = [];
  lines.push(
    rssFlat
      ? `RSS: flat (trend ${signed(rssGrowth)} MiB over ${span.toFixed(0)} s of steady load, within ±${rssTolerance.toFixed(0)} MiB; range ${range((s) => s.rssMib, 0)} MiB)`
      : `RSS: ${rssGrowth > 0 ? 'grew' : 'fell'} ${signed(rssGrowth)} MiB over ${span.toFixed(0)} s of steady load (${signed(perMin(rssGrowth))} MiB/min; range ${range((s) => s.rssMib, 0)} MiB)`,
  );
  lines.push(
    fdsFlat
      ? `descriptors: flat (trend ${signed(fdGrowth)} over ${span.toFixed(0)} s, within ±${fdTolerance.toFixed(0)}; range ${range((s) => s.fds, 0)})`
      : `descriptors: ${fdGrowth > 0 ? 'grew' : 'fell'} ${signed(fdGrowth)} over ${span.toFixed(0)} s (${signed(perMin(fdGrowth))}/min; range ${range((s) => s.fds, 0)})`,
  );
  if (!rssFlat) {
    const heap = trend((s) => s.heapUsedMib);
    const external = trend((s) => s.externalMib);
    lines.push(`  with it: JS heap used ${signed(heap)} MiB, external (Buffers) ${signed(external)} MiB; the rest, ${signed(rssGrowth - heap - external)} MiB, is native memory (V8's heap reserve, the allocator's free pages, threads' stacks)`);
  }
  if (!fdsFlat) {
    const types = [...new Set(steady.flatMap((s) => Object.keys(s.fdTypes)))];
    lines.push(`  by type: ${types.map((t) => `${t} ${signed(trend((s) => s.fdTypes[t] ?? 0))}`).join(', ')}`);
  }
  if (after.length > 0) {
    const last = after.at(-1)!;
    const end = steady.at(-1)!;
    lines.push(
      `after the load (${(last.atS - end.atS).toFixed(0)} s idle): RSS ${end.rssMib.toFixed(0)} -> ${last.rssMib.toFixed(0)} MiB, heap ${end.heapUsedMib.toFixed(0)} -> ${last.heapUsedMib.toFixed(0)} MiB, descriptors ${end.fds} -> ${last.fds}`,
    );
  }
  const last = after.at(-1);
  if (!rssFlat && last && last.rssMib <= steady[0]!.rssMib + rssTolerance) {
    lines.push(
      `  given back once the load stopped (${last.rssMib.toFixed(0)} MiB, against ${steady[0]!.rssMib.toFixed(0)} MiB at the start of the steady part): held for the work in flight or garbage not yet collected, not kept`,
    );
  }
  if (!rssFlat || !fdsFlat) lines.push(...notes.map((n) => `  note: ${n}`));
  return { text: lines.join('\n'), rssFlat, fdsFlat };
}

const signed = (v: number) => `${v >= 0 ? '+' : ''}${v.toFixed(1)}`;
