// What this node offers and carries, for its heartbeat (cluster/node-registry.ts): host
// admission's limits and what its instances use now, as /operator/capacity shows them.
import type { NodeCapacity, NodeLoad } from '../cluster/node-registry.ts';
import type { Config } from '../config.ts';
import type { RuntimeSelection } from '../runtimes/types.ts';
import type { Db } from '../store/db.ts';
import type { Admission } from './admission.ts';

export async function nodeFigures(db: Db, selection: RuntimeSelection, admission: Admission, config: Pick<Config, 'maxVcpus'>): Promise<{ capacity: NodeCapacity; load: NodeLoad }> {
  if (!('runtime' in selection)) {
    // A node without a runtime runs no instances: it offers nothing to place on it.
    return { capacity: { memory_mb: 0, vcpus: 0, disk_mb: 0 }, load: { instances: 0, memory_in_use_mb: 0 } };
  }
  const capacity = await admission.capacity(db, selection.runtime);
  const instances = await selection.runtime.list();
  return {
    capacity: { memory_mb: capacity.memory.limit_mb, vcpus: config.maxVcpus, disk_mb: capacity.disk.limit_mb },
    load: { instances: instances.length, memory_in_use_mb: capacity.memory.in_use_mb },
  };
}
