// Instances: one live instance per room of a profile. This service owns the record of
// every instance and its state machine; the runtime does the machine work. Creation is
// idempotent, provisioning runs in the background (callers may wait for it), and a
// delete during provisioning cancels it and tears down what was made. Every end is
// recorded with why (a reason code and words): a delete (and by which key), a limit,
// the machine ending by itself (reported by the runtime), a start that failed. An
// operation on an instance takes its address (instance-address.ts): its id, or a room.
// Over 400 lines: every move of an instance's life (create, provision, pause, stop, expire, fail)
// is in this one class, so that the order of their awaits can be read in one place.
import type { Logger } from 'pino';
import { AppError } from '../errors.ts';
import type { Instance, InstancePage } from './instance-schema.ts';
import { type EndReason, InstanceRecords, insertInstanceRow, type ListOptions, newInstanceRow, resourcesOf, stateOf } from './instance-records.ts';
import type { ProvisionNote, Runtime, RuntimeEvent, RuntimeSelection } from '../runtimes/types.ts';
import type { Db } from '../store/db.ts';
import { isUniqueViolation } from '../store/errors.ts';
import { liveStates, nodeOfInstance, nodeOfRoom, pausedWithRetention, readyWithLimits } from './instance-queries.ts';
import type { InstanceRecord } from './stored-json.ts';
import { LIVE_STATES, type ProvisionStep } from './lifecycle.ts';
import type { Profiles } from './profiles.ts';
import type { ProfileSpec } from './profile-schema.ts';
import { machineSpecOf, specOf } from './profiles.ts';
import { applyNetworkChange, checkNetwork, networkStateConflict } from './network-policy.ts';
import type { Network } from './network-schema.ts';
import { WarmPool } from './warm-pool.ts';
import type { Admission } from './admission.ts';
import type { Quotas } from './quotas.ts';
import type { Metrics } from '../metrics.ts';
import { type Reconciled, reconcileWithHost } from './reconcile.ts';
import { releaseLost, settleLostNodes } from './lost-nodes.ts';
import { Pauses, stateConflict } from './pauses.ts';
import { CpuPressure } from './cpu-pressure.ts';
import { MemoryPressure } from './memory-pressure.ts';
import type { Config } from '../config.ts';
import type { CreateOptions } from './instance-options-schema.ts';
import { applyOptions, assertSameOptions, checkCreateOptions, envOf, deadlinePassed, type InstanceOptions, keepAlive, optionColumns, writeMetadata } from './instance-options.ts';
import { noteFacts, noteOperation, refineOperation } from './operations.ts';
import { addressFacts, type InstanceAddress, type InstanceRef, instanceIdNotFound, isInstanceRef, type RoomRef, roomRef } from './instance-address.ts';
import { isUuid } from '../lib/ids.ts';
import { templateNameOf } from './dockerfile-parser.ts';
import { startTemplateCommand, templateInstanceSpec, templateLayerOf } from './template-instances.ts';
import type { Templates } from './templates.ts';

/**
 * A snapshot to start an instance from: its id, and the spec of the instance it was
 * taken of (the new one keeps that one's image, packages, user and disk size).
 */
export interface SnapshotSource {
  id: string;
  spec: ProfileSpec;
}

/** Instances a shutdown with the `stop` policy tears down at once. */
const STOPS_AT_ONCE = 8;

interface Provisioning {
  done: Promise<void>;
  abort: AbortController;
}

/** Told that an instance begins to stop; `pause` when it is being paused (and whether its memory is kept). */
export type StoppingListener = (instanceId: string, why: EndReason, pause?: { keepsMemory: boolean }) => void;

export class Instances {
  private readonly db: Db;
  /** The node whose host runs the instances this makes. */
  readonly nodeId: string;
  private readonly records: InstanceRecords;
  private readonly profiles: Profiles;
  private readonly templates: Pick<Templates, 'source'> | undefined;
  private readonly runtimeSelection: RuntimeSelection;
  private readonly log: Logger;
  private readonly quotas: Quotas;
  private readonly admission: Admission;
  private readonly provisioning = new Map<string, Provisioning>();
  /** Instances whose machine ended by itself, while what is left of them is removed. */
  private readonly ending = new Map<string, Promise<void>>();
  private closing = false;
  private expiryTimer: NodeJS.Timeout | undefined;
  /** Other expiries the periodic check runs after the instances' (expired idempotency keys). */
  private readonly alsoOnExpiry: (() => Promise<unknown>)[] = [];
  private readonly busyChecks: ((instanceId: string) => boolean)[] = [];
  private readonly stoppingListeners: StoppingListener[] = [];
  private readonly metrics: Metrics | undefined;
  /** The profiles' warm pools: instances booted before a room asks (warm-pool.ts). */
  readonly warmPool: WarmPool;
  /** Pauses and resumes under way (pauses.ts). */
  private readonly pauses: Pauses;
  /** Idle instances paused to make room in the host's memory (memory-pressure.ts). */
  readonly memoryPressure: MemoryPressure;
  /** Idle instances frozen while the host's CPUs are busy (cpu-pressure.ts). */
  readonly cpuPressure: CpuPressure;

