// Placement: which node of a shared store a new instance should start on. Every live
// node is ranked from what the store knows: first the nodes holding a warm instance of
// the profile (a create there takes it at once), then those that ran the profile
// before (its image is likely built there: a first create elsewhere builds it), then
// by memory free, as the node said at its last heartbeat less an estimate for every
// instance placed on it since (so that a burst of creates between two heartbeats
// spreads instead of piling onto the node that looked emptiest). Free memory is
// compared in steps of FREE_STEP_MB, and within a step the node that answers is
// preferred: it costs no hop.
//
// The ranking is advice read without locks; what commits is the chosen node's own
// admission, which runs one at a time on that node and answers 503 capacity_exhausted
// when the host cannot carry one more (the caller then tries the next node), and the
// store's unique index of a room's live instance, which lets two nodes racing to
// create one room make one instance. So no host is overcommitted and no room doubled,
// whoever decides.
import type { Db } from '../store/db.ts';
import { LIVE_STATES } from './lifecycle.ts';

/** Nodes whose free memory differs by less than this rank alike (and the answering node goes first among them). */
export const FREE_STEP_MB = 256;
/** What an instance placed since a node's last heartbeat is taken to use until the node measures it. */
export const PLACED_ESTIMATE_MB = 128;

export interface PlacementCandidate {
  nodeId: string;
  url: string;
  /** Warm instances of the profile it holds. */
  warm: number;
  /** Whether it ran an instance of the profile before (its image is likely built there). */
  ranProfile: boolean;
  /** Memory it has free, estimated: what it said at its heartbeat less PLACED_ESTIMATE_MB per instance placed since. */
  freeMb: number;
  /** Live instances it carries, as it said plus those placed since. */
  instances: number;
}

export interface PlacementInput {
  db: Db;
  /** The node that decides (it answers the create). */
  selfId: string;
  /** The profile the instance is made from; undefined when not known yet (ranked by load alone). */
  profileId: string | undefined;
  /** Nodes silent for longer are not candidates (ROOMKIT_NODE_LOST_AFTER_MS). */
  lostAfterMs: number;
  now?: number;
}

/** The live nodes, best first. Empty when the store knows no live node (the caller creates here). */
export async function rankNodes(input: PlacementInput): Promise<PlacementCandidate[]> {
  const { db, selfId, profileId } = input;
  const cutoff = new Date((input.now ?? Date.now()) - input.lostAfterMs).toISOString();
  const nodes = await db.selectFrom('nodes').select(['id', 'url', 'capacity', 'load', 'heartbeat_at']).where('state', '=', 'active').where('heartbeat_at', '>=', cutoff).execute();
  if (nodes.length === 0) return [];
  const ids = nodes.map((n) => n.id);
  const placedSince = await db
    .selectFrom('instances')
    .innerJoin('nodes', 'nodes.id', 'instances.node_id')
    .select(['instances.node_id as nodeId', ({ fn }) => fn.countAll<number>().as('n')])
    .where('instances.node_id', 'in', ids)
    .where('instances.state', 'in', LIVE_STATES)
    .whereRef('instances.created_at', '>', 'nodes.heartbeat_at')
    .groupBy('instances.node_id')
    .execute();
  const warm =
    profileId === undefined
      ? []
      : await db
          .selectFrom('instances')
          .select(['node_id as nodeId', ({ fn }) => fn.countAll<number>().as('n')])
          .where('node_id', 'in', ids)
          .where('profile_id', '=', profileId)
          .where('warm_pool_key', 'is not', null)
          .where('state', '=', 'ready')
          .groupBy('node_id')
          .execute();
  const ran =
    profileId === undefined
      ? []
      : await db.selectFrom('instances').select('node_id as nodeId').distinct().where('node_id', 'in', ids).where('profile_id', '=', profileId).execute();
  const count = (rows: { nodeId: string | null; n?: number }[], id: string) => Number(rows.find((r) => r.nodeId === id)?.n ?? 0);
  const candidates = nodes.map((node): PlacementCandidate & { self: boolean } => {
    const capacity = JSON.parse(node.capacity) as { memory_mb?: number };
    const load = JSON.parse(node.load) as { instances?: number; memory_in_use_mb?: number };
    const placed = count(placedSince, node.id);
    return {
      nodeId: node.id,
      url: node.url,
      warm: count(warm, node.id),
      ranProfile: ran.some((r) => r.nodeId === node.id),
      freeMb: (capacity.memory_mb ?? 0) - (load.memory_in_use_mb ?? 0) - placed * PLACED_ESTIMATE_MB,
      instances: (load.instances ?? 0) + placed,
      self: node.id === selfId,
    };
  });
  candidates.sort(
    (x, y) =>
      Number(y.warm > 0) - Number(x.warm > 0) ||
      Number(y.ranProfile) - Number(x.ranProfile) ||
      Math.floor(y.freeMb / FREE_STEP_MB) - Math.floor(x.freeMb / FREE_STEP_MB) ||
      Number(y.self) - Number(x.self) ||
      x.instances - y.instances ||
      x.nodeId.localeCompare(y.nodeId),
  );
  return candidates.map(({ self: _self, ...candidate }) => candidate);
}

/**
 * Where a create for a room should go, best first; empty when it should be answered
 * where it arrived: the room has a live instance already (the create finds it), or
 * no node is known live. A create from a snapshot goes to the node that keeps the
 * snapshot's files (the only one that can start it).
 */
export async function placementFor(input: PlacementInput & { roomId: string; snapshotId?: string }): Promise<PlacementCandidate[]> {
  const live = await input.db
    .selectFrom('instances')
    .select('id')
    .where('profile_id', '=', input.profileId ?? '')
    .where('room_id', '=', input.roomId)
    .where('state', 'in', LIVE_STATES)
    .where('deleted_at', 'is', null)
    .executeTakeFirst();
  if (live !== undefined) return [];
  const ranked = await rankNodes(input);
  if (input.snapshotId === undefined) return ranked;
  const snapshot = await input.db.selectFrom('snapshots').select('node_id').where('id', '=', input.snapshotId).executeTakeFirst();
  return ranked.filter((c) => c.nodeId === snapshot?.node_id);
}
