// The store's record of instances: each instance's row and the history of its states,
// the only place that changes an instance's row (a state: one transaction per move,
// checked against the state machine; the columns a pause, a claim or a request set), and
// the queries that find a room's instance or page through an organization's. Rows come
// out decoded (stored-json.ts); the reads other services make over many instances are
// in instance-queries.ts. Instances drives the lifecycle over it.
import { randomUUID } from 'node:crypto';
import type { Db } from '../store/db.ts';
import type { InstanceRow } from '../store/schema.ts';
import { decodeInstance, encodeInstance, type InstanceRecord } from './stored-json.ts';
import { nowIso } from '../lib/time.ts';
import type { Instance, InstancePage, InstancePause, InstanceReasonCode, InstanceResources } from './instance-schema.ts';
import { assertTransition, type InstanceState, isState, LIVE_STATES } from './lifecycle.ts';
import { afterCursor, pageOf } from './page-cursor.ts';
import type { ProfileSpec } from './profile-schema.ts';
import { envOf, metadataOf, NO_OPTIONS, type OptionColumns } from './instance-options.ts';

/** Why an instance is stopping, stopped or failed: in words, as a code, and whose request it was. */
export interface EndReason {
  reason: string;
  code: InstanceReasonCode;
  keyId?: string;
}

export interface ListOptions {
  profileId?: string;
  state?: InstanceState;
  /** Only instances carrying every one of these labels. */
  metadata?: [string, string][];
  limit: number;
  cursor?: string;
  /** Oldest first; newest first without it. */
  oldestFirst?: boolean;
}

export class InstanceRecords {
  private readonly db: Db;

  constructor(db: Db) {
    this.db = db;
  }

  async list(organizationId: string, options: ListOptions): Promise<InstancePage> {
    let query = this.db
      .selectFrom('instances')
      .selectAll()
      .where('organization_id', '=', organizationId)
      // Instances waiting in a warm pool belong to no room yet (their profile counts them).
      .where('warm_pool_key', 'is', null)
      .orderBy('created_at', options.oldestFirst === true ? 'asc' : 'desc')
      .orderBy('id', options.oldestFirst === true ? 'asc' : 'desc')
      .limit(options.limit + 1);
    if (options.profileId !== undefined) query = query.where('profile_id', '=', options.profileId);
    if (options.state !== undefined) query = query.where('state', '=', options.state);
    for (const [key, value] of options.metadata ?? []) {
      query = query.where(({ exists, selectFrom }) =>
        exists(
          selectFrom('instance_metadata')
            .select('instance_metadata.key')
            .whereRef('instance_metadata.instance_id', '=', 'instances.id')
            .where('instance_metadata.key', '=', key)
            .where('instance_metadata.value', '=', value),
        ),
      );
    }
    if (options.cursor !== undefined) query = query.where(afterCursor(options.cursor, 'created_at', options.oldestFirst === true ? 'asc' : 'desc'));
    const { page, nextCursor } = pageOf(await query.execute(), options.limit, (r) => r.created_at);
    return { instances: await Promise.all(page.map((r) => this.view(decodeInstance(r)))), next_cursor: nextCursor };
  }

  /** Moves an instance to `to`, enforcing the state machine, and records the move (with why, for an end). */
  async transition(instanceId: string, to: InstanceState, why?: EndReason): Promise<void> {
    await this.move(instanceId, to, why);
  }

  /**
   * Moves an instance to `to` only if it is in state `from` now (in the same
   * transaction); returns whether it did. For moves that another one may have
   * overtaken, such as failing an instance that a delete is stopping.
   */
  async transitionFrom(instanceId: string, from: InstanceState, to: InstanceState, why?: EndReason): Promise<boolean> {
    return this.move(instanceId, to, why, from);
  }

