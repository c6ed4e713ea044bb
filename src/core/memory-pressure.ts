// Memory pressure: when running instances leave too little of the host's memory for a
// create or a resume (admission refuses it for memory), or eat into the reserve kept for
// their growth (the periodic check), the least recently used idle instances are paused,
// one at a time, until there is room; only when none is left to pause is a create
// refused. Idle: ready, in a room (a warm pool's instances give way first, retired by
// the pool, since they are cheap to make again), no command running and no terminal or
// port connection open (the busy checks), and no request for ROOMKIT_PRESSURE_IDLE_S. A paused instance resumes on its
// next request, as any paused one does; what its pause keeps is the runtime's pause's.
import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import type { Metrics } from '../metrics.ts';
import { Serial } from '../lib/keyed-serial.ts';
import type { Runtime } from '../runtimes/types.ts';
import type { Db } from '../store/db.ts';
import { type Admission, CapacityRefusal, underPressure } from './admission.ts';
import type { EndReason } from './instance-records.ts';
import { decodeInstance, type InstanceRecord } from './stored-json.ts';

/** Idle instances looked at per pause: the least recently used first. */
const CANDIDATES = 32;

export interface MemoryPressureDeps {
  db: Db;
  /** The node whose host this relieves: only its instances are paused. */
  nodeId: string;
  config: Config;
  admission: Admission;
  log: Logger;
  metrics?: Metrics;
  /** Whether a command runs or a terminal is open in the instance. */
  busy(instanceId: string): boolean;
  /** The runtime, when it can pause its instances; undefined otherwise. */
  pausable(): Runtime | undefined;
  /** Pauses a ready instance (core's pause); rejects when its state changed meanwhile. */
  pause(row: InstanceRecord, why: EndReason): Promise<void>;
  /** Removes one warm pool instance for the host's memory; answers whether there was one. */
  retirePooled(): Promise<boolean>;
}

export class MemoryPressure {
  private readonly deps: MemoryPressureDeps;
  /** One pause for memory at a time: two refused creates must not both pause for the same room. */
  private readonly pausing = new Serial();
  /** Instances paused for memory since the service started. */
  pausedCount = 0;

  constructor(deps: MemoryPressureDeps) {
    this.deps = deps;
  }

  /**
   * Runs `admit` (a create's or a resume's admission); while it is refused for memory,
   * pauses the least recently used idle instance (never `exclude`) and runs it again.
   * When nothing is left to pause, the refusal says how many were paused for it.
   */
  async makingRoom<T>(admit: () => Promise<T>, exclude?: string): Promise<T> {
    let paused = 0;
    for (;;) {
      try {
        return await admit();
      } catch (err) {
        if (!(err instanceof CapacityRefusal) || err.breach.resource !== 'memory') throw err;
        const why: EndReason = { reason: `paused to make room in the host's memory for another instance (${err.breach.inUseMb} MB in use)`, code: 'memory_pressure' };
        if (!(await this.pauseOne(why, exclude))) throw paused === 0 ? err : new CapacityRefusal(err.breach, paused);
        paused++;
      }
    }
  }

  /**
   * The periodic check: while running instances eat into the reserve, removes warm pool
   * instances, then pauses idle ones (least recently used first). Returns the ids it
   * paused.
   */
  async relieve(): Promise<string[]> {
    const runtime = this.deps.pausable();
    if (!runtime) return [];
    const paused: string[] = [];
    for (;;) {
      const memory = await this.deps.admission.memory(this.deps.db, runtime);
      if (!underPressure(memory)) return paused;
      const why: EndReason = {
        reason: `paused to keep ${memory.reserveMb} MB of the host's memory free for running instances (${memory.inUseMb} MB in use)`,
        code: 'memory_pressure',
      };
      if (await this.deps.retirePooled()) continue;
      const id = await this.pauseOne(why);
      if (id === undefined) {
        this.deps.log.warn({ inUseMb: memory.inUseMb, reserveMb: memory.reserveMb, limitMb: memory.limitMb }, 'memory pressure: no idle instance left to pause');
        return paused;
      }
      paused.push(id);
    }
  }

  /** Pauses the least recently used idle instance; its id, or undefined when none could be. */
  private pauseOne(why: EndReason, exclude?: string): Promise<string | undefined> {
    return this.pausing.run(async () => {
      if (!this.deps.pausable()) return undefined;
      for (const row of await this.idleCandidates()) {
        if (row.id === exclude || this.deps.busy(row.id)) continue;
        try {
          await this.deps.pause(row, why);
        } catch (err) {
          // Its state changed meanwhile (a request woke it, a delete): the next one.
          this.deps.log.debug({ instanceId: row.id, err }, 'memory pressure could not pause an instance');
          continue;
        }
        this.pausedCount++;
        this.deps.metrics?.pressurePaused();
        this.deps.log.info({ instanceId: row.id, reason: why.reason, reasonCode: why.code }, 'instance paused for memory pressure');
        return row.id;
      }
      return undefined;
    });
  }

  /** Ready instances in rooms with no request for the idle time, least recently used first. */
  private async idleCandidates(): Promise<InstanceRecord[]> {
    const before = new Date(Date.now() - this.deps.config.pressureIdleS * 1000).toISOString();
    const rows = await this.deps.db
      .selectFrom('instances')
      .selectAll()
      .where('node_id', '=', this.deps.nodeId)
      .where('state', '=', 'ready')
      .where('warm_pool_key', 'is', null)
      .where('last_active_at', '<=', before)
      .orderBy('last_active_at')
      .limit(CANDIDATES)
      .execute();
    return rows.map(decodeInstance);
  }
}
