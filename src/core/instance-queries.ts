// The reads other services make over many instances at once: what live instances were
// granted (quotas, admission, /metrics), the ones due for an expiry check, a shutdown or
// the start's reconcile, and a warm pool's members. Rows come out decoded
// (stored-json.ts); the record of one instance and every write are instance-records.ts.
// What concerns a host (its admission, its expiry checks, its reconcile, its warm pools)
// reads only the instances of its node (`nodeId`); quotas read an organization's on
// every node.
import type { Db } from '../store/db.ts';
import type { InstanceResources } from './instance-schema.ts';
import { type InstanceState, LIVE_STATES, TERMINAL_STATES } from './lifecycle.ts';
import { decodeInstance, decodeResources, type InstanceRecord } from './stored-json.ts';

/** What each live instance was granted, with its state: of one organization, of one node, of both, or of all. */
export async function liveResources(
  db: Db,
  scope: { organizationId?: string; nodeId?: string } = {},
): Promise<{ id: string; state: string; resources: InstanceResources; memoryKept: boolean }[]> {
  let query = db.selectFrom('instances').select(['id', 'state', 'resources', 'paused_memory_kept']).where('state', 'in', LIVE_STATES);
  if (scope.organizationId !== undefined) query = query.where('organization_id', '=', scope.organizationId);
  if (scope.nodeId !== undefined) query = query.where('node_id', '=', scope.nodeId);
  const rows = await query.execute();
  return rows.map((r) => ({ id: r.id, state: r.state, resources: decodeResources(r.resources, `instance ${r.id}`), memoryKept: r.paused_memory_kept === 1 }));
}

/** The node's live instances' ids and states, of those in `states` (every live state when not given). */
export async function liveStates(db: Db, nodeId: string, states: readonly InstanceState[] = LIVE_STATES): Promise<{ id: string; state: string }[]> {
  return db.selectFrom('instances').select(['id', 'state']).where('node_id', '=', nodeId).where('state', 'in', states).execute();
}

/** Every live instance of the node (the start's reconcile). */
export async function liveInstances(db: Db, nodeId: string): Promise<InstanceRecord[]> {
  return (await db.selectFrom('instances').selectAll().where('node_id', '=', nodeId).where('state', 'in', LIVE_STATES).execute()).map(decodeInstance);
}

/** The node's paused instances that have a retention limit. */
export async function pausedWithRetention(db: Db, nodeId: string): Promise<InstanceRecord[]> {
  return (
    await db.selectFrom('instances').selectAll().where('node_id', '=', nodeId).where('state', '=', 'paused').where('paused_retention_s', '>', 0).execute()
  ).map(decodeInstance);
}

/** The node's ready instances in a room that have an idle limit, a lifetime limit or a deadline. */
export async function readyWithLimits(db: Db, nodeId: string): Promise<InstanceRecord[]> {
  const rows = await db
    .selectFrom('instances')
    .selectAll()
    .where('node_id', '=', nodeId)
    .where('state', '=', 'ready')
    // A pooled instance is in no room yet: its limits count from when a room takes it.
    .where('warm_pool_key', 'is', null)
    .where((eb) => eb.or([eb('idle_timeout_s', '>', 0), eb('max_lifetime_s', '>', 0), eb('expires_at', 'is not', null)]))
    .execute();
  return rows.map(decodeInstance);
}

