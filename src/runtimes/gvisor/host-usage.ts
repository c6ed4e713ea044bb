// What a gVisor instance holds of the host's memory, for host admission: measured from
// its sandbox's host cgroup (without the host's file cache, which the kernel drops when
// it needs the room), and the estimate counted for one still starting. Reading two small
// cgroup files per instance is cheap enough to do for every live instance at each create.
import type { MachineResources } from '../types.ts';
import { sandboxMemoryLimitMb } from './bundle.ts';
import { memoryInUse } from './cgroups.ts';

/**
 * What a sandbox of the default image holds once its agent is up, rounded up: an idle
 * instance's cgroup is charged about 23 MiB (docs/architecture.md, "Memory of an idle
 * instance"), and a boot passes through more (the guest's page cache of the image).
 */
export const STARTING_MEMORY_MB = 64;

/** The sandbox's host memory in use now (MiB, rounded up); undefined when it has no cgroup. */
export function measuredMemoryMb(instanceId: string): number | undefined {
  const bytes = memoryInUse(instanceId);
  return bytes === null ? undefined : Math.ceil(bytes / (1024 * 1024));
}

/** What admission counts for an instance whose sandbox is not measured yet: at most its host limit. */
export function startingMemoryMb(resources: MachineResources): number {
  return Math.min(STARTING_MEMORY_MB, sandboxMemoryLimitMb(resources.memory_mb));
}
