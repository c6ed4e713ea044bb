// Warm pools: instances a profile keeps booted before any room asks for one, so that a
// create takes one at once instead of starting a machine. A pooled instance is an
// ordinary instance row (it counts against its organization's quotas and the host's
// admission, crash recovery adopts or removes it, a shutdown keeps or stops it) that is
// in no room yet: its `warm_pool_key` says which version of the profile it was made
// from, and only an instance made from the profile as it is now is handed out. A claim
// moves it into the room in one transaction and records when; the pool then refills in
// the background. The pool never refuses anyone: it fills only while the organization's
// quotas and the host admit one more, and when a create needs what pooled instances
// hold, one of them is removed for it (giveWay). figures() says what each pool holds,
// for the operator.
import type { Logger } from 'pino';
import { AppError } from '../errors.ts';
import { nowIso } from '../lib/time.ts';
import type { Runtime } from '../runtimes/types.ts';
import type { Db } from '../store/db.ts';
import { oldestPooled, poolMembers, pooledCount, profilesWithPooled } from './instance-queries.ts';
import type { InstanceRecord } from './stored-json.ts';
import type { Admission } from './admission.ts';
import { type EndReason, InstanceRecords, insertInstanceRow, newInstanceRow, resourcesOf } from './instance-records.ts';
import type { Profile, ProfileSpec } from './profile-schema.ts';
import { type Profiles, specOf, warmPoolKey } from './profiles.ts';
import type { Quotas } from './quotas.ts';

/** Marks a pooled instance that is being removed, so that no claim can take it meanwhile. */
const RETIRED = 'retired';
/** Refills wait this long after a pool gave way to a create, so they do not take the room back at once. */
const GIVE_WAY_HOLD_MS = 30_000;
/** After a pooled instance failed to start, its profile's refills wait this long, doubling up to the most. */
const FAILURE_BACKOFF_MS = 5_000;
const MAX_FAILURE_BACKOFF_MS = 5 * 60_000;
/** A refill after a claim starts this much later, once the claim has been answered. */
const REFILL_DELAY_MS = 25;
/** Errors of a quota or admission check that mean "not now" for a refill. */
const NOT_NOW = new Set(['quota_exceeded', 'capacity_exhausted']);

/** What the pool needs of the instances service: the runtime, provisioning and stopping. */
export interface PoolInstances {
  /** The runtime instances are made with; undefined when there is none or the service is closing. */
  runtime(): Runtime | undefined;
  /** Provisions an inserted row in the background; settles when provisioning has ended. */
  launch(runtime: Runtime, row: InstanceRecord, spec: ProfileSpec): Promise<void>;
  /** Stops an instance and removes what it holds. */
  stop(row: InstanceRecord, why: EndReason): Promise<void>;
}

/** One profile's warm pool on this node, as the operator's capacity answer shows it. */
export interface WarmPoolFigures {
  organization_id: string;
  profile_id: string;
  /** Null once the profile is deleted (its pooled instances are being removed). */
  profile_name: string | null;
  size: number;
  ready: number;
  starting: number;
  leaving: number;
}

/** The room a pooled instance holds while it waits: never a valid room id (no `~`), and unique per instance. */
export function poolRoomOf(instanceId: string): string {
  return `~warm-pool-${instanceId}`;
}

export class WarmPool {
  private readonly db: Db;
  private readonly nodeId: string;
  private readonly profiles: Profiles;
  private readonly quotas: Quotas;
  private readonly admission: Admission;
  private readonly log: Logger;
  private readonly maxInstances: number;
  private readonly instances: PoolInstances;
  /** Per profile: the maintenance run under way, and whether another was asked for meanwhile. */
  private readonly running = new Map<string, { done: Promise<void>; again: { organizationId: string } | undefined }>();
  /** Stops of pooled instances under way. */
  private readonly stopping = new Set<Promise<void>>();
  /** Per profile: failed starts in a row and when refills may try again. */
  private readonly failures = new Map<string, { count: number; retryAt: number }>();
  /** Per organization (or `*` for the whole host): refills wait until then after the pool gave way. */
  private readonly heldUntil = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(deps: {
    db: Db;
    /** The node whose host keeps these pools: each node keeps its own. */
    nodeId: string;
    profiles: Profiles;
    quotas: Quotas;
    admission: Admission;
    log: Logger;
    maxInstances: number;
    instances: PoolInstances;
  }) {
    this.db = deps.db;
    this.nodeId = deps.nodeId;
    this.profiles = deps.profiles;
    this.quotas = deps.quotas;
    this.admission = deps.admission;
    this.log = deps.log.child({ component: 'warm-pool' });
    this.maxInstances = deps.maxInstances;
    this.instances = deps.instances;
    deps.profiles.onChange((organizationId, profileId) => this.refill(organizationId, profileId));
  }

