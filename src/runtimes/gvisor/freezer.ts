// Freezing a sandbox: the host's cgroup freezer stops every process of it (gVisor's
// kernel, its file server, the guest's processes) where they are, holding their memory,
// until it is thawed, which takes well under a millisecond. A frozen sandbox uses no CPU
// at all; a running idle one does: this runsc's systrap platform wakes a monitor of its
// fast path every 400 µs whether the guest does anything or not (fixed in later gVisor
// releases), about 2-4% of a core per idle sandbox on a small host, so a few dozen idle
// instances keep two cores busy. core/cpu-pressure.ts freezes idle ones under CPU
// pressure; the runtime thaws an instance before anything reaches into it.
//
// The sandbox's cgroups are runsc's, from the bundle's cgroupsPath (cgroups.ts): v1's
// freezer hierarchy (`freezer.state`), or v2's `cgroup.freeze` on a unified host. The
// CPU an instance used is read beside it (v1 cpuacct, v2 cpu.stat).
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { sandboxCgroupsPath } from './cgroups.ts';

const CGROUP_ROOT = '/sys/fs/cgroup';

function v1(controller: string, instanceId: string): string {
  return join(CGROUP_ROOT, controller, sandboxCgroupsPath(instanceId));
}

function v2(instanceId: string): string {
  return join(CGROUP_ROOT, sandboxCgroupsPath(instanceId));
}

/** Freezes (true) or thaws (false) the sandbox; false when it has no freezer cgroup (gone, or none on this host). */
export function setFrozen(instanceId: string, frozen: boolean): boolean {
  try {
    writeFileSync(join(v1('freezer', instanceId), 'freezer.state'), frozen ? 'FROZEN' : 'THAWED');
    return true;
  } catch {
    // No v1 freezer: the unified hierarchy.
  }
  try {
    writeFileSync(join(v2(instanceId), 'cgroup.freeze'), frozen ? '1' : '0');
    return true;
  } catch {
    return false;
  }
}

/** Whether the sandbox's cgroup is frozen or freezing now (after a crash of the service, one may be left so). */
export function isFrozen(instanceId: string): boolean {
  try {
    return readFileSync(join(v1('freezer', instanceId), 'freezer.state'), 'utf8').trim() !== 'THAWED';
  } catch {
    // No v1 freezer: the unified hierarchy.
  }
  try {
    return readFileSync(join(v2(instanceId), 'cgroup.freeze'), 'utf8').trim() === '1';
  } catch {
    return false;
  }
}

/** CPU time the sandbox's processes have used, in milliseconds; undefined when its cgroup is gone. */
export function cpuUsedMs(instanceId: string): number | undefined {
  try {
    return Number(readFileSync(join(v1('cpuacct', instanceId), 'cpuacct.usage'), 'utf8').trim()) / 1e6;
  } catch {
    // No v1 cpuacct: the unified hierarchy.
  }
  try {
    const stat = readFileSync(join(v2(instanceId), 'cpu.stat'), 'utf8');
    const usec = /^usage_usec (\d+)$/m.exec(stat)?.[1];
    return usec === undefined ? undefined : Number(usec) / 1000;
  } catch {
    return undefined;
  }
}