/** How many live instances of the profile are in rooms (its warm pool's are not). */
export async function liveInRooms(db: Db, profileId: string): Promise<number> {
  const row = await db
    .selectFrom('instances')
    .select(({ fn }) => fn.countAll<number>().as('n'))
    .where('profile_id', '=', profileId)
    .where('state', 'in', LIVE_STATES)
    .where('warm_pool_key', 'is', null)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/** The live warm pool instances of these profiles: each one's profile, state and pool key. */
export async function pooledOf(db: Db, profileIds: string[]): Promise<{ profile_id: string; state: string; warm_pool_key: string | null }[]> {
  if (profileIds.length === 0) return [];
  return db
    .selectFrom('instances')
    .select(['profile_id', 'state', 'warm_pool_key'])
    .where('profile_id', 'in', profileIds)
    .where('warm_pool_key', 'is not', null)
    .where('state', 'in', LIVE_STATES)
    .execute();
}

/** How many live instances sit in warm pools on the node's host. */
export async function pooledCount(db: Db, nodeId: string): Promise<number> {
  const row = await db
    .selectFrom('instances')
    .select(({ fn }) => fn.countAll<number>().as('n'))
    .where('node_id', '=', nodeId)
    .where('warm_pool_key', 'is not', null)
    .where('state', 'in', LIVE_STATES)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/** The profiles (with their organizations) that have live warm pool instances on the node. */
export async function profilesWithPooled(db: Db, nodeId: string): Promise<{ profile_id: string; organization_id: string }[]> {
  return db
    .selectFrom('instances')
    .select(['profile_id', 'organization_id'])
    .distinct()
    .where('node_id', '=', nodeId)
    .where('warm_pool_key', 'is not', null)
    .where('state', 'in', LIVE_STATES)
    .execute();
}

/**
 * The node's warm pool instances still in their pool (not retired, not stopping): of one
 * profile, or of one organization, or of every organization; oldest first, or newest
 * with `newestFirst`.
 */
export async function poolMembers(
  db: Db,
  nodeId: string,
  scope: { profileId: string } | { organizationId: string } | '*',
  retired: string,
  newestFirst = false,
): Promise<InstanceRecord[]> {
  let query = db
    .selectFrom('instances')
    .selectAll()
    .where('node_id', '=', nodeId)
    .where('warm_pool_key', 'is not', null)
    .where('warm_pool_key', '!=', retired)
    .where('state', 'in', LIVE_STATES)
    .where('state', '!=', 'stopping');
  if (scope !== '*' && 'profileId' in scope) query = query.where('profile_id', '=', scope.profileId);
  if (scope !== '*' && 'organizationId' in scope) query = query.where('organization_id', '=', scope.organizationId);
  // Instances made in the same millisecond are ordered by id: without it each store breaks the tie its own way.
  const order = newestFirst ? 'desc' : 'asc';
  return (await query.orderBy('created_at', order).orderBy('id', order).execute()).map(decodeInstance);
}

/** The oldest ready instance in the profile's warm pool on the node made for `key`, for a room to claim. */
export async function oldestPooled(db: Db, nodeId: string, organizationId: string, profileId: string, key: string): Promise<InstanceRecord | undefined> {
  const row = await db
    .selectFrom('instances')
    .selectAll()
    .where('node_id', '=', nodeId)
    .where('organization_id', '=', organizationId)
    .where('profile_id', '=', profileId)
    .where('warm_pool_key', '=', key)
    .where('state', '=', 'ready')
    .orderBy('created_at')
    .orderBy('id')
    .executeTakeFirst();
  return row === undefined ? undefined : decodeInstance(row);
}

/**
 * The node that runs the room's current instance (its live one, or the last one if it
 * failed or was lost), with where it is reached and its state; undefined for a room
 * with none or an instance of no node. Any organization's: a profile id is unique.
 */
export async function nodeOfRoom(db: Db, profileId: string, roomId: string): Promise<{ nodeId: string; url: string; state: string } | undefined> {
  const row = await db
    .selectFrom('instances')
    .innerJoin('nodes', 'nodes.id', 'instances.node_id')
    .select(['nodes.id as nodeId', 'nodes.url as url', 'nodes.state as state'])
    .where('instances.profile_id', '=', profileId)
    .where('instances.room_id', '=', roomId)
    .where('instances.deleted_at', 'is', null)
    .where('instances.state', '!=', 'stopped')
    .orderBy('instances.created_at', 'desc')
    .orderBy('instances.id', 'desc')
    .executeTakeFirst();
  return row;
}

/** The node that runs the instance, with where it is reached and its state; undefined for an unknown id or an instance of no node. */
export async function nodeOfInstance(db: Db, instanceId: string): Promise<{ nodeId: string; url: string; state: string } | undefined> {
  return db
    .selectFrom('instances')
    .innerJoin('nodes', 'nodes.id', 'instances.node_id')
    .select(['nodes.id as nodeId', 'nodes.url as url', 'nodes.state as state'])
    .where('instances.id', '=', instanceId)
    .executeTakeFirst();
}

/** Ids of instances that ended (stopped or failed), as a subquery. */
export function endedIds(db: Db) {
  return db.selectFrom('instances').select('id').where('state', 'in', TERMINAL_STATES);
}