  constructor(deps: {
    db: Db;
    profiles: Profiles;
    runtime: RuntimeSelection;
    quotas: Quotas;
    admission: Admission;
    config: Config;
    log: Logger;
    metrics?: Metrics;
    /** Pooled instances this host keeps at most, over all profiles; 0 turns warm pools off. */
    warmPoolMaxInstances?: number;
    /** The node whose host runs the instances this makes; it expires, reconciles and pools only its own. */
    nodeId: string;
    /** Where a profile's `template:NAME` image is found. */
    templates?: Pick<Templates, 'source'>;
  }) {
    this.templates = deps.templates;
    this.db = deps.db;
    this.nodeId = deps.nodeId;
    this.quotas = deps.quotas;
    this.admission = deps.admission;
    this.metrics = deps.metrics;
    this.records = new InstanceRecords(deps.db);
    this.profiles = deps.profiles;
    this.runtimeSelection = deps.runtime;
    this.log = deps.log;
    if ('runtime' in deps.runtime) deps.runtime.runtime.onEvent((event) => this.onRuntimeEvent(event));
    this.memoryPressure = new MemoryPressure({
      db: deps.db,
      nodeId: deps.nodeId,
      config: deps.config,
      admission: deps.admission,
      log: deps.log,
      ...(deps.metrics ? { metrics: deps.metrics } : {}),
      busy: (id) => this.busy(id),
      pausable: () => {
        const selection = this.runtimeSelection;
        return 'runtime' in selection && !this.closing && Pauses.supported(selection.runtime) ? selection.runtime : undefined;
      },
      pause: (row, why) => this.pauses.pause(this.pausableRuntime(), row, why),
      retirePooled: () => this.warmPool.giveWayForMemory(),
    });
    this.cpuPressure = new CpuPressure({
      db: deps.db,
      nodeId: deps.nodeId,
      config: deps.config,
      log: deps.log,
      ...(deps.metrics ? { metrics: deps.metrics } : {}),
      runtime: () => ('runtime' in this.runtimeSelection && !this.closing ? this.runtimeSelection.runtime : undefined),
      busy: (id) => this.busy(id),
    });
    this.pauses = new Pauses({
      db: deps.db,
      records: this.records,
      quotas: deps.quotas,
      admission: deps.admission,
      log: deps.log,
      onPausing: (id, why, keepsMemory) => this.notifyStopping(id, why, { keepsMemory }),
      makingRoom: (admit, resuming) => this.memoryPressure.makingRoom(admit, resuming),
    });
    this.warmPool = new WarmPool({
      db: deps.db,
      nodeId: deps.nodeId,
      profiles: deps.profiles,
      quotas: deps.quotas,
      admission: deps.admission,
      log: deps.log,
      maxInstances: deps.warmPoolMaxInstances ?? 0,
      instances: {
        runtime: () => ('runtime' in this.runtimeSelection && !this.closing ? this.runtimeSelection.runtime : undefined),
        launch: (runtime, row, spec) => this.launch(runtime, row, spec),
        stop: (row, why) => this.stop(row, why),
      },
    });
  }

  /**
   * Creates the room's instance, or returns the live one it already has (when the options
   * given are the ones it was made with: instance_options_conflict otherwise). With `wait`,
   * answers once the instance is ready, and throws instance_start_failed if it failed.
   */
  async create(
    organizationId: string,
    profileId: string,
    roomId: string,
    options: { wait: boolean; snapshot?: SnapshotSource } & InstanceOptions,
  ): Promise<{ instance: Instance; created: boolean }> {
    noteOperation('instance.create', { profileId, roomId });
    const profile = await this.profiles.get(organizationId, profileId);
    const { wait, snapshot: from, ...asked } = options;
    const made = from ? fromSnapshotSpec(specOf(profile), from.spec) : await this.specFromImage(organizationId, specOf(profile));
    const fromTemplate = templateNameOf(profile.image) !== undefined;
    // A network of the create's own is the instance's, kept in its spec as the rest of it.
    const spec = asked.network ? { ...made, network: applyNetworkChange(made.network, asked.network) } : made;
    if (asked.network) checkNetwork(spec.network);
    checkCreateOptions(asked, spec);
    const answerLive = async (live: InstanceRecord) => {
      noteFacts({ instanceId: live.id });
      if (from && live.snapshot_id !== from.id) throw roomOccupied(live, `start one from snapshot ${from.id}`);
      await assertSameOptions(this.db, live, asked);
      return { instance: await this.settle(live, wait), created: false };
    };
    const existing = await this.records.findLive(organizationId, profileId, roomId);
    if (existing) return answerLive(existing);

    // Options are the record's, not the machine's: a pooled instance takes them as a room
    // claims it. A warm pool's instances start from the image: one from a snapshot is made for its room.
    // Nor is one whose create asks for a network of its own: the pool's were made with the profile's.
    const claim = from || fromTemplate || asked.network ? undefined : await this.warmPool.claim(organizationId, profile, roomId, (trx, id) => applyOptions(trx, new InstanceRecords(trx), id, asked));
    if (claim) {
      if (!claim.claimed) return answerLive(claim.row);
      refineOperation('instance.create', 'instance.claim');
      noteFacts({ instanceId: claim.row.id });
      this.metrics?.instanceAssigned('warm_pool');
      return { instance: await this.settle(claim.row, wait), created: true };
    }

    const runtime = this.runtime();
    const row: InstanceRecord = {
      ...newInstanceRow({ organizationId, profileId, roomId, runtime: runtime.name, spec, nodeId: this.nodeId, ...(from ? { snapshotId: from.id } : {}) }),
      ...optionColumns(asked),
    };
    const resources = resourcesOf(spec);
    // The organization's quotas and the host's admission are checked in the transaction
    // that inserts the row, one create at a time, so racing creates are counted; a
    // refusal leaves nothing behind.
    const admit = () =>
      this.admission.serial(() =>
        this.db.transaction().execute(async (trx) => {
          await this.quotas.lock(trx, organizationId);
          const live = await new InstanceRecords(trx).findLive(organizationId, profileId, roomId);
          if (live) return live;
          await this.quotas.assertInstanceFits(trx, organizationId, resources);
          await this.admission.assertFits(trx, runtime, resources);
          await insertInstanceRow(trx, row);
          await writeMetadata(trx, row.id, asked.metadata ?? {});
          return undefined;
        }),
      );
    try {
      // No caller is refused because of a warm pool: pooled instances give way; then,
      // under memory pressure, idle instances are paused for it.
      const winner = await this.memoryPressure.makingRoom(() => this.warmPool.givingWay(organizationId, admit));
      if (winner) return answerLive(winner);
    } catch (err) {
      // Another request created the room's instance between our look-up and insert.
      if (!isUniqueViolation(err)) throw err;
      const winner = await this.records.findLive(organizationId, profileId, roomId);
      if (!winner) throw err;
      return answerLive(winner);
    }

    noteFacts({ instanceId: row.id });
    this.metrics?.instanceAssigned('cold');
    this.launch(runtime, row, spec);
    return { instance: await this.settle(row, wait), created: true };
  }

