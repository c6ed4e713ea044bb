// The host's memory as the kernel counts it (/proc/meminfo): its total, and what is
// available to new work without swapping (MemAvailable: free memory plus the page cache
// and slab the kernel can reclaim). Host admission is bounded by it.
import { readFileSync } from 'node:fs';
import { totalmem } from 'node:os';

export interface HostMemory {
  totalMb: number;
  availableMb: number;
}

/** The host's memory now; without /proc/meminfo (not Linux), the total for both. */
export function readHostMemory(): HostMemory {
  let text: string;
  try {
    text = readFileSync('/proc/meminfo', 'utf8');
  } catch {
    const mb = Math.floor(totalmem() / (1024 * 1024));
    return { totalMb: mb, availableMb: mb };
  }
  const kb = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB$`, 'm').exec(text)?.[1] ?? NaN);
  const total = kb('MemTotal');
  const available = kb('MemAvailable');
  const totalMb = Number.isFinite(total) ? Math.floor(total / 1024) : Math.floor(totalmem() / (1024 * 1024));
  return { totalMb, availableMb: Number.isFinite(available) ? Math.floor(available / 1024) : totalMb };
}