  /**
   * Gives the room a pooled instance of the profile when one is ready: `claimed` true
   * with it, or false with the room's live instance when it already has one; undefined
   * when the pool has nothing to give (the caller makes one). `onClaim` writes what the
   * create asked of the instance (its options) in the claim's transaction, and gives the
   * columns it set.
   */
  async claim(
    organizationId: string,
    profile: Profile,
    roomId: string,
    onClaim?: (trx: Db, instanceId: string) => Promise<Partial<InstanceRecord>>,
  ): Promise<{ row: InstanceRecord; claimed: boolean } | undefined> {
    if (profile.warm_pool === 0 && profile.warm_pool_instances.ready === 0) return undefined;
    const key = warmPoolKey(specOf(profile));
    const profileId = profile.profile_id;
    const outcome = await this.db.transaction().execute(async (trx) => {
      // The same order as a create's: the room's own instance first, under the organization's lock.
      await this.quotas.lock(trx, organizationId);
      const live = await new InstanceRecords(trx).findLive(organizationId, profileId, roomId);
      if (live) return { row: live, claimed: false };
      const current = await trx.selectFrom('profiles').select('id').where('id', '=', profileId).where('deleted_at', 'is', null).executeTakeFirst();
      if (!current) return undefined;
      const pooled = await oldestPooled(trx, this.nodeId, organizationId, profileId, key);
      if (!pooled) return undefined;
      const at = nowIso();
      const why = `claimed from the warm pool of profile ${profileId} by room "${roomId}"`;
      if (!(await new InstanceRecords(trx).claimPooled(pooled.id, key, roomId, at, why))) return undefined;
      const asked = onClaim === undefined ? {} : await onClaim(trx, pooled.id);
      return { row: { ...pooled, room_id: roomId, warm_pool_key: null, claimed_at: at, last_active_at: at, updated_at: at, ...asked }, claimed: true };
    });
    if (outcome?.claimed) {
      this.log.info({ instanceId: outcome.row.id, profileId, roomId }, 'instance claimed from the warm pool');
      // After the claim's answer has gone out: starting a machine right away would take the
      // event loop and the store from the request that is waiting.
      setTimeout(() => this.refill(organizationId, profileId), REFILL_DELAY_MS).unref();
    }
    return outcome;
  }

  /**
   * Runs a create's quota and admission checks (`admit`); while they refuse it for what
   * pooled instances hold, removes one of those and runs them again.
   */
  async givingWay<T>(organizationId: string, admit: () => Promise<T>): Promise<T> {
    for (;;) {
      try {
        return await admit();
      } catch (err) {
        if (!(err instanceof AppError) || !(await this.giveWay(organizationId, err.code))) throw err;
      }
    }
  }

  /**
   * The host's memory is short (memory pressure): removes one pooled instance of any
   * organization, before any instance in a room is paused. Answers whether it did.
   */
  async giveWayForMemory(): Promise<boolean> {
    return this.giveWay('*', 'capacity_exhausted');
  }

  /**
   * A create was refused with `code` (a quota of the organization, or the host's
   * capacity): removes one pooled instance that holds what it needs (of the
   * organization for a quota, of any for the host) and holds refills back for a while.
   * Answers whether it removed one, i.e. whether the create should try again.
   */
  private async giveWay(organizationId: string, code: string): Promise<boolean> {
    if (code !== 'quota_exceeded' && code !== 'capacity_exhausted') return false;
    const scope = code === 'quota_exceeded' ? organizationId : '*';
    this.heldUntil.set(scope, Date.now() + GIVE_WAY_HOLD_MS);
    // Ones still starting first (they cost the least to give up), then the newest.
    const candidates = await poolMembers(this.db, this.nodeId, scope === '*' ? '*' : { organizationId }, RETIRED, true);
    candidates.sort((a, b) => Number(a.state === 'ready') - Number(b.state === 'ready'));
    for (const row of candidates) {
      if (await this.retire(row, { reason: `removed from the warm pool: a create needed what it held (${code})`, code: 'pool_retired' }, true)) {
        return true;
      }
    }
    return false;
  }