  private async move(instanceId: string, to: InstanceState, why: EndReason | undefined, onlyFrom?: InstanceState): Promise<boolean> {
    const reason = why?.reason;
    return this.db.transaction().execute(async (trx) => {
      // The row is locked first (an UPDATE that changes nothing, which both stores lock
      // for), so that a move racing this one (a delete while provisioning records its
      // next step) waits for it and then reads the state it left, rather than both
      // reading one state and the second failing its compare-and-set.
      await trx.updateTable('instances').set((eb) => ({ state: eb.ref('state') })).where('id', '=', instanceId).execute();
      const row = await trx.selectFrom('instances').select(['state']).where('id', '=', instanceId).executeTakeFirstOrThrow();
      const from = row.state as InstanceState;
      if (onlyFrom !== undefined && from !== onlyFrom) return false;
      assertTransition(from, to);
      const at = nowIso();
      const last = await trx
        .selectFrom('instance_events')
        .select(({ fn }) => fn.max('seq').as('seq'))
        .where('instance_id', '=', instanceId)
        .executeTakeFirst();
      const result = await trx
        .updateTable('instances')
        .set({ state: to, updated_at: at, ...(to === 'failed' ? { failure_reason: reason ?? 'unknown' } : {}) })
        .where('id', '=', instanceId)
        .where('state', '=', from)
        .executeTakeFirst();
      if (Number(result.numUpdatedRows) !== 1) throw new Error(`instance ${instanceId} changed state during ${from} -> ${to}`);
      // Progress describes the step under way; a new state ends it.
      await trx.updateTable('instances').set({ progress: null }).where('id', '=', instanceId).execute();
      await trx
        .insertInto('instance_events')
        .values({
          instance_id: instanceId,
          seq: Number(last?.seq ?? 0) + 1,
          state: to,
          at,
          reason: reason ?? null,
          reason_code: why?.code ?? null,
          key_id: why?.keyId ?? null,
        })
        .execute();
      return true;
    });
  }

  /** Every instance the room has had, as the organization sees it. */
  private roomInstances(organizationId: string, profileId: string, roomId: string) {
    return this.db
      .selectFrom('instances')
      .selectAll()
      .where('organization_id', '=', organizationId)
      .where('profile_id', '=', profileId)
      .where('room_id', '=', roomId);
  }

  async findLive(organizationId: string, profileId: string, roomId: string): Promise<InstanceRecord | undefined> {
    return decoded(await this.roomInstances(organizationId, profileId, roomId).where('state', 'in', LIVE_STATES).executeTakeFirst());
  }

  async findCurrent(organizationId: string, profileId: string, roomId: string): Promise<InstanceRecord | undefined> {
    const row = await this.roomInstances(organizationId, profileId, roomId)
      .where('deleted_at', 'is', null)
      .where('state', '!=', 'stopped')
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .executeTakeFirst();
    return decoded(row);
  }

  /** The organization's instance with this id, unless it stopped or was deleted (failed ones are kept until deleted, as in a room). */
  async findOfOrganization(organizationId: string, instanceId: string): Promise<InstanceRecord | undefined> {
    const row = await this.db
      .selectFrom('instances')
      .selectAll()
      .where('id', '=', instanceId)
      .where('organization_id', '=', organizationId)
      .where('deleted_at', 'is', null)
      .where('state', '!=', 'stopped')
      .executeTakeFirst();
    return decoded(row);
  }

  /** The room's most recent instance that stopped (expired, deleted, retained too long, ...), if any. */
  async findLastStopped(organizationId: string, profileId: string, roomId: string): Promise<InstanceRecord | undefined> {
    const row = await this.roomInstances(organizationId, profileId, roomId)
      .where('state', '=', 'stopped')
      .orderBy('updated_at', 'desc')
      .orderBy('id', 'desc')
      .executeTakeFirst();
    return decoded(row);
  }

  /** An instance by id when it is in one of `states`. */
  async findIn(instanceId: string, states: readonly InstanceState[]): Promise<InstanceRecord | undefined> {
    return decoded(await this.db.selectFrom('instances').selectAll().where('id', '=', instanceId).where('state', 'in', states).executeTakeFirst());
  }

  /** The instance's state now; undefined when there is no such instance. */
  async stateNow(instanceId: string): Promise<string | undefined> {
    const row = await this.db.selectFrom('instances').select('state').where('id', '=', instanceId).executeTakeFirst();
    return row?.state;
  }

  /** Why the instance's latest step was made, when it was an end (e.g. a stop under way). */
  async lastEndReason(instanceId: string): Promise<EndReason | undefined> {
    const e = await this.db
      .selectFrom('instance_events')
      .select(['reason', 'reason_code', 'key_id'])
      .where('instance_id', '=', instanceId)
      .orderBy('seq', 'desc')
      .executeTakeFirst();
    if (!e?.reason_code) return undefined;
    return { reason: e.reason ?? '', code: e.reason_code as InstanceReasonCode, ...(e.key_id === null ? {} : { keyId: e.key_id }) };
  }

  async getRow(instanceId: string): Promise<InstanceRecord> {
    return decodeInstance(await this.db.selectFrom('instances').selectAll().where('id', '=', instanceId).executeTakeFirstOrThrow());
  }

