// Snapshots and forks. A snapshot is an instance's file system, and by default its
// memory and processes (where the runtime can), saved under an id the organization
// owns: it outlives the instance, and new instances start from it in any room of the
// organization (`snapshot_id` in a create, via Instances.create), with its processes
// when it kept them. A fork is a snapshot and one new instance from it per room asked
// for, in one call; the source goes on running. The runtime copies the files and memory
// (Runtime.snapshot) and restores them (provision); this class keeps the record, checks
// the quota, and settles what a crash left half made (reconcile()).
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { AppError } from '../errors.ts';
import { nowIso } from '../lib/time.ts';
import type { Runtime, RuntimeSelection, SnapshotRuntime } from '../runtimes/types.ts';
import type { Db } from '../store/db.ts';
import { decodeSnapshot, type InstanceRecord, type SnapshotRecord } from './stored-json.ts';
import { type Instances, roomOccupied, type SnapshotSource } from './instances.ts';
import { afterCursor, pageOf } from './page-cursor.ts';
import { appErrorOfRuntime } from './runtime-errors.ts';
import { specOf, type Profiles } from './profiles.ts';
import type { Quotas } from './quotas.ts';
import type { ForkResult, Snapshot, SnapshotPage } from './snapshot-schema.ts';
import { noteFacts, noteOperation } from './operations.ts';
import { addressFacts, type InstanceAddress, roomRef } from './instance-address.ts';

export interface SnapshotsDeps {
  db: Db;
  instances: Instances;
  profiles: Profiles;
  quotas: Quotas;
  runtime: RuntimeSelection;
  log: Logger;
  /** The node whose host holds the snapshots this takes: it reconciles only its own. */
  nodeId: string;
  /** Snapshots of the runtime's that others keep (templates' layers): reconcile leaves their files. */
  keptElsewhere?: () => Promise<Set<string>>;
}

/** What a snapshot is asked to be. */
export interface SnapshotCreateOptions {
  name?: string;
  /** Keep memory and processes too, where the runtime can (default true). */
  memory?: boolean;
}

export class Snapshots {
  private readonly deps: SnapshotsDeps;

  constructor(deps: SnapshotsDeps) {
    this.deps = deps;
  }

  /**
   * Saves the room's instance (ready or paused; it stays as it was) as a new snapshot;
   * resolves once the snapshot is ready.
   */
  async create(organizationId: string, profileId: string, roomId: string, options: SnapshotCreateOptions): Promise<Snapshot> {
    return this.createAt(roomRef(organizationId, profileId, roomId), options);
  }

  async createAt(address: InstanceAddress, options: SnapshotCreateOptions): Promise<Snapshot> {
    noteOperation('snapshot.create', addressFacts(address));
    // PostgreSQL's text cannot hold a NUL: refused on either store, rather than a 500 on one.
    if (options.name?.includes('\u0000')) throw new AppError('validation_error', 'name contains a NUL character, which a name cannot carry');
    const instance = await this.deps.instances.requireLiveAt(address);
    const { organization_id: organizationId, profile_id: profileId, room_id: roomId } = instance;
    const runtime = this.snapshotRuntime();
    if (instance.state !== 'ready' && instance.state !== 'paused') throw notSnapshottable(instance);
    const row: SnapshotRecord = {
      id: randomUUID(),
      organization_id: organizationId,
      name: options.name ?? null,
      state: 'creating',
      source_instance_id: instance.id,
      profile_id: profileId,
      room_id: roomId,
      runtime: runtime.name,
      spec: instance.spec ?? specOf(await this.deps.profiles.get(organizationId, profileId)),
      memory_kept: 0,
      disk_bytes: 0,
      created_at: nowIso(),
      deleted_at: null,
      node_id: this.deps.nodeId,
    };
    const { db, quotas, log } = this.deps;
    await db.transaction().execute(async (trx) => {
      await quotas.lock(trx, organizationId);
      await quotas.assertSnapshotFits(trx, organizationId);
      await trx.insertInto('snapshots').values({ ...row, spec: JSON.stringify(row.spec) }).execute();
    });
    const started = performance.now();
    let outcome;
    try {
      outcome = await runtime.snapshot(instance.id, row.id, { memory: options.memory ?? true });
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      log.error({ instanceId: instance.id, snapshotId: row.id, err }, 'could not take a snapshot');
      await runtime.deleteSnapshot(row.id).catch(() => {});
      await db.deleteFrom('snapshots').where('id', '=', row.id).execute();
      const known = appErrorOfRuntime(err);
      if (known) throw known;
      throw new AppError('snapshot_failed', `the snapshot could not be taken (${message}); the instance is as it was, try again`, {
        instance_id: instance.id,
      });
    }
    const ready = { state: 'ready' as const, memory_kept: outcome.memoryKept ? 1 : 0, disk_bytes: outcome.diskBytes };
    await db.updateTable('snapshots').set(ready).where('id', '=', row.id).execute();
    log.info({ instanceId: instance.id, snapshotId: row.id, diskBytes: outcome.diskBytes, memoryKept: outcome.memoryKept, elapsedMs: Math.round(performance.now() - started) }, 'snapshot taken');
    return view({ ...row, ...ready });
  }

