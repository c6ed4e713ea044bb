// Figures about live instances that the metrics read at each scrape: how many are in
// each state, how much memory their profiles asked for, and host admission's memory
// figures (what they use, measured). Read from the store and the host, so they are
// right whatever changed the instances (requests, expiry, recovery).
import type { Db } from '../store/db.ts';
import type { InstanceFigures } from '../metrics.ts';
import type { Runtime } from '../runtimes/types.ts';
import type { Admission } from './admission.ts';
import { liveResources } from './instance-queries.ts';
import { LIVE_STATES } from './lifecycle.ts';

/** The figures of the node's instances (a node's /metrics are its host's). */
export async function liveInstanceFigures(db: Db, nodeId: string, host?: { admission: Admission; runtime: Runtime | undefined }): Promise<InstanceFigures> {
  const rows = await liveResources(db, { nodeId });
  const byState: Record<string, number> = Object.fromEntries(LIVE_STATES.map((s) => [s, 0]));
  let memoryMb = 0;
  for (const row of rows) {
    byState[row.state] = (byState[row.state] ?? 0) + 1;
    memoryMb += row.resources.memory_mb;
  }
  if (!host?.runtime) return { byState, memoryMb };
  const { inUseMb, limitMb, reserveMb, hostFreeMb } = await host.admission.memory(db, host.runtime);
  return { byState, memoryMb, admission: { inUseMb, limitMb, reserveMb, hostFreeMb } };
}