  /** Hides the instance from its room (a delete): it no longer answers for it. */
  async markDeleted(instanceId: string): Promise<void> {
    await this.db.updateTable('instances').set({ deleted_at: nowIso() }).where('id', '=', instanceId).execute();
  }

  /** What provisioning is doing now, in words (bounded). */
  async setProgress(instanceId: string, message: string): Promise<void> {
    await this.db.updateTable('instances').set({ progress: message.slice(0, 500) }).where('id', '=', instanceId).execute();
  }

  /** A command or file request: the idle limit counts from now; with `expiresAt`, the deadline moves too (a keep-alive). */
  async touch(instanceId: string, expiresAt?: string): Promise<void> {
    await this.db
      .updateTable('instances')
      .set({ last_active_at: nowIso(), ...(expiresAt === undefined ? {} : { expires_at: expiresAt }) })
      .where('id', '=', instanceId)
      .execute();
  }

  /** What a pause kept, recorded as it ends. */
  async recordPause(instanceId: string, memoryKept: boolean): Promise<void> {
    await this.db.updateTable('instances').set({ paused_at: nowIso(), paused_memory_kept: memoryKept ? 1 : 0 }).where('id', '=', instanceId).execute();
  }

  /** Corrects what a pause kept (a start found its saved memory gone, or saved it again). */
  async recordMemoryKept(instanceId: string, memoryKept: boolean): Promise<void> {
    await this.db.updateTable('instances').set({ paused_memory_kept: memoryKept ? 1 : 0 }).where('id', '=', instanceId).execute();
  }

  /** A resume's fresh run: no pause any more, active now, and the deadline it gets. */
  async recordResume(instanceId: string, expiresAt: string | null): Promise<void> {
    await this.db
      .updateTable('instances')
      .set({ paused_at: null, paused_memory_kept: null, last_active_at: nowIso(), expires_at: expiresAt })
      .where('id', '=', instanceId)
      .execute();
  }

  /** Writes the spec the instance runs with (its network changed at run time). */
  async setSpec(instanceId: string, spec: ProfileSpec): Promise<void> {
    await this.db.updateTable('instances').set({ spec: JSON.stringify(spec), updated_at: nowIso() }).where('id', '=', instanceId).execute();
  }

  /** Writes a create's options onto the instance's row. */
  async setOptions(instanceId: string, columns: OptionColumns): Promise<void> {
    await this.db.updateTable('instances').set(columns).where('id', '=', instanceId).execute();
  }

  /**
   * Moves a ready warm pool instance (made for `key`) into a room, and says so in its
   * history; false when it is no longer there to take (a retire or another claim took it
   * first). Call within a transaction.
   */
  async claimPooled(instanceId: string, key: string, roomId: string, at: string, reason: string): Promise<boolean> {
    const moved = await this.db
      .updateTable('instances')
      .set({ room_id: roomId, warm_pool_key: null, claimed_at: at, last_active_at: at, updated_at: at })
      .where('id', '=', instanceId)
      .where('state', '=', 'ready')
      .where('warm_pool_key', '=', key)
      .executeTakeFirst();
    if (Number(moved.numUpdatedRows) !== 1) return false;
    const last = await this.db
      .selectFrom('instance_events')
      .select(({ fn }) => fn.max('seq').as('seq'))
      .where('instance_id', '=', instanceId)
      .executeTakeFirst();
    // Not a change of state (it was ready and stays ready): the history says when the room took it.
    await this.db
      .insertInto('instance_events')
      .values({ instance_id: instanceId, seq: Number(last?.seq ?? 0) + 1, state: 'ready', at, reason, reason_code: 'claimed', key_id: null })
      .execute();
    return true;
  }

  /** Marks a live warm pool instance (made for `key`) with `retired`, so no claim takes it; false when a claim took it first. */
  async retirePooled(instanceId: string, key: string | null, retired: string): Promise<boolean> {
    if (key === null) return false;
    const taken = await this.db
      .updateTable('instances')
      .set({ warm_pool_key: retired })
      .where('id', '=', instanceId)
      .where('warm_pool_key', '=', key)
      .where('state', 'in', LIVE_STATES)
      .executeTakeFirst();
    return Number(taken.numUpdatedRows) === 1;
  }

