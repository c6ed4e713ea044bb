// The nodes sharing a PostgreSQL store: every `roomkit serve` on one is a node. A node
// registers itself when it starts listening (its id, the address other nodes reach it at,
// what it offers), says it is alive every ROOMKIT_NODE_HEARTBEAT_MS with what it carries,
// and leaves on a clean shutdown. Every node also looks for nodes silent for longer than
// ROOMKIT_NODE_LOST_AFTER_MS and declares them lost; the store decides who does: the
// update that moves a node to `lost` is conditional on it being silent and not lost yet,
// so of several nodes that look at once, exactly one changes the row and hears it back.
// An operator may drain a node (no creates placed on it; it keeps that state across a
// restart) and make it active again. A lost node that comes back finds itself `lost` and registers again; what it ran was
// recorded `lost` meanwhile (core/lost-nodes.ts), and it removes what its host still
// holds of those instances instead of adopting them.
import { sql } from 'kysely';
import type { Logger } from 'pino';
import { AppError } from '../errors.ts';
import { nowIso } from '../lib/time.ts';
import type { Db } from '../store/db.ts';
import type { NodeRow } from '../store/schema.ts';
import { type NodeInfo, type NodeState } from './node-schema.ts';

export interface NodeCapacity {
  memory_mb: number;
  vcpus: number;
  disk_mb: number;
}

export interface NodeLoad {
  instances: number;
  memory_in_use_mb: number;
}

export interface NodeRegistryOptions {
  db: Db;
  log: Logger;
  nodeId: string;
  version: string;
  heartbeatMs: number;
  lostAfterMs: number;
  /** What this node offers and carries now, said at each heartbeat. */
  measure(): Promise<{ capacity: NodeCapacity; load: NodeLoad }>;
  /** After each look for silent nodes: settles what lost nodes left (their instances). */
  settleLost?(): Promise<unknown>;
  /** After this node joined again, having been declared lost: removes what it no longer owns. */
  rejoined?(): Promise<unknown>;
  now?: () => number;
}

export class NodeRegistry {
  readonly nodeId: string;
  private readonly options: NodeRegistryOptions;
  private readonly now: () => number;
  private timer: NodeJS.Timeout | undefined;
  private beating: Promise<void> | undefined;
  private joinedAt: string | undefined;

  constructor(options: NodeRegistryOptions) {
    this.options = options;
    this.nodeId = options.nodeId;
    this.now = options.now ?? Date.now;
  }

  /** Where other nodes reach this one, once it joined. */
  get url(): string | undefined {
    return this.joinedAt;
  }

  /** Registers this node at `url` (again, after a restart or a loss) and starts its heartbeats. */
  async join(url: string): Promise<void> {
    this.joinedAt = url;
    const { capacity, load } = await this.options.measure();
    const at = new Date(this.now()).toISOString();
    const row = {
      url,
      state: 'active' as NodeState,
      version: this.options.version,
      started_at: at,
      heartbeat_at: at,
      lost_at: null,
      lost_by: null,
      capacity: JSON.stringify(capacity),
      load: JSON.stringify(load),
    };
    await this.options.db
      .insertInto('nodes')
      .values({ id: this.nodeId, ...row })
      // A node drained before it stopped stays draining when it starts again.
      .onConflict((oc) => oc.column('id').doUpdateSet({ ...row, state: sql<NodeState>`case when nodes.state = 'draining' then 'draining' else 'active' end` }))
      .execute();
    this.options.log.info({ nodeId: this.nodeId, url }, 'node joined');
    this.timer = setInterval(() => {
      this.beating ??= this.beat().finally(() => (this.beating = undefined));
    }, this.options.heartbeatMs);
    this.timer.unref();
  }