  /**
   * A fork's copies: one new instance from snapshot `from` in each of `rooms` (none may
   * have a live instance), admitted together, all or none: the organization's quotas
   * and the host's admission weigh all of them in one check, and a refusal (a room
   * taken meanwhile, a quota, the host's capacity after pressure made what room it
   * could) makes none. They are then provisioned side by side (the runtime bounds its
   * own restores). Answers their ids in the order of `rooms`, without waiting for them;
   * `source`, the instance the snapshot was taken of, is never paused to make room.
   */
  async createCopies(
    organizationId: string,
    profileId: string,
    rooms: readonly string[],
    from: SnapshotSource,
    source: string,
    options: Pick<InstanceOptions, 'timeoutAction'> = {},
  ): Promise<string[]> {
    const profile = await this.profiles.get(organizationId, profileId);
    const spec = fromSnapshotSpec(specOf(profile), from.spec);
    checkCreateOptions({}, spec);
    const runtime = this.runtime();
    const rows = rooms.map((roomId) => ({
      ...newInstanceRow({ organizationId, profileId, roomId, runtime: runtime.name, spec, snapshotId: from.id, nodeId: this.nodeId }),
      ...optionColumns(options),
    }));
    const resources = resourcesOf(spec);
    const taken = async (records: InstanceRecords): Promise<InstanceRecord | undefined> => {
      for (const roomId of rooms) {
        const live = await records.findLive(organizationId, profileId, roomId);
        if (live) return live;
      }
      return undefined;
    };
    const admit = () =>
      this.admission.serial(() =>
        this.db.transaction().execute(async (trx) => {
          await this.quotas.lock(trx, organizationId);
          const live = await taken(new InstanceRecords(trx));
          if (live) throw roomOccupied(live, 'fork into it');
          await this.quotas.assertInstanceFits(trx, organizationId, resources, rows.length);
          await this.admission.assertFits(trx, runtime, resources, rows.length);
          for (const row of rows) await insertInstanceRow(trx, row);
        }),
      );
    try {
      await this.memoryPressure.makingRoom(() => this.warmPool.givingWay(organizationId, admit), source);
    } catch (err) {
      // A create in one of the rooms won the race between the check and the inserts.
      if (!isUniqueViolation(err)) throw err;
      const live = await taken(this.records);
      throw live ? roomOccupied(live, 'fork into it') : err;
    }
    for (const row of rows) {
      this.metrics?.instanceAssigned('cold');
      void this.launch(runtime, row, spec);
    }
    return rows.map((row) => row.id);
  }

  /** Starts provisioning `row` in the background; the promise settles when provisioning has ended. */
  private launch(runtime: Runtime, row: InstanceRecord, spec: ProfileSpec): Promise<void> {
    const log = this.log.child({ instanceId: row.id, profileId: row.profile_id, roomId: row.room_id });
    log.info('instance provisioning started');
    const abort = new AbortController();
    const done = this.provision(runtime, row, spec, abort.signal, log).finally(() => this.provisioning.delete(row.id));
    this.provisioning.set(row.id, { done, abort });
    return done;
  }

  /**
   * The instance a room's address means now, by id: its live one; instance_not_found
   * (saying what became of its last one) when it has none. Where an adapter that names
   * instances by id turns a room into one.
   */
  async resolve(room: RoomRef): Promise<InstanceRef> {
    return { organizationId: room.organizationId, instanceId: (await this.findAt(room, 'live')).id };
  }

  /**
   * The record an address names, as its organization sees it: `live` (not failed) or
   * `current` (a failed one too, until it is deleted). A room with none answers
   * instance_not_found saying what became of its last one; an id the organization has
   * no such instance under (missing, ended, another organization's) answers the same
   * instance_not_found whichever it is.
   */
  private async findAt(address: InstanceAddress, which: 'live' | 'current'): Promise<InstanceRecord> {
    if (isInstanceRef(address)) {
      const row = isUuid(address.instanceId) ? await this.records.findOfOrganization(address.organizationId, address.instanceId) : undefined;
      if (!row || (which === 'live' && !(LIVE_STATES as readonly string[]).includes(row.state))) throw instanceIdNotFound(address.instanceId);
      noteFacts({ instanceId: row.id, profileId: row.profile_id, roomId: row.room_id });
      return row;
    }
    const { organizationId, profileId, roomId } = address;
    await this.profiles.get(organizationId, profileId);
    const row = which === 'live' ? await this.records.findLive(organizationId, profileId, roomId) : await this.records.findCurrent(organizationId, profileId, roomId);
    if (!row) throw await this.noInstance(organizationId, profileId, roomId);
    noteFacts({ instanceId: row.id });
    return row;
  }

  /** The profile spec an instance was made from (the profile's as it is now, for a record older than that column). */
  private async specOfRecord(row: InstanceRecord): Promise<ProfileSpec> {
    return row.spec ?? specOf(await this.profiles.get(row.organization_id, row.profile_id));
  }

  /**
   * The other node whose host runs the room's current instance (or the instance of that
   * id), when one does and it has not been declared lost; undefined when this node holds
   * it, or nothing does.
   */
  async ownerElsewhere(at: { profileId: string; roomId: string } | { instanceId: string }): Promise<{ nodeId: string; url: string } | undefined> {
    const owner = 'instanceId' in at ? await nodeOfInstance(this.db, at.instanceId) : await nodeOfRoom(this.db, at.profileId, at.roomId);
    if (!owner || owner.nodeId === this.nodeId || owner.state === 'lost') return undefined;
    return { nodeId: owner.nodeId, url: owner.url };
  }

  /** Records the live instances of lost nodes as `lost` (lost-nodes.ts); each heartbeat of this node calls it. */
  async settleLostNodes(): Promise<string[]> {
    return settleLostNodes({ db: this.db, records: this.records, log: this.log });
  }

