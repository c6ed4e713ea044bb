// The instance's OOM killer. gVisor's kernel (in this release) does not enforce a
// memory size itself: when a sandbox reaches its host cgroup limit, the host kernel
// kills the whole sandbox. So the host cgroup gets headroom above memory_mb and no
// kernel OOM kill, and this guard watches each instance's memory (its cgroup's usage
// without host file cache): when it passes memory_mb, the largest process inside is
// killed with SIGKILL, as Linux's OOM killer would, and the instance lives on. If usage
// races to the hard limit first, the sandbox's allocations wait there (instead of it
// being killed) until the guard has made room. Each kill is reported with the
// commands whose processes it ended (read from their marker before the kill), so that
// their results can say they ran out of memory.
import type { Logger } from 'pino';
import type { MemoryGuardKill } from '../../metrics.ts';
import { VM_UID } from '../../images/builder.ts';
import { hasMemoryCgroup, isUnderOom, memoryCgroupDir, readMemoryLimit, setOomKill, workingSet, writeMemoryLimit } from './cgroups.ts';
import { COMMAND_MARKER } from '../agent/commands.ts';

export interface Victim {
  pid: number;
  rssKb: number;
  command: string;
  /** The command the process belonged to (its marker), if any. */
  commandId: string | null;
}

/** What one kill ended: the commands whose processes died, and a line for the log and the record. */
export interface MemoryKill {
  commandIds: string[];
  detail: string;
}

/** Prints the command marker of process $1 (nothing when it has none or is gone). */
const MARKER_OF = `marker_of() { tr '\\0' '\\n' < /proc/$1/environ 2>/dev/null | sed -n 's/^${COMMAND_MARKER}=//p' | head -n 1; }`;
/** A command id as roomkit makes them; anything else in a marker is the guest's own doing. */
const COMMAND_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export interface MemoryGuardOptions {
  log: Logger;
  /** Runs a shell script as root inside the instance, within the time given; resolves with what it printed. */
  runAsRoot(instanceId: string, script: string, timeoutMs: number): Promise<string>;
  intervalMs?: number;
  /** Called after each kill: the largest process, or all of the VM user's. */
  onKill?(instanceId: string, kind: MemoryGuardKill, kill: MemoryKill): void;
}

interface Watched {
  thresholdBytes: number;
  cgroupDir: string;
  busy: boolean;
  /** Settles when the kill under way (if any) has been made and reported. */
  killing: Promise<void>;
}

/** How long freed memory may take to show in the cgroup after a kill. */
const RELEASE_WAIT_MS = 10_000;

/** Room made above the hard limit while the guard works inside a frozen sandbox. */
const RESCUE_BYTES = 256 * 1024 * 1024;