  /** The organization's snapshots, newest first; pass `next_cursor` back as `cursor`. */
  async list(organizationId: string, options: { limit: number; cursor?: string; instanceId?: string }): Promise<SnapshotPage> {
    let query = this.deps.db
      .selectFrom('snapshots')
      .selectAll()
      .where('organization_id', '=', organizationId)
      .where('deleted_at', 'is', null)
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .limit(options.limit + 1);
    if (options.instanceId !== undefined) query = query.where('source_instance_id', '=', options.instanceId);
    if (options.cursor !== undefined) query = query.where(afterCursor(options.cursor, 'created_at'));
    const { page, nextCursor } = pageOf(await query.execute(), options.limit, (r) => r.created_at);
    return { snapshots: page.map((r) => view(decodeSnapshot(r))), next_cursor: nextCursor };
  }

  async get(organizationId: string, snapshotId: string): Promise<Snapshot> {
    return view(await this.row(organizationId, snapshotId));
  }

  /** Deletes a snapshot and its files; instances started from it keep their own copies. */
  async delete(organizationId: string, snapshotId: string): Promise<Snapshot> {
    noteOperation('snapshot.delete');
    const row = await this.row(organizationId, snapshotId);
    noteFacts({ instanceId: row.source_instance_id ?? undefined, profileId: row.profile_id, roomId: row.room_id });
    const runtime = this.snapshotRuntime();
    await this.deps.db.updateTable('snapshots').set({ deleted_at: nowIso() }).where('id', '=', row.id).execute();
    await runtime.deleteSnapshot(row.id);
    return view(row);
  }

  /** What Instances.create needs to start an instance from the organization's snapshot. */
  async source(organizationId: string, snapshotId: string): Promise<SnapshotSource> {
    const row = await this.row(organizationId, snapshotId);
    this.snapshotRuntime();
    if (row.state !== 'ready') {
      throw new AppError('snapshot_unusable', `snapshot ${row.id} is still being taken`, { snapshot_id: row.id }, { code: 'snapshot_ready_later', snapshot_id: row.id });
    }
    return { id: row.id, spec: row.spec };
  }

  /**
   * Starts a copy of the room's instance in each of `rooms` (same profile): a snapshot
   * (with its memory unless `memory` is false), then one instance from it per room,
   * admitted together and provisioned side by side (the runtime restores a few at a
   * time; their networks are made in one batch while the snapshot is taken). Answers
   * once every copy is ready or failed. A refusal (a room taken, a quota, the host's
   * capacity) leaves nothing behind, not even a snapshot asked to be kept.
   * `timeoutAction` is what each copy's deadline does (as a create's).
   */
  async fork(
    organizationId: string,
    profileId: string,
    roomId: string,
    options: { rooms: string[]; keepSnapshot: boolean; memory?: boolean; timeoutAction?: 'pause' | 'stop' },
  ): Promise<ForkResult> {
    noteOperation('instance.fork', { profileId, roomId });
    const { instances, log } = this.deps;
    const sourceRow = await instances.requireLive(organizationId, profileId, roomId);
    noteFacts({ instanceId: sourceRow.id });
    for (const room of options.rooms) {
      const live = await instances.liveRow(organizationId, profileId, room);
      if (live) throw roomOccupied(live, 'fork into it');
    }
    const networks = this.snapshotRuntime().prepareCreates?.(options.rooms.length);
    const snapshot = await this.create(organizationId, profileId, roomId, { name: `fork of ${roomId}`, memory: options.memory ?? true });
    let ids: string[];
    try {
      const source = await this.source(organizationId, snapshot.snapshot_id);
      await networks;
      ids = await instances.createCopies(organizationId, profileId, options.rooms, source, sourceRow.id, options.timeoutAction ? { timeoutAction: options.timeoutAction } : {});
    } catch (err) {
      await this.delete(organizationId, snapshot.snapshot_id).catch((deleteErr: unknown) => log.error({ snapshotId: snapshot.snapshot_id, err: deleteErr }, 'could not delete the snapshot of a refused fork'));
      throw err;
    }
    try {
      const settled = await Promise.all(ids.map((id) => instances.viewWhenSettled(id)));
      return { instances: settled, snapshot: options.keepSnapshot ? snapshot : null };
    } finally {
      if (!options.keepSnapshot) {
        await this.delete(organizationId, snapshot.snapshot_id).catch((err: unknown) => log.error({ snapshotId: snapshot.snapshot_id, err }, 'could not delete a fork\'s snapshot'));
      }
    }
  }