  /** Back after being declared lost: removes what this node's `lost` instances still hold on its host (lost-nodes.ts). */
  async releaseLost(): Promise<string[]> {
    const selection = this.runtimeSelection;
    if (!('runtime' in selection)) return [];
    return releaseLost({ db: this.db, nodeId: this.nodeId, runtime: selection.runtime, log: this.log });
  }

  /** The live instance's record; instance_not_found (for a room, saying what became of its last one) when there is none. */
  async requireLive(organizationId: string, profileId: string, roomId: string): Promise<InstanceRecord> {
    return this.requireLiveAt(roomRef(organizationId, profileId, roomId));
  }

  async requireLiveAt(address: InstanceAddress): Promise<InstanceRecord> {
    return this.onThisNode(await this.findAt(address, 'live'));
  }

  /**
   * The row, when its machine is on this node's host; a request that would reach into
   * an instance of another node is refused (`instance_on_another_node`, naming the node
   * and where it is reached), and one of an instance whose node was lost answers
   * `instance_lost`.
   */
  private async onThisNode(row: InstanceRecord): Promise<InstanceRecord> {
    if (row.state === 'lost') throw instanceLost(row);
    if (row.node_id === null || row.node_id === this.nodeId) return row;
    const node = await this.db.selectFrom('nodes').select(['url', 'state']).where('id', '=', row.node_id).executeTakeFirst();
    throw new AppError(
      'instance_on_another_node',
      `instance ${row.id} runs on node ${row.node_id}${node ? ` (${node.url}, ${node.state})` : ''}, not on this one; send the request to that node`,
      { instance_id: row.id, node_id: row.node_id, ...(node ? { node_url: node.url } : {}) },
    );
  }

  /** The room's live instance's row, if it has one. */
  async liveRow(organizationId: string, profileId: string, roomId: string): Promise<InstanceRecord | undefined> {
    return this.records.findLive(organizationId, profileId, roomId);
  }

  /** An instance as the API shows it, by id, once its provisioning (if under way) has ended. */
  async viewWhenSettled(instanceId: string): Promise<Instance> {
    await this.provisioning.get(instanceId)?.done.catch(() => {});
    return this.records.view(await this.records.getRow(instanceId));
  }

  /** The room's current instance: the live one, or the last one if it failed. */
  async get(organizationId: string, profileId: string, roomId: string): Promise<Instance> {
    return this.getAt(roomRef(organizationId, profileId, roomId));
  }

  /** The instance an address names: for a room, its live one or the last one if it failed. */
  async getAt(address: InstanceAddress): Promise<Instance> {
    return this.records.view(await this.findAt(address, 'current'));
  }

  /**
   * Stops the room's instance; `keyId` is the key that asked, for the record. Answers
   * `stopped` once its machine no longer runs; the runtime releases the rest of what it
   * held right after, in the background (see Runtime.destroy).
   */
  async delete(organizationId: string, profileId: string, roomId: string, options: { keyId?: string } = {}): Promise<Instance> {
    return this.deleteAt(roomRef(organizationId, profileId, roomId), options);
  }

  async deleteAt(address: InstanceAddress, options: { keyId?: string } = {}): Promise<Instance> {
    noteOperation('instance.delete', addressFacts(address));
    const row = await this.findAt(address, 'current');
    if (stateOf(row) === 'failed' || row.state === 'lost') {
      // Its resources were released when it failed (or are its lost node's to remove): only hide it from the room.
      await this.records.markDeleted(row.id);
      return this.records.view(row);
    }
    await this.onThisNode(row);
    const keyId = options.keyId;
    await this.stop(row, {
      reason: keyId === undefined ? 'deleted through the API' : `deleted through the API with key ${keyId}`,
      code: 'deleted',
      ...(keyId === undefined ? {} : { keyId }),
    });
    return this.records.view(await this.records.getRow(row.id));
  }

  /**
   * Pauses the room's ready instance (answers once it is paused, with what the pause
   * kept); a paused one is answered as it is. `keyId` is the key that asked; `memory:
   * false` asks for a files-only pause (its processes end), else memory is kept where the
   * runtime can.
   */
  async pause(organizationId: string, profileId: string, roomId: string, options: { keyId?: string; memory?: boolean } = {}): Promise<Instance> {
    return this.pauseAt(roomRef(organizationId, profileId, roomId), options);
  }

  async pauseAt(address: InstanceAddress, options: { keyId?: string; memory?: boolean } = {}): Promise<Instance> {
    noteOperation('instance.pause', addressFacts(address));
    const row = await this.onThisNode(await this.findAt(address, 'current'));
    if (row.state === 'paused') return this.records.view(row);
    if (row.state !== 'ready') throw stateConflict(row, 'pause');
    const keyId = options.keyId;
    await this.pauses.pause(this.pausableRuntime(), row, {
      reason: keyId === undefined ? 'paused through the API' : `paused through the API with key ${keyId}`,
      code: 'paused',
      ...(keyId === undefined ? {} : { keyId }),
    }, { memory: options.memory ?? true });
    return this.records.view(await this.records.getRow(row.id));
  }

  /**
   * A keep-alive: moves the room's instance's deadline to now + `timeoutS` (default its
   * create's timeout_s) and counts as activity for its idle limit. A paused instance stays
   * paused (a resume restarts its deadline anyway).
   */
  async keepAlive(organizationId: string, profileId: string, roomId: string, options: { timeout_s?: number } = {}): Promise<Instance> {
    return this.keepAliveAt(roomRef(organizationId, profileId, roomId), options);
  }

  async keepAliveAt(address: InstanceAddress, options: { timeout_s?: number } = {}): Promise<Instance> {
    noteOperation('instance.keepalive', addressFacts(address));
    const row = await this.findAt(address, 'live');
    await keepAlive(this.records, row, options.timeout_s, await this.specOfRecord(row));
    return this.records.view(await this.records.getRow(row.id));
  }

