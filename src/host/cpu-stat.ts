// How busy the host's CPUs are, as the kernel counts it (/proc/stat's first line: time
// spent per state since boot, in clock ticks). A sampler compares two readings: the
// share of CPU time that was not idle in between. CPU pressure (core/cpu-pressure.ts)
// reads it on each expiry check.
import { readFileSync } from 'node:fs';

interface CpuTimes {
  busy: number;
  total: number;
}

/** The host's CPU times since boot; undefined without /proc/stat (not Linux). */
export function readCpuTimes(): CpuTimes | undefined {
  let line: string;
  try {
    line = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0] ?? '';
  } catch {
    return undefined;
  }
  // cpu  user nice system idle iowait irq softirq steal guest guest_nice
  if (!line.startsWith('cpu ')) return undefined;
  const fields = line.trim().split(/\s+/).slice(1, 9).map(Number);
  if (fields.length < 4 || fields.some((n) => !Number.isFinite(n))) return undefined;
  const total = fields.reduce((sum, n) => sum + n, 0);
  const idle = (fields[3] ?? 0) + (fields[4] ?? 0);
  return { busy: total - idle, total };
}

/** Samples the host's CPU: each call says how busy it was since the call before. */
export class CpuSampler {
  private last: CpuTimes | undefined;
  private readonly read: () => CpuTimes | undefined;

  constructor(read: () => CpuTimes | undefined = readCpuTimes) {
    this.read = read;
    this.last = read();
  }

  /** Percent of the host's CPU time that was busy since the last sample; undefined on the first or without a reading. */
  busyPercent(): number | undefined {
    const now = this.read();
    const before = this.last;
    this.last = now;
    if (!now || !before || now.total <= before.total) return undefined;
    return ((now.busy - before.busy) * 100) / (now.total - before.total);
  }
}
