// Notices a sandbox that ends by itself: the host's OOM killer, a crash of gVisor, or
// anyone on the host killing it. Without this, an instance whose sandbox is gone stays
// `ready` in the store, and every later request fails without saying why. Each watched
// sandbox is its host process (the pid `runsc state` names), checked once a second by
// reading /proc: no process is started, so watching many instances costs next to
// nothing. The start time in /proc/<pid>/stat tells a reused pid from the sandbox.
import { readFileSync } from 'node:fs';

/** How often the sandboxes are checked. */
const CHECK_INTERVAL_MS = 1000;

interface Watched {
  pid: number;
  startTime: string;
}

export class SandboxWatch {
  private readonly watched = new Map<string, Watched>();
  /** Sandboxes found gone, until unwatched (their instance is then destroyed). */
  private readonly ended = new Set<string>();
  private readonly onExit: (instanceId: string) => void;
  private readonly intervalMs: number;
  private timer: NodeJS.Timeout | undefined;

  constructor(options: { onExit(instanceId: string): void; intervalMs?: number }) {
    this.onExit = options.onExit;
    this.intervalMs = options.intervalMs ?? CHECK_INTERVAL_MS;
  }

  /** Starts watching an instance's sandbox process. False when that process is not running. */
  watch(instanceId: string, pid: number): boolean {
    const startTime = startTimeOf(pid);
    if (startTime === null) return false;
    this.watched.set(instanceId, { pid, startTime });
    this.ended.delete(instanceId);
    this.timer ??= setInterval(() => this.tick(), this.intervalMs);
    this.timer.unref();
    return true;
  }

  /** Stops watching (before the instance is destroyed on purpose). */
  unwatch(instanceId: string): void {
    this.watched.delete(instanceId);
    this.ended.delete(instanceId);
    if (this.watched.size === 0 && this.timer) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }

  /** Whether the instance's sandbox is watched (it was running when last looked at, or its end has not been handled yet). */
  watches(instanceId: string): boolean {
    return this.watched.has(instanceId) || this.ended.has(instanceId);
  }

  /**
   * Whether the instance's sandbox has ended, checked now (and reported, if this is the
   * first to notice). False for a running sandbox and for one not watched.
   */
  hasEnded(instanceId: string): boolean {
    if (this.ended.has(instanceId)) return true;
    const w = this.watched.get(instanceId);
    if (!w || startTimeOf(w.pid) === w.startTime) return false;
    this.report(instanceId);
    return true;
  }

  stop(): void {
    this.watched.clear();
    this.ended.clear();
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  private tick(): void {
    for (const [id, w] of this.watched) if (startTimeOf(w.pid) !== w.startTime) this.report(id);
  }

  private report(instanceId: string): void {
    this.watched.delete(instanceId);
    this.ended.add(instanceId);
    this.onExit(instanceId);
  }
}

/** The start time of a live process (not a zombie), or null when there is none with this pid. */
function startTimeOf(pid: number): string | null {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null;
  }
  // The fields after the command name, which is in parentheses and may hold anything.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  if (fields[0] === 'Z' || fields[0] === 'X') return null;
  return fields[19] ?? null;
}
