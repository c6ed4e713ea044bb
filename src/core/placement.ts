// Placement: which node of a shared store a new instance should start on. Every live
// node is ranked from what the store knows: first the nodes holding a warm instance of
// the profile (a create there takes it at once), then by memory free, as the node said
// at its last heartbeat less an estimate for every instance placed on it since (so
// that a burst of creates between two heartbeats spreads instead of piling onto the
// node that looked emptiest), compared in steps of FREE_STEP_MB; among nodes alike in
// that, one that ran the profile before (its image is likely built there: a first
// create elsewhere builds it, tens of seconds). Nodes alike in all three are taken in
// random order, so that creates decided at the same moment on several nodes, which
// all see the same figures, spread over them rather than all pick one.
//
// The ranking is advice read without locks; what commits is the chosen node's own
// admission, which runs one at a time on that node and answers 503 capacity_exhausted
// when the host cannot carry one more (the caller then tries the next node), and the
// store's unique index of a room's live instance, which lets two nodes racing to
// create one room make one instance. So no host is overcommitted and no room doubled,
// whoever decides.
import type { Db } from '../store/db.ts';
import { templateNameOf } from './dockerfile-parser.ts';
import { LIVE_STATES } from './lifecycle.ts';

/** Free memory is compared in steps of this: nodes within one step rank alike. */
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
  /** The profile the instance is made from; undefined when not known yet (ranked by load alone). */
  profileId: string | undefined;
  /** Nodes silent for longer are not candidates (ROOMKIT_NODE_LOST_AFTER_MS). */
  lostAfterMs: number;
  now?: number;
  /** Draws the order of nodes alike (0 ≤ x < 1); Math.random unless a test gives one. */
  random?: () => number;
}

/** The live nodes, best first. Empty when the store knows no live node (the caller creates here). */
export async function rankNodes(input: PlacementInput): Promise<PlacementCandidate[]> {
  const { db, profileId } = input;
  const cutoff = new Date((input.now ?? Date.now()) - input.lostAfterMs).toISOString();
  // One statement: each live node with what was placed on it since its heartbeat, its
  // warm instances of the profile and whether it ran the profile.
  const profile = profileId ?? '';
  const nodes = await db
    .selectFrom('nodes')
    .select((eb) => [
      'nodes.id',
      'nodes.url',
      'nodes.capacity',
      'nodes.load',
      eb
        .selectFrom('instances')
        .select(eb.fn.countAll<number>().as('n'))
        .whereRef('instances.node_id', '=', 'nodes.id')
        .where('instances.state', 'in', LIVE_STATES)
        .whereRef('instances.created_at', '>', 'nodes.heartbeat_at')
        .as('placed'),
      eb
        .selectFrom('instances')
        .select(eb.fn.countAll<number>().as('n'))
        .whereRef('instances.node_id', '=', 'nodes.id')
        .where('instances.profile_id', '=', profile)
        .where('instances.warm_pool_key', 'is not', null)
        .where('instances.state', '=', 'ready')
        .as('warm'),
      // One row is enough to know (a node's history of a profile may be long).
      eb.selectFrom('instances').select('instances.id').whereRef('instances.node_id', '=', 'nodes.id').where('instances.profile_id', '=', profile).limit(1).as('ran'),
    ])
    .where('nodes.state', '=', 'active')
    .where('nodes.heartbeat_at', '>=', cutoff)
    .execute();
  if (nodes.length === 0) return [];
  const candidates = nodes.map((node): PlacementCandidate => {
    const capacity = JSON.parse(node.capacity) as { memory_mb?: number };
    const load = JSON.parse(node.load) as { instances?: number; memory_in_use_mb?: number };
    const placed = Number(node.placed ?? 0);
    return {
      nodeId: node.id,
      url: node.url,
      warm: Number(node.warm ?? 0),
      ranProfile: node.ran !== null && node.ran !== undefined,
      freeMb: (capacity.memory_mb ?? 0) - (load.memory_in_use_mb ?? 0) - placed * PLACED_ESTIMATE_MB,
      instances: (load.instances ?? 0) + placed,
    };
  });
  // What ranks a node: a tier (warm, then free memory's step, then the profile ran
  // there), and within a tier a random draw.
  const tier = (c: PlacementCandidate) => [Number(c.warm > 0), Math.floor(c.freeMb / FREE_STEP_MB), Number(c.ranProfile)];
  const draws = new Map(candidates.map((c) => [c.nodeId, (input.random ?? Math.random)()]));
  candidates.sort((x, y) => {
    const [tx, ty] = [tier(x), tier(y)];
    for (let i = 0; i < tx.length; i++) if (tx[i] !== ty[i]) return ty[i]! - tx[i]!;
    return draws.get(x.nodeId)! - draws.get(y.nodeId)!;
  });
  return candidates;
}

/**
 * Where a create for a room should go, best first; empty when it should be answered
 * where it arrived: the room has a live instance already (the create finds it), or
 * no node is known live. A create from a snapshot goes to the node that keeps the
 * snapshot's files, and one of a template's profile to the node that built the
 * template (the only ones that can start them); none when that node is not live.
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
  // A snapshot's files, and a template's layers, are kept by one node: only it can start them.
  const pinned = input.snapshotId !== undefined ? await snapshotNode(input.db, input.snapshotId) : await templateNode(input.db, input.profileId);
  return pinned === undefined ? ranked : ranked.filter((c) => c.nodeId === pinned.nodeId);
}

async function snapshotNode(db: Db, snapshotId: string): Promise<{ nodeId: string | null }> {
  const row = await db.selectFrom('snapshots').select('node_id').where('id', '=', snapshotId).executeTakeFirst();
  return { nodeId: row?.node_id ?? null };
}

/** For a profile of a template (`template:NAME`), the node that built its image; undefined for any other profile. */
async function templateNode(db: Db, profileId: string | undefined): Promise<{ nodeId: string | null } | undefined> {
  if (profileId === undefined) return undefined;
  const profile = await db.selectFrom('profiles').select(['organization_id', 'spec']).where('id', '=', profileId).executeTakeFirst();
  const image = profile === undefined ? undefined : (JSON.parse(profile.spec) as { image?: unknown }).image;
  const name = typeof image === 'string' ? templateNameOf(image) : undefined;
  if (profile === undefined || name === undefined) return undefined;
  const build = await db
    .selectFrom('templates')
    .innerJoin('template_builds', 'template_builds.id', 'templates.ready_build_id')
    .select('template_builds.node_id')
    .where('templates.organization_id', '=', profile.organization_id)
    .where('templates.name', '=', name)
    .where('templates.deleted_at', 'is', null)
    .executeTakeFirst();
  return { nodeId: build?.node_id ?? null };
}