  /**
   * Replaces the egress policy of the room's live instance: checked, put in force at once
   * when it runs (runtime.setNetwork), kept in its spec for a resume after a pause.
   * Answers the policy now in force.
   */
  async setNetworkAt(address: InstanceAddress, network: Network): Promise<Network> {
    noteOperation('instance.network', addressFacts(address));
    checkNetwork(network);
    const row = await this.onThisNode(await this.findAt(address, 'live'));
    if (row.state !== 'ready' && row.state !== 'paused') throw networkStateConflict(row);
    const spec = { ...(await this.specOfRecord(row)), network };
    if (row.state === 'ready') {
      const runtime = this.runtime();
      if (!runtime.setNetwork) throw new AppError('feature_unavailable', `the ${runtime.name} runtime cannot change an instance's network while it runs`);
      await runtime.setNetwork(row.id, network);
    }
    await this.records.setSpec(row.id, spec);
    return network;
  }

  /** Resumes the room's paused instance (answers once it is ready); a ready one is answered as it is. */
  async resume(organizationId: string, profileId: string, roomId: string, options: { keyId?: string } = {}): Promise<Instance> {
    return this.resumeAt(roomRef(organizationId, profileId, roomId), options);
  }

  async resumeAt(address: InstanceAddress, options: { keyId?: string } = {}): Promise<Instance> {
    noteOperation('instance.resume', addressFacts(address));
    const row = await this.onThisNode(await this.findAt(address, 'current'));
    if (row.state === 'ready') return this.records.view(row);
    const keyId = options.keyId;
    await this.pauses.resume(this.pausableRuntime(), row, await this.specOfRecord(row), {
      reason: keyId === undefined ? 'resumed through the API' : `resumed through the API with key ${keyId}`,
      code: 'resumed',
      ...(keyId === undefined ? {} : { keyId }),
    }, { waitForPause: false });
    return this.records.view(await this.records.getRow(row.id));
  }

  /**
   * `instance_not_found` for a room without a live instance; when the room had one, the
   * message and details say when and why it ended (an idle or lifetime limit, the paused
   * retention, a delete, ...), so that a caller whose instance expired is not left guessing.
   */
  private async noInstance(organizationId: string, profileId: string, roomId: string): Promise<AppError> {
    const last = await this.records.findLastStopped(organizationId, profileId, roomId);
    const why = last ? await this.records.lastEndReason(last.id) : undefined;
    if (!last || !why) return instanceNotFound(profileId, roomId);
    return new AppError(
      'instance_not_found',
      `no instance in room "${roomId}": its last one (${last.id}) stopped at ${last.updated_at} (${why.code}: ${why.reason})`,
      { last_instance_id: last.id, stopped_at: last.updated_at, reason_code: why.code },
      { code: 'create_new_instance', profile_id: profileId, room_id: roomId },
    );
  }

  /** The runtime, when it can pause; feature_unavailable otherwise. */
  private pausableRuntime() {
    const runtime = this.runtime();
    if (!Pauses.supported(runtime)) {
      throw new AppError('feature_unavailable', `the ${runtime.name} runtime cannot pause instances; delete the instance instead, or set the profile's idle_action to "stop"`);
    }
    return runtime;
  }

  /**
   * The room's instance when it can take commands and file requests, with the profile
   * spec it was made from; records the request, which keeps it from going idle. A
   * paused instance (or one pausing or resuming) is resumed first.
   */
  async requireReady(organizationId: string, profileId: string, roomId: string): Promise<{ row: InstanceRecord; spec: ProfileSpec }> {
    return this.requireReadyAt(roomRef(organizationId, profileId, roomId));
  }

  async requireReadyAt(address: InstanceAddress): Promise<{ row: InstanceRecord; spec: ProfileSpec }> {
    let row = await this.onThisNode(await this.findAt(address, 'current'));
    const spec = await this.specOfRecord(row);
    row = await this.wake(row, spec);
    if (row.state !== 'ready') throw notReady(row);
    await this.touch(row.id);
    return { row, spec };
  }

  /** Resumes a paused (pausing, resuming) instance for a request that needs it running; the row as it is then. */
  private async wake(row: InstanceRecord, spec: ProfileSpec): Promise<InstanceRecord> {
    if (row.state !== 'paused' && row.state !== 'pausing' && row.state !== 'resuming') return row;
    await this.pauses.resume(this.pausableRuntime(), row, spec, { reason: 'a request needed it running', code: 'auto_resumed' }, { waitForPause: true });
    return this.records.getRow(row.id);
  }

  /**
   * Resumes the instance when it is paused (or pausing, resuming) for a request that
   * reaches into it by another way than the room (a running command's stdin or kill);
   * nothing when it runs or has ended.
   */
  async wakeById(instanceId: string): Promise<void> {
    const row = await this.records.findIn(instanceId, ['pausing', 'paused', 'resuming']);
    if (!row) return;
    await this.wake(row, row.spec ?? specOf(await this.profiles.get(row.organization_id, row.profile_id)));
  }

  /** The profile spec the room's live instance was made from; undefined when the room has none. */
  async liveSpec(organizationId: string, profileId: string, roomId: string): Promise<ProfileSpec | undefined> {
    const row = await this.records.findLive(organizationId, profileId, roomId);
    return row?.spec ?? undefined;
  }

  /**
   * A ready instance by its id alone (for the unauthenticated raw file endpoint), or
   * undefined; a paused one is resumed first, as for any file request.
   */
  async readyById(instanceId: string): Promise<{ row: InstanceRecord; spec: ProfileSpec } | undefined> {
    let row = await this.records.findIn(instanceId, ['ready', 'pausing', 'paused', 'resuming']);
    if (!row) return undefined;
    row = await this.onThisNode(row);
    const spec = row.spec ?? specOf(await this.profiles.get(row.organization_id, row.profile_id));
    row = await this.wake(row, spec);
    if (row.state !== 'ready') return undefined;
    await this.touch(row.id);
    return { row, spec };
  }

  /** The runtime instances run on; throws runtime_unavailable when there is none. */
  activeRuntime(): Runtime {
    return this.runtime();
  }