  async view(row: InstanceRecord): Promise<Instance> {
    const events = await this.db
      .selectFrom('instance_events')
      .selectAll()
      .where('instance_id', '=', row.id)
      .orderBy('seq')
      .execute();
    return {
      instance_id: row.id,
      profile_id: row.profile_id,
      room_id: row.room_id,
      state: stateOf(row),
      state_history: events.map((e) => ({
        state: e.state as InstanceState,
        at: e.at,
        ...(e.reason === null ? {} : { reason: e.reason }),
        ...(e.reason_code === null ? {} : { reason_code: e.reason_code as InstanceReasonCode }),
        ...(e.key_id === null ? {} : { key_id: e.key_id }),
      })),
      failure_reason: row.failure_reason,
      progress: row.progress,
      runtime: row.runtime,
      resources: row.resources,
      pause: pauseOf(row),
      claimed_at: row.claimed_at,
      snapshot_id: row.snapshot_id,
      env_names: Object.keys(envOf(row)).sort(),
      metadata: await metadataOf(this.db, row.id),
      timeout_s: row.timeout_s > 0 ? row.timeout_s : null,
      expires_at: row.expires_at,
      created_at: row.created_at,
      updated_at: row.updated_at,
    };
  }
}

/** A new instance's row, in state `active`: for a room, or for a warm pool (`warmPoolKey`). */
export function newInstanceRow(fields: {
  organizationId: string;
  profileId: string;
  roomId: string;
  runtime: string;
  spec: ProfileSpec;
  warmPoolKey?: string;
  /** The snapshot it starts from. */
  snapshotId?: string;
  /** The node whose host runs it. */
  nodeId: string;
}): InstanceRecord {
  const { spec } = fields;
  const now = nowIso();
  return {
    id: randomUUID(),
    organization_id: fields.organizationId,
    profile_id: fields.profileId,
    room_id: fields.roomId,
    state: 'active',
    failure_reason: null,
    runtime: fields.runtime,
    resources: resourcesOf(spec),
    created_at: now,
    updated_at: now,
    deleted_at: null,
    last_active_at: now,
    idle_timeout_s: spec.idle_timeout_s,
    max_lifetime_s: spec.max_lifetime_s,
    progress: null,
    spec,
    warm_pool_key: fields.warmPoolKey ?? null,
    claimed_at: null,
    paused_at: null,
    paused_memory_kept: null,
    paused_retention_s: spec.paused_retention_s,
    snapshot_id: fields.snapshotId ?? null,
    node_id: fields.nodeId,
    ...NO_OPTIONS,
  };
}

/** Inserts a new instance's row and its first history entry (`active`). */
export async function insertInstanceRow(db: Db, row: InstanceRecord): Promise<void> {
  await db.insertInto('instances').values(encodeInstance(row)).execute();
  await db
    .insertInto('instance_events')
    .values({ instance_id: row.id, seq: 1, state: 'active', at: row.created_at, reason: null, reason_code: null, key_id: null })
    .execute();
}

/** What the instance's pause kept, while it is paused or resuming. */
function pauseOf(row: InstanceRecord): InstancePause | null {
  if ((row.state !== 'paused' && row.state !== 'resuming') || row.paused_at === null) return null;
  const retentionS = row.paused_retention_s;
  return {
    paused_at: row.paused_at,
    memory_kept: row.paused_memory_kept === 1,
    remove_after: retentionS > 0 ? new Date(Date.parse(row.paused_at) + retentionS * 1000).toISOString() : null,
  };
}

export function stateOf(row: Pick<InstanceRow, 'id' | 'state'>): InstanceState {
  if (!isState(row.state)) throw new Error(`instance ${row.id} has unknown state "${row.state}" in the store`);
  return row.state;
}

/**
 * What an instance of `spec` is granted. A profile's memory_mb (like vcpus and disk_mb)
 * is held in four places on its way to the cgroup, each for a reason of its own:
 * - the profile's spec: what instances made from now on get;
 * - the instance's `spec`: what it was made from, so that a profile edit changes no
 *   instance already made (a resume boots it with the same machine);
 * - the instance's `resources`, derived here from that spec: what quotas, admission,
 *   /metrics and the API count, read without the whole spec, and the one record of
 *   instances made before the spec was kept;
 * - the runtime's record next to the instance's files (gVisor's instance.json): a
 *   runtime does not read the store, and re-arms its memory guard from it when it
 *   adopts the instance after a restart. The cgroup's limit is derived from it there.
 */
export function resourcesOf(spec: Pick<ProfileSpec, 'memory_mb' | 'vcpus' | 'disk_mb'>): InstanceResources {
  return { memory_mb: spec.memory_mb, vcpus: spec.vcpus, disk_mb: spec.disk_mb };
}

function decoded(row: InstanceRow | undefined): InstanceRecord | undefined {
  return row === undefined ? undefined : decodeInstance(row);
}
