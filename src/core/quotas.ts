// Quotas per organization: what its live instances may hold together (count, memory,
// CPUs, disk) and how many commands it may run at once and start per minute. Defaults
// come from the configuration; the operator may set others per organization (the
// org_quotas table). A check and the write it allows happen in one store transaction
// that first writes the organization's row: that takes the row's lock on PostgreSQL and
// the write lock on SQLite, so two requests of one organization are checked one after
// the other and cannot both take the last unit of a quota.
import type { Config } from '../config.ts';
import { AppError } from '../errors.ts';
import type { Db } from '../store/db.ts';
import type { OrgQuotasTable } from '../store/schema.ts';
import { nowIso } from '../lib/time.ts';
import type { InstanceResources } from './instance-schema.ts';
import { liveResources } from './instance-queries.ts';
import { HELD_ON_DISK_STATES } from './lifecycle.ts';
import { QUOTA_NAMES, type QuotaLimits, type QuotaName, type QuotaOverrides, type Usage } from './quota-schema.ts';

export type { InstanceResources };

/** What an organization's live instances hold together. */
export interface InstanceUse extends InstanceResources {
  instances: number;
}

/** A quota a request would go over, with what the Error body's details show. */
export interface QuotaBreach {
  quota: QuotaName;
  limit: number;
  used: number;
  requested: number;
}

/** The window of the commands-per-minute quota. */
export const RATE_WINDOW_MS = 60_000;

/**
 * The first instance quota that `count` more instances (one unless said) with `request`
 * each would go over, or undefined when they fit. A quota is reached when use plus the
 * request passes the limit: with a limit of 4096 MB, 3072 MB in use and 1024 asked
 * for, it fits.
 */
export function instanceBreach(limits: QuotaLimits, use: InstanceUse, request: InstanceResources, count = 1): QuotaBreach | undefined {
  const asks: [QuotaName, number, number][] = [
    ['instances', use.instances, count],
    ['memory_mb', use.memory_mb, request.memory_mb * count],
    ['vcpus', use.vcpus, request.vcpus * count],
    ['disk_mb', use.disk_mb, request.disk_mb * count],
  ];
  for (const [quota, used, requested] of asks) {
    if (used + requested > limits[quota]) return { quota, limit: limits[quota], used, requested };
  }
  return undefined;
}

/**
 * Seconds until the commands-per-minute window has room again: when the oldest command
 * in it leaves the window (at least 1).
 */
export function rateRetryAfterS(oldestStartedMs: number, nowMs: number): number {
  return Math.max(1, Math.ceil((oldestStartedMs + RATE_WINDOW_MS - nowMs) / 1000));
}

/**
 * Adds up what live instances were granted. A paused instance holds its disk alone: no
 * machine, so neither an instance, memory nor CPUs; when its pause kept its memory, that
 * is on disk too (at most its memory_mb).
 */
export function sumResources(rows: readonly { resources: InstanceResources; state?: string; memoryKept?: boolean }[]): InstanceUse {
  const use: InstanceUse = { instances: 0, memory_mb: 0, vcpus: 0, disk_mb: 0 };
  for (const { resources: r, state, memoryKept } of rows) {
    // Snapshots, once they exist, hold disk too and are to be added here.
    use.disk_mb += r.disk_mb;
    if (state !== undefined && (HELD_ON_DISK_STATES as string[]).includes(state)) {
      if (memoryKept) use.disk_mb += r.memory_mb;
      continue;
    }
    use.instances += 1;
    use.memory_mb += r.memory_mb;
    use.vcpus += r.vcpus;
  }
  return use;
}

const HOW_TO_FIX: Record<QuotaName, string> = {
  instances: 'delete an instance you no longer need',
  memory_mb: 'delete an instance, or use a profile with less memory_mb',
  vcpus: 'delete an instance, or use a profile with fewer vcpus',
  disk_mb: 'delete an instance, or use a profile with a smaller disk_mb',
  concurrent_commands: 'wait for a command to end, or kill one',
  commands_per_minute: 'wait and retry',
  snapshots: 'delete a snapshot you no longer need',
};

export function quotaExceeded(breach: QuotaBreach): AppError {
  const { quota, limit, used, requested } = breach;
  return new AppError(
    'quota_exceeded',
    `this would go over the organization's ${quota} quota: ${used} in use, ${requested} more asked for, limit ${limit}; ` +
      `${HOW_TO_FIX[quota]}, or ask the operator to raise the quota`,
    { quota, limit, used, requested },
    { code: 'quota_fix', quota },
  );
}

export class Quotas {
  private readonly db: Db;
  private readonly config: Config;

  constructor(deps: { db: Db; config: Config }) {
    this.db = deps.db;
    this.config = deps.config;
  }

  /** The configured defaults. */
  defaults(): QuotaLimits {
    const c = this.config;
    return {
      instances: c.quotaInstances,
      memory_mb: c.quotaMemoryMb,
      vcpus: c.quotaVcpus,
      disk_mb: c.quotaDiskMb,
      concurrent_commands: c.quotaConcurrentCommands,
      commands_per_minute: c.quotaCommandsPerMinute,
      snapshots: c.quotaSnapshots,
    };
  }

  /** The organization's quotas, and which of them the operator set. */
  async limits(organizationId: string, db: Db = this.db): Promise<{ limits: QuotaLimits; set: Set<QuotaName> }> {
    const row = await db.selectFrom('org_quotas').selectAll().where('organization_id', '=', organizationId).executeTakeFirst();
    const limits = this.defaults();
    const set = new Set<QuotaName>();
    for (const name of QUOTA_NAMES) {
      const value = row?.[name];
      if (value !== undefined && value !== null) {
        limits[name] = Number(value);
        set.add(name);
      }
    }
    return { limits, set };
  }