  /**
   * What the organization's running instances use of the host's memory now (MiB, as
   * host admission counts it); undefined when no runtime runs instances.
   */
  async memoryInUseMb(organizationId: string): Promise<number | undefined> {
    const selection = this.runtimeSelection;
    return 'runtime' in selection ? this.admission.inUseOf(this.db, selection.runtime, organizationId) : undefined;
  }

  /**
   * What one instance's machine uses now, as the runtime measures it: host memory (MiB)
   * and CPU time since it started (ms); each undefined when there is no machine to
   * measure (not started, paused, ended) or the runtime cannot say.
   */
  measuredUse(instanceId: string): { memoryMb: number | undefined; cpuMs: number | undefined } {
    const selection = this.runtimeSelection;
    if (!('runtime' in selection)) return { memoryMb: undefined, cpuMs: undefined };
    return { memoryMb: selection.runtime.memoryInUseMb(instanceId), cpuMs: selection.runtime.cpuUsedMs?.(instanceId) };
  }

  /** Whether the instance is ready now (not stopping, stopped or failed). */
  async isReady(instanceId: string): Promise<boolean> {
    return (await this.records.stateNow(instanceId)) === 'ready';
  }

  /** The instance's state now (undefined when there is no such instance). */
  async stateOf(instanceId: string): Promise<string | undefined> {
    return this.records.stateNow(instanceId);
  }

  /** Whether the instance runs: ready, or being resumed (its processes may already run again). */
  async isRunning(instanceId: string): Promise<boolean> {
    const state = await this.records.stateNow(instanceId);
    return state === 'ready' || state === 'resuming';
  }

  /** Adds a check of whether an instance is busy (a command runs, a terminal is open), which keeps it from going idle. */
  addBusyCheck(check: (instanceId: string) => boolean): void {
    this.busyChecks.push(check);
  }

  private busy(instanceId: string): boolean {
    return this.busyChecks.some((check) => check(instanceId));
  }

  /**
   * Subscribes to instances that begin to stop (deleted, expired, the service stopping
   * them, a pause) or whose machine ended by itself, before their machine is torn down:
   * what holds a connection into one (a terminal) can end it with the reason, or let it
   * go to be attached again after a pause that keeps memory.
   */
  onStopping(listener: StoppingListener): void {
    this.stoppingListeners.push(listener);
  }

  private notifyStopping(instanceId: string, why: EndReason, pause?: { keepsMemory: boolean }): void {
    for (const listener of this.stoppingListeners) {
      try {
        listener(instanceId, why, pause);
      } catch (err) {
        this.log.error({ instanceId, err }, 'a listener of stopping instances failed');
      }
    }
  }

  /** Records a command or file request, which keeps the instance from going idle. */
  async touch(instanceId: string): Promise<void> {
    await this.records.touch(instanceId);
  }

  /**
   * Stops ready instances that have lived longer than their lifetime limit, pauses (or,
   * with `idle_action: stop` or a runtime that cannot pause, stops) those idle longer
   * than their idle limit, and removes paused ones kept longer than their retention; the
   * reason goes into their state history. Returns the ids it stopped or paused.
   */
  async expire(now = Date.now()): Promise<string[]> {
    const expired = await this.expireRunning(now);
    const paused = await pausedWithRetention(this.db, this.nodeId);
    for (const row of paused) {
      const pausedS = (now - Date.parse(row.paused_at ?? row.updated_at)) / 1000;
      if (pausedS < row.paused_retention_s || this.pauses.isUnderway(row.id)) continue;
      const why: EndReason = { reason: `paused for longer than its retention of ${row.paused_retention_s} s`, code: 'retention' };
      this.log.info({ instanceId: row.id, reason: why.reason, reasonCode: why.code }, 'paused instance removed');
      try {
        await this.stop(row, why);
        expired.push(row.id);
      } catch (err) {
        this.log.warn({ instanceId: row.id, err }, 'could not remove a paused instance past its retention');
      }
    }
    return expired;
  }

  private async expireRunning(now: number): Promise<string[]> {
    const rows = await readyWithLimits(this.db, this.nodeId);
    const expired: string[] = [];
    for (const row of rows) {
      const age = (now - Date.parse(row.claimed_at ?? row.created_at)) / 1000;
      const idle = (now - Date.parse(row.last_active_at ?? row.created_at)) / 1000;
      let why: EndReason | undefined;
      if (row.max_lifetime_s > 0 && age >= row.max_lifetime_s) {
        why = { reason: `reached its lifetime limit of ${row.max_lifetime_s} s`, code: 'lifetime' };
      } else if (deadlinePassed(row, now)) {
        why = { reason: `its deadline of ${row.expires_at} passed (timeout_s ${row.timeout_s})`, code: 'timeout' };
      } else if (row.idle_timeout_s > 0 && idle >= row.idle_timeout_s && !this.busy(row.id)) {
        why = { reason: `idle for ${row.idle_timeout_s} s`, code: 'idle' };
      }
      if (!why) continue;
      this.log.info({ instanceId: row.id, reason: why.reason, reasonCode: why.code }, 'instance expired');
      try {
        const runtime = this.runtime();
        // A deadline does what the instance's create said, else what its profile does with an idle one.
        const action = why.code === 'timeout' ? (row.timeout_action ?? idleAction(row)) : idleAction(row);
        if ((why.code === 'idle' || why.code === 'timeout') && action === 'pause' && Pauses.supported(runtime)) await this.pauses.pause(runtime, row, why);
        else await this.stop(row, why);
        expired.push(row.id);
      } catch (err) {
        // Deleted or changed by a request in the meantime; the next check sees it as it is.
        this.log.warn({ instanceId: row.id, err }, 'could not stop an expired instance');
      }
    }
    return expired;
  }

  /** Checks the idle and lifetime limits every `intervalMs` until close(). */
  /** Runs `task` in every periodic expiry check, after the instances'. */
  alsoOnExpiryCheck(task: () => Promise<unknown>): void {
    this.alsoOnExpiry.push(task);
  }