  /** Brings the profile's pool to its size, from its current version, in the background. */
  refill(organizationId: string, profileId: string): void {
    if (this.closed) return;
    const run = this.running.get(profileId);
    if (run) {
      run.again = { organizationId };
      return;
    }
    const entry = { done: Promise.resolve(), again: undefined as { organizationId: string } | undefined };
    entry.done = (async () => {
      let next: { organizationId: string } | undefined = { organizationId };
      while (next && !this.closed) {
        entry.again = undefined;
        try {
          await this.maintain(next.organizationId, profileId);
        } catch (err) {
          this.log.error({ err, profileId }, 'could not maintain a warm pool');
        }
        next = entry.again;
      }
    })().finally(() => this.running.delete(profileId));
    this.running.set(profileId, entry);
  }

  /** Maintains every pool now and every `intervalMs` (a pooled instance may end by itself, a hold may pass). */
  start(intervalMs: number): void {
    const tick = () => {
      this.refillAll().catch((err: unknown) => this.log.error({ err }, 'could not maintain the warm pools'));
    };
    tick();
    this.timer = setInterval(tick, intervalMs);
    this.timer.unref();
  }

  /** Stops refilling and waits for maintenance and stops under way. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    await Promise.allSettled([...this.running.values()].map((r) => r.done));
    await Promise.allSettled([...this.stopping]);
  }

  /** Every profile that has a pool or should have one. */
  private async refillAll(): Promise<void> {
    for (const [profileId, organizationId] of await this.pooledProfiles()) this.refill(organizationId, profileId);
  }

  /** The profiles with a pool size above 0, and those whose instances still sit in this node's pools: profile id to organization id. */
  private async pooledProfiles(): Promise<Map<string, string>> {
    const sized = await this.db
      .selectFrom('profiles')
      .select(['id', 'organization_id'])
      .where('deleted_at', 'is', null)
      .where('spec', 'like', '%"warm_pool":%')
      .where('spec', 'not like', '%"warm_pool":0,%')
      .where('spec', 'not like', '%"warm_pool":0}%')
      .execute();
    const holding = await profilesWithPooled(this.db, this.nodeId);
    const profiles = new Map<string, string>();
    for (const p of sized) profiles.set(p.id, p.organization_id);
    for (const i of holding) profiles.set(i.profile_id, i.organization_id);
    return profiles;
  }

  /**
   * What each pool holds on this node now, for the operator: the profile's size (0 for a
   * deleted profile whose instances are still being removed), and its instances made from
   * the profile as it is now, ready or starting (others are on their way out).
   */
  async figures(): Promise<WarmPoolFigures[]> {
    const figures: WarmPoolFigures[] = [];
    const members = await poolMembers(this.db, this.nodeId, '*', RETIRED);
    for (const [profileId, organizationId] of await this.pooledProfiles()) {
      const profile = await this.profiles.find(organizationId, profileId);
      const key = profile ? warmPoolKey(specOf(profile)) : undefined;
      const current = members.filter((m) => m.profile_id === profileId && m.warm_pool_key === key);
      figures.push({
        organization_id: organizationId,
        profile_id: profileId,
        profile_name: profile?.name ?? null,
        size: this.maxInstances === 0 ? 0 : (profile?.warm_pool ?? 0),
        ready: current.filter((m) => m.state === 'ready').length,
        starting: current.filter((m) => m.state !== 'ready').length,
        leaving: members.filter((m) => m.profile_id === profileId && m.warm_pool_key !== key).length,
      });
    }
    return figures.sort((a, b) => a.organization_id.localeCompare(b.organization_id) || (a.profile_name ?? '').localeCompare(b.profile_name ?? ''));
  }

