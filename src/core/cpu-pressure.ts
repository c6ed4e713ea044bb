// CPU pressure: an idle instance's machine still costs the host CPU (gVisor's systrap
// platform in the runsc release we pin wakes every 400 µs, 2-4% of a core per idle
// sandbox: runtimes/gvisor/freezer.ts), so a few dozen idle instances keep a small
// host's cores busy and slow everything else down. On each expiry check, when the
// host's CPUs were busier than ROOMKIT_FREEZE_CPU_PERCENT since the last one, every
// instance that is idle and quiet is frozen: its processes stop where they are, holding
// their memory, and the runtime thaws it before its next request reaches it (well under
// a millisecond), so callers see no difference but the time its clocks jumped.
// Idle: `ready`, no command running and no terminal or port connection open (the busy
// checks), no request for ROOMKIT_PRESSURE_IDLE_S. Quiet: its machine used less than
// QUIET_PERCENT of a core since the last check, so a process working in the background
// (a build, a server under load) is never frozen; one that wakes now and then (a poller)
// is, and waits for the next request. A host that is not busy freezes nothing.
import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import { CpuSampler } from '../host/cpu-stat.ts';
import type { Metrics } from '../metrics.ts';
import type { Runtime } from '../runtimes/types.ts';
import type { Db } from '../store/db.ts';

/** An instance whose machine used less than this share of one core between two checks is quiet. */
export const QUIET_PERCENT = 10;

export interface CpuPressureDeps {
  db: Db;
  /** The node whose host this relieves: only its instances are frozen. */
  nodeId: string;
  config: Pick<Config, 'freezeCpuPercent' | 'pressureIdleS'>;
  log: Logger;
  metrics?: Metrics;
  /** The runtime, when it runs instances now; undefined otherwise. */
  runtime(): Runtime | undefined;
  /** Whether a command runs or a terminal or port connection is open in the instance. */
  busy(instanceId: string): boolean;
  /** The host's CPU, sampled (a stand-in in unit tests). */
  sampler?: Pick<CpuSampler, 'busyPercent'>;
}

/** What the last check saw. */
export interface CpuFigures {
  /** Percent of the host's CPU time that was busy between the last two checks; null before the second. */
  busyPercent: number | null;
  /** Instances frozen now. */
  frozen: number;
}

export class CpuPressure {
  private readonly deps: CpuPressureDeps;
  private readonly sampler: Pick<CpuSampler, 'busyPercent'>;
  /** Each ready instance's CPU time at the last check, to tell quiet ones. */
  private readonly lastCpu = new Map<string, { ms: number; at: number }>();
  private figures: CpuFigures = { busyPercent: null, frozen: 0 };
  /** Instances frozen for CPU pressure since the service started. */
  frozenCount = 0;

  constructor(deps: CpuPressureDeps) {
    this.deps = deps;
    this.sampler = deps.sampler ?? new CpuSampler();
  }

  /** What the last check saw (for /operator/capacity). */
  get last(): CpuFigures {
    return this.figures;
  }

  /** The periodic check: freezes idle, quiet instances when the host's CPUs are busy. Returns the ids it froze. */
  async relieve(now = Date.now()): Promise<string[]> {
    const busyPercent = this.sampler.busyPercent() ?? null;
    const runtime = this.deps.runtime();
    if (!runtime?.capabilities.freeze || !runtime.freeze || !runtime.cpuUsedMs) {
      this.figures = { busyPercent, frozen: 0 };
      return [];
    }
    const rows = await this.deps.db
      .selectFrom('instances')
      .select(['id', 'last_active_at', 'created_at'])
      .where('node_id', '=', this.deps.nodeId)
      .where('state', '=', 'ready')
      .execute();
    const idleBefore = now - this.deps.config.pressureIdleS * 1000;
    const quiet = new Set<string>();
    const seen = new Set<string>();
    for (const row of rows) {
      seen.add(row.id);
      const ms = runtime.cpuUsedMs(row.id);
      if (ms === undefined) continue;
      const before = this.lastCpu.get(row.id);
      // A frozen instance's CPU time stands still: it stays quiet without being sampled anew.
      if (before && now > before.at && ((ms - before.ms) * 100) / (now - before.at) < QUIET_PERCENT) quiet.add(row.id);
      this.lastCpu.set(row.id, { ms, at: now });
    }
    for (const id of this.lastCpu.keys()) if (!seen.has(id)) this.lastCpu.delete(id);

    const threshold = this.deps.config.freezeCpuPercent;
    const frozen: string[] = [];
    if (threshold > 0 && busyPercent !== null && busyPercent >= threshold) {
      for (const row of rows) {
        if (runtime.isFrozen?.(row.id) || !quiet.has(row.id) || this.deps.busy(row.id)) continue;
        if (Date.parse(row.last_active_at ?? row.created_at) > idleBefore) continue;
        if (runtime.freeze(row.id)) frozen.push(row.id);
      }
      if (frozen.length > 0) {
        this.frozenCount += frozen.length;
        this.deps.metrics?.cpuFrozen(frozen.length);
        this.deps.log.info({ busyPercent: Math.round(busyPercent), frozen: frozen.length, instanceIds: frozen.slice(0, 20) }, 'froze idle instances: the host\'s CPUs are busy');
      }
    }
    this.figures = { busyPercent, frozen: rows.filter((row) => runtime.isFrozen?.(row.id)).length };
    return frozen;
  }
}