  startExpiryChecks(intervalMs: number): void {
    let running = false;
    this.expiryTimer = setInterval(() => {
      if (running) return;
      running = true;
      this.expire()
        .then(() => this.memoryPressure.relieve())
        .then(() => this.cpuPressure.relieve())
        .then(async () => {
          for (const task of this.alsoOnExpiry) await task();
        })
        .catch((err: unknown) => this.log.error({ err }, 'expiry check failed'))
        .finally(() => (running = false));
    }, intervalMs);
    this.expiryTimer.unref();
  }

  private async stop(row: InstanceRecord, why: EndReason): Promise<void> {
    // Cancel provisioning first, so the runtime reports no further step once stopping.
    this.provisioning.get(row.id)?.abort.abort(new Error(why.reason));
    // A pause or resume under way ends first: the instance is then paused or ready, and stops from there.
    await this.pauses.settled(row.id);
    if (stateOf(row) !== 'stopping') await this.records.transition(row.id, 'stopping', why);
    this.notifyStopping(row.id, why);
    await this.records.markDeleted(row.id);
    await this.teardown(row.id, why);
  }

  /** What the runtime reports about an instance outside any request. */
  private onRuntimeEvent(event: RuntimeEvent): void {
    // The audit trail takes these (egress-audit.ts).
    if (event.type === 'egress') return;
    if (event.type === 'memory_kill') {
      // The commands it hit say so in their results; the instance lives on.
      this.log.warn({ instanceId: event.instanceId, kind: event.kind, commandIds: event.commandIds, detail: event.detail }, 'memory guard killed processes');
      return;
    }
    const done = this.machineExited(event)
      .catch((err: unknown) => this.log.error({ instanceId: event.instanceId, err }, 'could not record an instance whose machine ended'))
      .finally(() => this.ending.delete(event.instanceId));
    this.ending.set(event.instanceId, done);
  }

  /**
   * A ready instance's machine ended by itself: what is left of it is removed, then it
   * is recorded as failed, with whether memory was why. One being stopped or started
   * meanwhile is left to that.
   */
  private async machineExited(event: Extract<RuntimeEvent, { type: 'machine_exited' }>): Promise<void> {
    const id = event.instanceId;
    if ((await this.records.stateNow(id)) !== 'ready') return;
    const why: EndReason = { reason: event.detail, code: event.outOfMemory ? 'out_of_memory' : 'sandbox_exited' };
    this.log.warn({ instanceId: id, reason: why.reason, reasonCode: why.code }, 'instance machine ended by itself');
    this.notifyStopping(id, why);
    try {
      // Recorded as failed once nothing of it is left, not only once it stopped.
      await (await this.runtime().destroy(id)).released;
    } catch (err) {
      // Recorded anyway: the next start's sweep removes what is left.
      this.log.error({ instanceId: id, err }, 'could not remove what was left of an instance whose machine ended');
    }
    await this.records.transitionFrom(id, 'ready', 'failed', why);
  }

  /** The organization's instances, newest first (or oldest first: `oldestFirst`). */
  list(organizationId: string, options: ListOptions): Promise<InstancePage> {
    return this.records.list(organizationId, options);
  }

  /** Makes the host agree with the store after a start (see reconcile.ts). */
  async reconcile(): Promise<Reconciled> {
    const selection = this.runtimeSelection;
    if (!('runtime' in selection)) return { adopted: [], paused: [], failed: [], stopped: [], swept: [] };
    return reconcileWithHost({ db: this.db, nodeId: this.nodeId, records: this.records, runtime: selection.runtime, log: this.log });
  }

  /**
   * Cancels provisioning under way and waits for it to be undone; with `stop`, also
   * stops every ready instance (with `keep` they stay up, to be adopted next start).
   */
  async close(policy: 'keep' | 'stop' = 'keep'): Promise<void> {
    this.closing = true;
    if (this.expiryTimer) clearInterval(this.expiryTimer);
    await this.warmPool.close();
    const pending = [...this.provisioning.values()];
    for (const p of pending) p.abort.abort(new Error('the service is shutting down'));
    await Promise.allSettled([...pending.map((p) => p.done), ...this.ending.values(), this.pauses.settled()]);
    if (policy === 'stop') {
      // Paused instances hold no machine: they stay paused, for the next start.
      const queue = await liveStates(this.db, this.nodeId, LIVE_STATES.filter((state) => state !== 'paused'));
      const why: EndReason = { reason: 'the service shut down', code: 'service_stopped' };
      // A few at a time: one after another, 20 instances took 47 s to stop on 2 cores,
      // longer than `roomkit serve` lets a shutdown take before it exits.
      await Promise.all(
        Array.from({ length: Math.min(STOPS_AT_ONCE, queue.length) }, async () => {
          for (let row = queue.shift(); row; row = queue.shift()) {
            if (row.state !== 'stopping') await this.records.transition(row.id, 'stopping', why);
            this.notifyStopping(row.id, why);
            await this.teardown(row.id, why);
          }
        }),
      );
    }
  }

  private runtime(): Runtime {
    const selection = this.runtimeSelection;
    if ('unavailable' in selection) {
      throw new AppError('runtime_unavailable', `cannot create instances: ${selection.unavailable.reason}`);
    }
    return selection.runtime;
  }

  /**
   * The spec of a new instance of a profile: the profile's, or for a `template:NAME`
   * image the template's last good image under it (template_not_found or
   * template_unusable when it has none).
   */
  private async specFromImage(organizationId: string, spec: ProfileSpec): Promise<ProfileSpec> {
    const name = templateNameOf(spec.image);
    if (name === undefined) return spec;
    if (!this.templates) throw new AppError('feature_unavailable', 'this server builds no templates');
    return templateInstanceSpec(spec, name, await this.templates.source(organizationId, name));
  }