/** Time limit of one kill inside the instance. */
const KILL_TIMEOUT_MS = 10_000;

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
    const cgroupDir = memoryCgroupDir(instanceId);
    if (!hasMemoryCgroup(cgroupDir)) return false;
    // Allocations wait at the hard limit instead of the kernel killing the sandbox.
    setOomKill(cgroupDir, false);
    this.watched.set(instanceId, { thresholdBytes: memoryMb * 1024 * 1024, cgroupDir, busy: false, killing: Promise.resolve() });
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

  /**
   * Settles once no kill is under way in the instance. A process the guard kills ends
   * before the guard hears back from the kill; a caller that saw it end waits here to
   * learn whether the guard was the cause.
   */
  async settled(instanceId: string): Promise<void> {
    await this.watched.get(instanceId)?.killing;
  }

  stop(): void {
    this.watched.clear();
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  private tick(): void {
    for (const [id, w] of this.watched) {
      if (w.busy) continue;
      const usage = workingSet(w.cgroupDir);
      if (usage === null) {
        this.unwatch(id);
        continue;
      }
      const frozen = isUnderOom(w.cgroupDir);
      if (usage < w.thresholdBytes && !frozen) continue;
      w.busy = true;
      this.relieve(id, w, frozen)
        .catch((err: unknown) => this.options.log.error({ instanceId: id, err }, 'memory guard failed'))
        .finally(() => (w.busy = false));
    }
  }

  private async relieve(id: string, w: Watched, frozen: boolean): Promise<void> {
    const limit = readMemoryLimit(w.cgroupDir);
    try {
      // A frozen sandbox cannot even run the kill: give it a little room first.
      if (frozen && limit !== null) writeMemoryLimit(w.cgroupDir, limit + RESCUE_BYTES);
      const victim = await this.reporting(w, async () => {
        const v = await this.killLargest(id);
        if (v) {
          const detail = `killed process ${v.pid} (${v.command.slice(0, 200)}, ${Math.round(v.rssKb / 1024)} MB resident) to keep the instance within its memory size`;
          this.options.onKill?.(id, 'largest_process', { commandIds: v.commandId ? [v.commandId] : [], detail });
        }
        return v;
      });
      this.options.log.warn(
        { instanceId: id, victim, usageMb: Math.round((workingSet(w.cgroupDir) ?? 0) / 1048576) },
        victim ? 'instance out of memory: killed its largest process' : 'instance out of memory: no process to kill',
      );
      // Memory comes back once the victim is gone (gVisor returns it within seconds);
      // wait for that before looking again, so that one excess costs one process.
      const deadline = Date.now() + RELEASE_WAIT_MS;
      while (Date.now() < deadline && (workingSet(w.cgroupDir) ?? 0) >= w.thresholdBytes) {
        await new Promise((r) => setTimeout(r, 20));
      }
      // Still at the hard limit: one process was not the problem (a fork bomb's host
      // tasks, say). The VM user's processes all go, so the instance itself lives.
      if (frozen && isUnderOom(w.cgroupDir)) {
        const killed = await this.reporting(w, async () => {
          const k = await this.killUser(id);
          const detail = `killed all ${k.count} processes of the VM user: the instance was stuck at its memory ceiling`;
          this.options.onKill?.(id, 'all_user_processes', { commandIds: k.commandIds, detail });
          return k.count;
        });
        this.options.log.warn({ instanceId: id, killed }, 'instance stuck at its memory ceiling: killed all of the VM user\'s processes');
      }
    } catch (err) {
      this.options.log.error({ instanceId: id, err }, 'memory guard could not relieve the instance');
    } finally {
      if (frozen && limit !== null) await restoreLimit(w.cgroupDir, limit, this.options.log, id);
    }
  }

  /**
   * Kills the process with the largest resident memory in the instance, whoever owns
   * it: guest root's processes (anything run through sudo) count like the VM user's,
   * so that a root balloon cannot hide behind them. Never the init (pid 1), its `sleep
   * infinity` (whose end would end the sandbox), nor this script. Null when none
   * was found.
   */
  private async killLargest(instanceId: string): Promise<Victim | null> {
    const script = [
      MARKER_OF,
      'ps -eo pid=,ppid=,uid=,rss=,args= --sort=-rss > /tmp/.roomkit-oom',
      'v=$(awk -v self=$$ \'$1 != 1 && $1 != self && $2 != self && !($2 == 1 && $5 == "sleep" && $6 == "infinity") { print $1, $4, $5; exit }\' /tmp/.roomkit-oom)',
      'rm -f /tmp/.roomkit-oom',
      '[ -n "$v" ] || exit 0',
      'set -- $v',
      'm=$(marker_of "$1")',
      'kill -9 "$1" && echo "$1 $2 ${m:--} $3"',
    ].join('\n');
    const stdout = await this.options.runAsRoot(instanceId, script, KILL_TIMEOUT_MS);
    const match = /^(\d+) (\d+) (\S+) (.*)$/m.exec(stdout);
    if (!match) return null;
    const marker = match[3] ?? '';
    return { pid: Number(match[1]), rssKb: Number(match[2]), command: match[4] ?? '', commandId: COMMAND_ID.test(marker) ? marker : null };
  }

  /** Runs a kill, known to callers of settled() until it has been made and reported. */
  private reporting<T>(w: Watched, kill: () => Promise<T>): Promise<T> {
    const result = kill();
    w.killing = result.then(
      () => undefined,
      () => undefined,
    );
    return result;
  }

  /** Kills every process of the VM user; returns how many, and the commands they belonged to. */
  private async killUser(instanceId: string): Promise<{ count: number; commandIds: string[] }> {
    // The markers first (a dead process has none to read), then again until none is
    // left: a process may fork between the listing and the kill.
    const script = [
      // One grep over all of their environments: a process per process is too slow in a sandbox at its ceiling.
      `grep -azh '^${COMMAND_MARKER}=' $(ps -u ${VM_UID} -o pid= | sed 's|^ *\\([0-9]*\\).*|/proc/\\1/environ|') </dev/null 2>/dev/null | tr '\\0' '\\n' | sort -u | sed 's/^${COMMAND_MARKER}=/marker /'`,
      `n=$(ps -u ${VM_UID} --no-headers | wc -l); i=0; while pkill -KILL -u ${VM_UID} && [ $i -lt 50 ]; do i=$((i+1)); sleep 0.1; done; echo "count $n"`,
    ].join('\n');
    const stdout = await this.options.runAsRoot(instanceId, script, KILL_TIMEOUT_MS);
    const commandIds = [...stdout.matchAll(/^marker (\S+)$/gm)].map((m) => m[1] ?? '').filter((id) => COMMAND_ID.test(id));
    return { count: Number(/^count (\d+)$/m.exec(stdout)?.[1] ?? 0), commandIds };
  }
}

/**
 * Puts the hard limit back after a rescue. The kernel refuses a limit below the current
 * usage, so this retries for a while as memory is freed, and logs if it cannot.
 */
async function restoreLimit(cgroupDir: string, limit: number, log: Logger, instanceId: string): Promise<void> {
  for (const deadline = Date.now() + RELEASE_WAIT_MS; Date.now() < deadline; ) {
    if (!hasMemoryCgroup(cgroupDir)) return;
    try {
      writeMemoryLimit(cgroupDir, limit);
      return;
    } catch {
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  log.warn({ instanceId }, 'memory guard could not restore the hard memory limit; it stays raised by the rescue margin');
}