  /** One heartbeat, then a look for silent nodes. A failure is logged, and the next beat tries again. */
  private async beat(): Promise<void> {
    try {
      const { capacity, load } = await this.options.measure();
      const updated = await this.options.db
        .updateTable('nodes')
        .set({ heartbeat_at: new Date(this.now()).toISOString(), capacity: JSON.stringify(capacity), load: JSON.stringify(load) })
        .where('id', '=', this.nodeId)
        .where('state', 'in', ['active', 'draining'])
        .executeTakeFirst();
      if (Number(updated.numUpdatedRows) === 0 && this.joinedAt !== undefined) {
        // Declared lost while it was silent (or its row removed): it joins again.
        this.options.log.warn({ nodeId: this.nodeId }, 'this node was declared lost while it was silent; it joins again');
        this.stopBeats();
        await this.join(this.joinedAt);
        await this.options.rejoined?.();
      }
      await this.declareLost();
      await this.options.settleLost?.();
    } catch (err) {
      this.options.log.error({ err, nodeId: this.nodeId }, 'node heartbeat failed');
    }
  }

  /** Declares every node silent past the limit lost; the ids this node declared. */
  async declareLost(): Promise<string[]> {
    const cutoff = new Date(this.now() - this.options.lostAfterMs).toISOString();
    const lost = await this.options.db
      .updateTable('nodes')
      .set({ state: 'lost', lost_at: new Date(this.now()).toISOString(), lost_by: this.nodeId })
      .where('state', 'in', ['active', 'draining'])
      .where('heartbeat_at', '<', cutoff)
      .where('id', '!=', this.nodeId)
      .returning('id')
      .execute();
    for (const { id } of lost) this.options.log.warn({ nodeId: id, declaredBy: this.nodeId, silentForMs: this.options.lostAfterMs }, 'node declared lost');
    return lost.map((r) => r.id);
  }

  /**
   * Drains a node (`draining`: no create is placed on it any more, its instances run on)
   * or makes a drained one take creates again (`active`). node_not_found for an unknown
   * id, node_not_active for one that is lost or left.
   */
  async setState(nodeId: string, state: 'draining' | 'active'): Promise<NodeInfo> {
    const updated = await this.options.db.updateTable('nodes').set({ state }).where('id', '=', nodeId).where('state', 'in', ['active', 'draining']).returningAll().executeTakeFirst();
    if (updated !== undefined) {
      this.options.log.info({ nodeId, state, by: this.nodeId }, state === 'draining' ? 'node drained' : 'node active again');
      return this.info(updated);
    }
    const row = await this.options.db.selectFrom('nodes').select('state').where('id', '=', nodeId).executeTakeFirst();
    if (row === undefined) throw new AppError('node_not_found', `no node ${nodeId} in this store; roomkit nodes lists them`);
    throw new AppError('node_not_active', `node ${nodeId} is ${row.state}: only an active or draining node can be ${state === 'draining' ? 'drained' : 'made active'}; it becomes active when it starts again`, { state: row.state });
  }

  /** Every node the store knows, newest heartbeat first. */
  async list(): Promise<NodeInfo[]> {
    const rows = await this.options.db.selectFrom('nodes').selectAll().orderBy('heartbeat_at', 'desc').execute();
    return rows.map((row) => this.info(row));
  }

  private info(row: NodeRow): NodeInfo {
    return {
      node_id: row.id,
      url: row.url,
      state: row.state as NodeState,
      version: row.version,
      started_at: row.started_at,
      heartbeat_at: row.heartbeat_at,
      heartbeat_age_ms: Math.max(0, this.now() - Date.parse(row.heartbeat_at)),
      lost_at: row.lost_at,
      lost_by: row.lost_by,
      capacity: JSON.parse(row.capacity) as NodeCapacity,
      load: JSON.parse(row.load) as NodeLoad,
    };
  }

  private stopBeats(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** A clean shutdown: no more heartbeats, and the node is recorded as having left. */
  async leave(): Promise<void> {
    this.stopBeats();
    await this.beating;
    if (this.joinedAt === undefined) return;
    await this.options.db.updateTable('nodes').set({ state: 'left', heartbeat_at: nowIso() }).where('id', '=', this.nodeId).where('state', '!=', 'lost').execute();
    this.options.log.info({ nodeId: this.nodeId }, 'node left');
  }
}
