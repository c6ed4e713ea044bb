// The instance's OOM killer. gVisor's kernel (in this release) does not enforce a
// memory size itself: when a sandbox reaches its host cgroup limit, the host kernel
// kills the whole sandbox. So the host cgroup gets headroom above memory_mb and no
// kernel OOM kill, and this guard watches each instance's usage: when it passes
// memory_mb, the largest process inside is killed with SIGKILL, as Linux's OOM killer
// would, and the instance lives on. If usage races to the hard limit first, the
// sandbox's allocations wait there (instead of it being killed) until the guard has
// made room.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import type { Logger } from 'pino';

export interface Victim {
  pid: number;
  rssKb: number;
  command: string;
}

export interface MemoryGuardOptions {
  log: Logger;
  /** Kills the largest process in the instance (not its init); null when none was found. */
  killLargest(instanceId: string): Promise<Victim | null>;
  intervalMs?: number;
}

interface Watched {
  thresholdBytes: number;
  cgroupDir: string;
  busy: boolean;
}

/** Room made above the hard limit while the guard works inside a frozen sandbox. */
const RESCUE_BYTES = 64 * 1024 * 1024;

export class MemoryGuard {
  private readonly watched = new Map<string, Watched>();
  private readonly options: MemoryGuardOptions;
  private timer: NodeJS.Timeout | undefined;

  constructor(options: MemoryGuardOptions) {
    this.options = options;
  }

  /**
   * Starts guarding an instance whose sandbox (and so its cgroup) exists. Returns false
   * when this host's cgroups do not allow it (the host limit alone then applies).
   */
  watch(instanceId: string, memoryMb: number): boolean {
    const cgroupDir = `/sys/fs/cgroup/memory/roomkit/${instanceId}`;
    if (!existsSync(`${cgroupDir}/memory.usage_in_bytes`)) return false;
    // Allocations wait at the hard limit instead of the kernel killing the sandbox.
    writeFileSync(`${cgroupDir}/memory.oom_control`, '1');
    this.watched.set(instanceId, { thresholdBytes: memoryMb * 1024 * 1024, cgroupDir, busy: false });
    this.timer ??= setInterval(() => this.tick(), this.options.intervalMs ?? 100);
    this.timer.unref();
    return true;
  }

  unwatch(instanceId: string): void {
    this.watched.delete(instanceId);
    if (this.watched.size === 0 && this.timer) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }

  stop(): void {
    this.watched.clear();
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  private tick(): void {
    for (const [id, w] of this.watched) {
      if (w.busy) continue;
      const usage = readNumber(`${w.cgroupDir}/memory.usage_in_bytes`);
      if (usage === null) {
        this.unwatch(id);
        continue;
      }
      const frozen = readFileSync(`${w.cgroupDir}/memory.oom_control`, 'utf8').includes('under_oom 1');
      if (usage < w.thresholdBytes && !frozen) continue;
      w.busy = true;
      void this.relieve(id, w, frozen).finally(() => (w.busy = false));
    }
  }

  private async relieve(id: string, w: Watched, frozen: boolean): Promise<void> {
    const limitFile = `${w.cgroupDir}/memory.limit_in_bytes`;
    const limit = readNumber(limitFile);
    try {
      // A frozen sandbox cannot even run the kill: give it a little room first.
      if (frozen && limit !== null) writeFileSync(limitFile, String(limit + RESCUE_BYTES));
      const victim = await this.options.killLargest(id);
      this.options.log.warn(
        { instanceId: id, victim, usageMb: Math.round((readNumber(`${w.cgroupDir}/memory.usage_in_bytes`) ?? 0) / 1048576) },
        victim ? 'instance out of memory: killed its largest process' : 'instance out of memory: no process to kill',
      );
      // Memory comes back once the victim is gone; wait for it before looking again.
      const deadline = Date.now() + 2000;
      while (Date.now() < deadline && (readNumber(`${w.cgroupDir}/memory.usage_in_bytes`) ?? 0) >= w.thresholdBytes) {
        await new Promise((r) => setTimeout(r, 20));
      }
    } catch (err) {
      this.options.log.error({ instanceId: id, err }, 'memory guard could not relieve the instance');
    } finally {
      if (frozen && limit !== null && existsSync(limitFile)) writeFileSync(limitFile, String(limit));
    }
  }
}

function readNumber(file: string): number | null {
  try {
    return Number(readFileSync(file, 'utf8').trim());
  } catch {
    return null;
  }
}
