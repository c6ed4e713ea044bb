// Rows made before instances, snapshots and address leases recorded their node have
// none (a lease: an empty one): the node that starts first on such a store takes them as its own. Before nodes, a store had exactly
// one process (SQLite's file, or a PostgreSQL store used by one serve, as documented
// then), and that process is the one that starts first on it again.
import type { Db } from '../store/db.ts';

/** Records `nodeId` on every instance, snapshot and address lease that has no node; answers how many of each it took. */
export async function claimUnownedRows(db: Db, nodeId: string): Promise<{ instances: number; snapshots: number; leases: number }> {
  const instances = await db.updateTable('instances').set({ node_id: nodeId }).where('node_id', 'is', null).executeTakeFirst();
  const snapshots = await db.updateTable('snapshots').set({ node_id: nodeId }).where('node_id', 'is', null).executeTakeFirst();
  const leases = await db.updateTable('network_leases').set({ node_id: nodeId }).where('node_id', '=', '').executeTakeFirst();
  return { instances: Number(instances.numUpdatedRows), snapshots: Number(snapshots.numUpdatedRows), leases: Number(leases.numUpdatedRows) };
}
