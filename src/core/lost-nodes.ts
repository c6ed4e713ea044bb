// What becomes of the instances of a node that was declared lost (cluster/node-registry.ts).
// Any node settles them, at each of its heartbeats: every live instance recorded on a
// lost node becomes `lost` (reason code `node_lost`), which frees its room at once, and
// the commands it was running are recorded as interrupted. The move is conditional on
// the state it read, so nodes settling at once never move one twice, and one that dies
// half way leaves the rest to the next heartbeat of any node. Nothing of the instance
// is on the settling node's host: the lost node removes what its host still holds when
// it comes back (releaseLost), instead of adopting it.
import type { Logger } from 'pino';
import { nowIso } from '../lib/time.ts';
import type { Runtime } from '../runtimes/types.ts';
import type { Db } from '../store/db.ts';
import type { InstanceRecords } from './instance-records.ts';
import { type InstanceState, LIVE_STATES } from './lifecycle.ts';

/** Records every live instance of a lost node as `lost`; the ids it moved. */
export async function settleLostNodes(deps: { db: Db; records: InstanceRecords; log: Logger }): Promise<string[]> {
  const { db, records, log } = deps;
  const rows = await db
    .selectFrom('instances')
    .innerJoin('nodes', 'nodes.id', 'instances.node_id')
    .select(['instances.id as id', 'instances.state as state', 'nodes.id as node_id', 'nodes.lost_at as lost_at'])
    .where('nodes.state', '=', 'lost')
    .where('instances.state', 'in', LIVE_STATES)
    .execute();
  const moved: string[] = [];
  for (const row of rows) {
    const why = { reason: `its node ${row.node_id} stopped heartbeating and was declared lost at ${row.lost_at ?? 'an unknown time'}`, code: 'node_lost' as const };
    if (!(await records.transitionFrom(row.id, row.state as InstanceState, 'lost', why))) continue;
    await db
      .updateTable('commands')
      .set({ state: 'interrupted', finished_at: nowIso(), end_reason: 'instance_stopped' })
      .where('instance_id', '=', row.id)
      .where('state', '=', 'running')
      .execute();
    moved.push(row.id);
  }
  if (moved.length > 0) log.warn({ instances: moved.length, instanceIds: moved.slice(0, 20) }, "recorded a lost node's instances as lost");
  return moved;
}

/**
 * On a node that was declared lost and is back: removes from its host what its
 * instances recorded `lost` still hold there (they belong to no room any more); the ids
 * it removed.
 */
export async function releaseLost(deps: { db: Db; nodeId: string; runtime: Runtime; log: Logger }): Promise<string[]> {
  const { db, nodeId, runtime, log } = deps;
  const lost = await db.selectFrom('instances').select('id').where('node_id', '=', nodeId).where('state', '=', 'lost').execute();
  if (lost.length === 0) return [];
  const onHost = new Set(await runtime.list());
  const removed: string[] = [];
  for (const { id } of lost) {
    if (!onHost.has(id)) continue;
    try {
      await (await runtime.destroy(id)).released;
      removed.push(id);
    } catch (err) {
      log.error({ err, instanceId: id }, 'could not remove what a lost instance held on this host; the next start sweeps it');
    }
  }
  if (removed.length > 0) log.warn({ removed }, 'removed what instances recorded lost held on this host');
  return removed;
}