  /** Sets (a number) or clears (null) the organization's own quotas; absent ones stay as they are. */
  async setOverrides(organizationId: string, changes: QuotaOverrides): Promise<void> {
    const values: Partial<OrgQuotasTable> = {};
    for (const name of QUOTA_NAMES) if (changes[name] !== undefined) values[name] = changes[name];
    const updatedAt = nowIso();
    await this.db
      .insertInto('org_quotas')
      .values({ organization_id: organizationId, ...values, updated_at: updatedAt })
      .onConflict((oc) => oc.column('organization_id').doUpdateSet({ ...values, updated_at: updatedAt }))
      .execute();
  }

  /** The organization's use of every quota. */
  async usage(organizationId: string): Promise<Usage> {
    const { limits, set } = await this.limits(organizationId);
    const instances = await this.instanceUse(this.db, organizationId);
    const commands = await this.commandUse(this.db, organizationId, Date.now());
    const used: Record<QuotaName, number> = {
      ...instances,
      concurrent_commands: commands.running,
      commands_per_minute: commands.lastMinute,
      snapshots: await this.snapshotUse(this.db, organizationId),
    };
    const quotas = Object.fromEntries(
      QUOTA_NAMES.map((name) => [name, { limit: limits[name], used: used[name], source: set.has(name) ? 'organization' : 'default' }]),
    ) as Usage['quotas'];
    return { organization_id: organizationId, quotas };
  }

  /**
   * Serializes the organization's quota checks for the rest of the transaction (see the
   * top of this file); an UPDATE that changes nothing, so that both stores take the lock.
   */
  async lock(trx: Db, organizationId: string): Promise<void> {
    await trx
      .updateTable('organizations')
      .set((eb) => ({ name: eb.ref('name') }))
      .where('id', '=', organizationId)
      .execute();
  }

  /**
   * Throws quota_exceeded when `count` more instances (one unless said) with `request`
   * each go over a quota: a fork's copies are weighed together. Call within lock().
   */
  async assertInstanceFits(trx: Db, organizationId: string, request: InstanceResources, count = 1): Promise<void> {
    const { limits } = await this.limits(organizationId, trx);
    const breach = instanceBreach(limits, await this.instanceUse(trx, organizationId), request, count);
    if (breach) throw quotaExceeded(breach);
  }

  /**
   * Checks the command quotas and, if one more command fits, records it with `insert`
   * in the same transaction, so racing commands are counted. Over the concurrent
   * quota: 403 quota_exceeded; over the per-minute quota: 429 commands_rate_exceeded
   * with the seconds until one fits.
   */
  async reserveCommand(organizationId: string, insert: (trx: Db) => Promise<void>): Promise<void> {
    await this.db.transaction().execute(async (trx) => {
      await this.lock(trx, organizationId);
      const { limits } = await this.limits(organizationId, trx);
      const now = Date.now();
      const use = await this.commandUse(trx, organizationId, now);
      if (use.running + 1 > limits.concurrent_commands) {
        throw quotaExceeded({ quota: 'concurrent_commands', limit: limits.concurrent_commands, used: use.running, requested: 1 });
      }
      if (use.lastMinute + 1 > limits.commands_per_minute) {
        const limit = limits.commands_per_minute;
        const retryAfterS = use.oldestMs === undefined ? 60 : rateRetryAfterS(use.oldestMs, now);
        throw new AppError(
          'commands_rate_exceeded',
          `the organization started ${use.lastMinute} commands in the last minute, its commands_per_minute quota is ${limit}; ` +
            `retry in ${retryAfterS} s, or ask the operator to raise the quota`,
          { quota: 'commands_per_minute', limit, used: use.lastMinute, requested: 1, retry_after_s: retryAfterS },
          { code: 'show_quotas' },
        );
      }
      await insert(trx);
    });
  }

  /** Throws quota_exceeded when one more snapshot goes over the organization's quota. Call within lock(). */
  async assertSnapshotFits(trx: Db, organizationId: string): Promise<void> {
    const { limits } = await this.limits(organizationId, trx);
    const used = await this.snapshotUse(trx, organizationId);
    if (used + 1 > limits.snapshots) throw quotaExceeded({ quota: 'snapshots', limit: limits.snapshots, used, requested: 1 });
  }

  private async snapshotUse(db: Db, organizationId: string): Promise<number> {
    const row = await db
      .selectFrom('snapshots')
      .select(({ fn }) => fn.countAll<number>().as('n'))
      .where('organization_id', '=', organizationId)
      .where('deleted_at', 'is', null)
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  private async instanceUse(db: Db, organizationId: string): Promise<InstanceUse> {
    return sumResources(await liveResources(db, { organizationId }));
  }

  private async commandUse(db: Db, organizationId: string, nowMs: number): Promise<{ running: number; lastMinute: number; oldestMs?: number }> {
    const running = await db
      .selectFrom('commands')
      .select(({ fn }) => fn.countAll<number>().as('n'))
      .where('organization_id', '=', organizationId)
      .where('state', '=', 'running')
      .executeTakeFirstOrThrow();
    const recent = await db
      .selectFrom('commands')
      .select(({ fn }) => [fn.countAll<number>().as('n'), fn.min('started_at').as('oldest')])
      .where('organization_id', '=', organizationId)
      .where('started_at', '>', new Date(nowMs - RATE_WINDOW_MS).toISOString())
      .executeTakeFirstOrThrow();
    const oldest = recent.oldest === null ? undefined : Date.parse(String(recent.oldest));
    return { running: Number(running.n), lastMinute: Number(recent.n), ...(oldest === undefined ? {} : { oldestMs: oldest }) };
  }
}