  private async provision(
    runtime: Runtime,
    row: InstanceRecord,
    spec: ReturnType<typeof specOf>,
    signal: AbortSignal,
    log: Logger,
  ): Promise<void> {
    const started = performance.now();
    let stepStarted = started;
    // Progress writes are chained, and each step waits for them, so a late progress
    // message never lands after the state it described has ended.
    let progressWritten: Promise<unknown> = Promise.resolve();
    try {
      await runtime.provision({
        instanceId: row.id,
        organizationId: row.organization_id,
        profileId: row.profile_id,
        roomId: row.room_id,
        spec: machineSpecOf(spec),
        // A snapshot's files, or those of the template the instance was made from.
        ...fromFiles(row.snapshot_id ?? templateLayerOf(spec)),
        signal,
        log,
        onStep: async (step: ProvisionStep, note?: ProvisionNote) => {
          signal.throwIfAborted();
          // A template's start command runs before the instance is ready.
          if (step === 'ready') await startTemplateCommand(runtime, row.id, spec, { ...spec.env, ...envOf(row) }, log);
          await progressWritten;
          await this.records.transition(row.id, step, note);
          const now = performance.now();
          this.metrics?.instancePhase(step, (now - stepStarted) / 1000);
          stepStarted = now;
          log.info({ state: step, elapsedMs: Math.round(now - started) }, 'instance state');
        },
        onProgress: (message: string) => {
          // Best effort: a failed write is logged, never fails provisioning.
          progressWritten = progressWritten.then(() =>
            this.records.setProgress(row.id, message).catch((err: unknown) => log.warn({ err }, 'could not record progress')),
          );
        },
      });
      this.metrics?.instanceCreateEnded('ready', (performance.now() - started) / 1000);
    } catch (err) {
      await progressWritten;
      if (signal.aborted && !this.closing) {
        // Deleted while starting: the delete records the state from here on.
        log.info('instance provisioning cancelled');
        this.metrics?.instanceCreateEnded('cancelled', (performance.now() - started) / 1000);
        return;
      }
      this.metrics?.instanceCreateEnded('failed', (performance.now() - started) / 1000);
      const reason = this.closing
        ? 'the service shut down while the instance was starting'
        : err instanceof Error
          ? err.message
          : String(err);
      log.warn({ reason }, 'instance failed to start');
      await this.fail(row.id, { reason, code: this.closing ? 'service_stopped' : 'provision_failed' });
    }
  }

  /** Waits (when asked) for provisioning to end, then reports the instance as it is. */
  private async settle(row: InstanceRecord, wait: boolean): Promise<Instance> {
    if (wait) await this.provisioning.get(row.id)?.done;
    const instance = await this.records.view(await this.records.getRow(row.id));
    if (wait && instance.state === 'failed') {
      throw new AppError('instance_start_failed', `instance ${instance.instance_id} failed to start: ${instance.failure_reason}`, {
        instance_id: instance.instance_id,
        state_history: instance.state_history,
      });
    }
    return instance;
  }

  private async teardown(instanceId: string, why: EndReason): Promise<void> {
    await this.provisioning.get(instanceId)?.done;
    await this.ending.get(instanceId);
    const runtime = this.runtimeSelection;
    try {
      // `stopped` once the machine is; the release that follows is the runtime's to finish
      // (its close() waits for it, its sweep after a crash completes it).
      // Only from `stopping`: an instance stopped while it started may have been recorded
      // `failed` by its start meanwhile (which released it), and that record stands.
      if ('runtime' in runtime) await runtime.runtime.destroy(instanceId);
      await this.records.transitionFrom(instanceId, 'stopping', 'stopped', why);
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      this.log.error({ instanceId, err }, 'instance teardown failed');
      await this.records.transitionFrom(instanceId, 'stopping', 'failed', { reason: `teardown failed: ${message}`, code: 'teardown_failed' });
    }
  }

  private async fail(instanceId: string, why: EndReason): Promise<void> {
    await this.records.transition(instanceId, 'failed', why);
  }


}

/** The idle action of the profile the instance was made from (`pause` for rows made before it existed). */
function idleAction(row: InstanceRecord): 'pause' | 'stop' {
  return row.spec?.idle_action ?? 'pause';
}

/** instance_lost: the instance's node was declared lost; its room takes a new instance. */
function instanceLost(row: InstanceRecord): AppError {
  return new AppError(
    'instance_lost',
    `instance ${row.id} was lost with its node ${row.node_id}: what ran in it is gone`,
    { instance_id: row.id, node_id: row.node_id, state: row.state },
    { code: 'create_new_instance', profile_id: row.profile_id, room_id: row.room_id },
  );
}

function notReady(row: InstanceRecord): AppError {
  const room = { profile_id: row.profile_id, room_id: row.room_id };
  return row.state === 'failed'
    ? new AppError('instance_not_ready', `the room's instance failed (${row.failure_reason})`, { instance_id: row.id, state: row.state }, { code: 'recreate_failed_instance', ...room })
    : new AppError('instance_not_ready', `the room's instance is ${row.state}, not ready`, { instance_id: row.id, state: row.state }, { code: 'wait_until_ready', ...room });
}

export function instanceNotFound(profileId: string, roomId: string): AppError {
  return new AppError('instance_not_found', `no instance in room "${roomId}" of profile ${profileId}`, undefined, { code: 'create_instance', profile_id: profileId, room_id: roomId });
}

function fromFiles(snapshotId: string | undefined): { fromSnapshot?: string } {
  return snapshotId === undefined ? {} : { fromSnapshot: snapshotId };
}

/** The spec of an instance started from a snapshot: the profile's, with the machine the snapshot's files need. */
function fromSnapshotSpec(profile: ProfileSpec, source: ProfileSpec): ProfileSpec {
  const { image, packages, user, home, disk_mb, keep_undo } = source;
  return { ...profile, image, packages, user, home, disk_mb, keep_undo };
}

/** The Error for a room that has a live instance where a new one was asked for. */
export function roomOccupied(row: InstanceRecord, asked: string): AppError {
  const from = row.snapshot_id ? `started from snapshot ${row.snapshot_id}` : 'started from its profile\'s image';
  return new AppError(
    'room_occupied',
    `room "${row.room_id}" already has an instance (${row.id}, ${from}, ${row.state})`,
    { instance_id: row.id, room_id: row.room_id },
    { code: 'delete_instance_first', profile_id: row.profile_id, room_id: row.room_id, asked },
  );
}