  /**
   * One pass over a profile's pool: instances of an older version of the profile (or
   * all, once it is deleted) and ones past its size are removed; missing ones are
   * started while the quotas and the host admit them.
   */
  private async maintain(organizationId: string, profileId: string): Promise<void> {
    const profile = await this.profiles.find(organizationId, profileId);
    const size = this.maxInstances === 0 ? 0 : (profile?.warm_pool ?? 0);
    const key = profile ? warmPoolKey(specOf(profile)) : undefined;
    const rows = await poolMembers(this.db, this.nodeId, { profileId }, RETIRED);
    const current = rows.filter((r) => r.warm_pool_key === key);
    const out = rows.filter((r) => r.warm_pool_key !== key);
    // Past the size: the newest go first (the oldest are the most likely to be ready).
    out.push(...current.splice(size));
    for (const row of out) {
      const why: EndReason = {
        reason: !profile
          ? 'removed from the warm pool: its profile was deleted'
          : row.warm_pool_key !== key
            ? 'removed from the warm pool: its profile changed since it was made'
            : `removed from the warm pool: the pool's size is ${size}`,
        code: 'pool_retired',
      };
      await this.retire(row, why, false);
    }
    if (!profile) return;
    for (let missing = size - current.length; missing > 0; missing--) {
      if (!(await this.startOne(organizationId, profile, key!))) break;
    }
  }

  /** Starts one pooled instance if everything admits it now; answers whether it did. */
  private async startOne(organizationId: string, profile: Profile, key: string): Promise<boolean> {
    const runtime = this.instances.runtime();
    if (!runtime || this.closed) return false;
    const now = Date.now();
    const failure = this.failures.get(profile.profile_id);
    if (failure && failure.retryAt > now) return false;
    if ((this.heldUntil.get(organizationId) ?? 0) > now || (this.heldUntil.get('*') ?? 0) > now) return false;
    const spec = specOf(profile);
    const row = newInstanceRow({ organizationId, profileId: profile.profile_id, roomId: '', runtime: runtime.name, spec, warmPoolKey: key, nodeId: this.nodeId });
    row.room_id = poolRoomOf(row.id);
    const resources = resourcesOf(spec);
    const admitted = await this.admission.serial(() =>
      this.db.transaction().execute(async (trx) => {
        await this.quotas.lock(trx, organizationId);
        if ((await pooledCount(trx, this.nodeId)) >= this.maxInstances) return false;
        try {
          await this.quotas.assertInstanceFits(trx, organizationId, resources);
          await this.admission.assertFits(trx, runtime, resources);
        } catch (err) {
          if (err instanceof AppError && NOT_NOW.has(err.code)) return false;
          throw err;
        }
        await insertInstanceRow(trx, row);
        return true;
      }),
    );
    if (!admitted) return false;
    this.log.info({ instanceId: row.id, profileId: profile.profile_id }, 'warm pool instance starting');
    void this.instances.launch(runtime, row, spec).then(() => this.started(organizationId, row));
    return true;
  }

  /** A pooled instance's provisioning ended: a failure holds the profile's refills back for a while. */
  private async started(organizationId: string, row: InstanceRecord): Promise<void> {
    const now = { state: await new InstanceRecords(this.db).stateNow(row.id) };
    if (now.state === 'failed') {
      const count = (this.failures.get(row.profile_id)?.count ?? 0) + 1;
      const waitMs = Math.min(MAX_FAILURE_BACKOFF_MS, FAILURE_BACKOFF_MS * 2 ** (count - 1));
      this.failures.set(row.profile_id, { count, retryAt: Date.now() + waitMs });
      this.log.warn({ instanceId: row.id, profileId: row.profile_id, retryInMs: waitMs }, 'warm pool instance failed to start');
      return;
    }
    if (now.state === 'ready') {
      this.failures.delete(row.profile_id);
      // A refill that was skipped while this one was starting may be due now.
      this.refill(organizationId, row.profile_id);
    }
  }

  /**
   * Takes a pooled instance out of its pool (no claim can take it from here on) and
   * stops it, waited for when `wait`; answers false when a claim took it first.
   */
  private async retire(row: InstanceRecord, why: EndReason, wait: boolean): Promise<boolean> {
    if (!(await new InstanceRecords(this.db).retirePooled(row.id, row.warm_pool_key, RETIRED))) return false;
    this.log.info({ instanceId: row.id, profileId: row.profile_id, reason: why.reason }, 'warm pool instance removed');
    const stopped = this.instances
      .stop({ ...row, warm_pool_key: RETIRED }, why)
      .catch((err: unknown) => this.log.error({ err, instanceId: row.id }, 'could not stop a warm pool instance'));
    this.stopping.add(stopped);
    void stopped.finally(() => {
      this.stopping.delete(stopped);
      // What it held is free now: a pool that was short for it can fill again.
      if (!wait) this.refill(row.organization_id, row.profile_id);
    });
    if (wait) await stopped;
    return true;
  }
}