  /**
   * Settles what a stop of the service left: snapshots it was still taking are removed,
   * and files of snapshots the store does not know are deleted. Snapshots whose files
   * are gone are marked deleted.
   */
  async reconcile(): Promise<void> {
    if (!('runtime' in this.deps.runtime) || !supportsSnapshots(this.deps.runtime.runtime)) return;
    const runtime = this.deps.runtime.runtime;
    const { db, log } = this.deps;
    // Only this node's: the others' files are on their own hosts.
    const nodeId = this.deps.nodeId;
    const half = await db.selectFrom('snapshots').select('id').where('node_id', '=', nodeId).where('state', '=', 'creating').execute();
    for (const { id } of half) {
      await runtime.deleteSnapshot(id);
      await db.deleteFrom('snapshots').where('id', '=', id).execute();
      log.warn({ snapshotId: id }, 'removed a snapshot the service stopped while taking');
    }
    const kept = await db.selectFrom('snapshots').select('id').where('node_id', '=', nodeId).where('deleted_at', 'is', null).where('runtime', '=', runtime.name).execute();
    const known = new Set(kept.map((r) => r.id));
    const onHost = new Set(await runtime.listSnapshots());
    const others = (await this.deps.keptElsewhere?.()) ?? new Set<string>();
    for (const id of onHost) {
      if (known.has(id) || others.has(id)) continue;
      await runtime.deleteSnapshot(id);
      log.info({ snapshotId: id }, 'removed the files of a snapshot the store does not keep');
    }
    for (const id of known) {
      if (onHost.has(id)) continue;
      await db.updateTable('snapshots').set({ deleted_at: nowIso() }).where('id', '=', id).execute();
      log.error({ snapshotId: id }, 'a snapshot\'s files are gone from this host; it is marked deleted');
    }
  }

  private async row(organizationId: string, snapshotId: string): Promise<SnapshotRecord> {
    const row = await this.deps.db
      .selectFrom('snapshots')
      .selectAll()
      .where('id', '=', snapshotId)
      .where('organization_id', '=', organizationId)
      .where('deleted_at', 'is', null)
      .executeTakeFirst();
    // Another organization's snapshot is answered exactly like one that does not exist.
    if (!row) throw new AppError('snapshot_not_found', `no snapshot ${snapshotId} in this organization`, undefined, { code: 'list_snapshots' });
    return decodeSnapshot(row);
  }

  /** The runtime, when it can take snapshots; feature_unavailable otherwise. */
  private snapshotRuntime(): Runtime & SnapshotRuntime {
    const selection = this.deps.runtime;
    if (!('runtime' in selection)) throw new AppError('runtime_unavailable', `no runtime can run instances on this host: ${selection.unavailable.reason}`);
    const runtime = selection.runtime;
    if (!supportsSnapshots(runtime)) {
      throw new AppError('feature_unavailable', `the ${runtime.name} runtime cannot take snapshots of instances; snapshots and forks need a runtime that can`);
    }
    return runtime;
  }
}

function supportsSnapshots(runtime: Runtime): runtime is Runtime & SnapshotRuntime {
  return runtime.capabilities.snapshot && runtime.snapshot !== undefined && runtime.deleteSnapshot !== undefined && runtime.listSnapshots !== undefined;
}

function notSnapshottable(row: InstanceRecord): AppError {
  return new AppError(
    'instance_state_conflict',
    `cannot take a snapshot of the room's instance while it is ${row.state}: only a ready or paused one`,
    { instance_id: row.id, state: row.state },
    { code: 'poll_and_retry', profile_id: row.profile_id, room_id: row.room_id },
  );
}

function view(row: SnapshotRecord): Snapshot {
  const { spec } = row;
  return {
    snapshot_id: row.id,
    name: row.name,
    state: row.state,
    instance_id: row.source_instance_id,
    profile_id: row.profile_id,
    room_id: row.room_id,
    image: spec.image,
    disk_mb: spec.disk_mb,
    disk_bytes: Number(row.disk_bytes),
    memory_kept: row.memory_kept === 1,
    created_at: row.created_at,
  };
}
