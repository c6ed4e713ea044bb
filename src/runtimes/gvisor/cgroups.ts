// The host cgroups of an instance's sandbox. runsc makes them from the bundle's
// cgroupsPath: on cgroup v1 a directory `roomkit/<instance id>` in each hierarchy. The
// memory guard reads and tunes the sandbox's v1 memory controller (usage, file cache,
// limit, OOM control); a teardown never lifts the limit (it only lets the kernel's OOM
// kill act again, so a sandbox frozen at its limit can die) and removes what runsc left
// in the v1 hierarchies once none of the sandbox's processes is left; after a sandbox
// ended by itself, its OOM counters say whether memory was why. Admission reads each
// sandbox's memory in use (memoryInUse), from v1 or v2. Its members (the sandbox, its gofer and the ptrace stubs) are
// what a teardown kills (processesOf). On a cgroup v2 host there is no v1 memory cgroup: the
// memory functions find nothing and change nothing (only the host limit applies), and
// the sandbox's unified cgroup (`roomkit/<instance id>` under the root itself) is left
// to runsc's own delete.
import { existsSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const CGROUP_ROOT = '/sys/fs/cgroup';
const PARENT = 'roomkit';

/** The cgroupsPath of an instance's sandbox, for its OCI spec. */
export function sandboxCgroupsPath(instanceId: string): string {
  return `/${PARENT}/${instanceId}`;
}

/** The sandbox's v1 memory cgroup directory (which may not exist). */
export function memoryCgroupDir(instanceId: string): string {
  return join(CGROUP_ROOT, 'memory', PARENT, instanceId);
}

/** Whether the sandbox has a v1 memory cgroup, which the memory guard needs. */
export function hasMemoryCgroup(cgroupDir: string): boolean {
  return existsSync(join(cgroupDir, 'memory.usage_in_bytes'));
}

/**
 * Turns the kernel's OOM kill of the cgroup off (allocations then wait at the hard
 * limit instead) or back on.
 */
export function setOomKill(cgroupDir: string, enabled: boolean): void {
  writeFileSync(join(cgroupDir, 'memory.oom_control'), enabled ? '0' : '1');
}

/** Whether the cgroup's allocations are waiting at its hard limit. */
export function isUnderOom(cgroupDir: string): boolean {
  return readFileSync(join(cgroupDir, 'memory.oom_control'), 'utf8').includes('under_oom 1');
}

/**
 * Whether the sandbox's memory cgroup says it ran out of memory: the kernel killed a
 * process of it for memory (the host's OOM killer, or the cgroup's own when it is on),
 * or its allocations are waiting at the hard limit. Read from the v1 memory cgroup, or
 * the unified one's `memory.events` on a cgroup v2 host; false when neither is there.
 */
export function ranOutOfMemory(instanceId: string): boolean {
  const v1 = memoryCgroupDir(instanceId);
  try {
    const control = readFileSync(join(v1, 'memory.oom_control'), 'utf8');
    return /^under_oom 1$/m.test(control) || Number(/^oom_kill (\d+)$/m.exec(control)?.[1] ?? 0) > 0;
  } catch {
    // No v1 memory cgroup: try the unified hierarchy.
  }
  try {
    const events = readFileSync(join(CGROUP_ROOT, PARENT, instanceId, 'memory.events'), 'utf8');
    return Number(/^oom_kill (\d+)$/m.exec(events)?.[1] ?? 0) > 0;
  } catch {
    return false;
  }
}

/** The cgroup's hard memory limit in bytes; null when the cgroup is gone. */
export function readMemoryLimit(cgroupDir: string): number | null {
  return readNumber(join(cgroupDir, 'memory.limit_in_bytes'));
}

/** Sets the hard limit (-1: none). The kernel refuses a limit below the current usage. */
export function writeMemoryLimit(cgroupDir: string, bytes: number): void {
  writeFileSync(join(cgroupDir, 'memory.limit_in_bytes'), String(bytes));
}

/**
 * The memory an instance uses: its cgroup's usage without the host's file cache. The
 * files an instance writes and reads go through its gofer, whose page cache is charged
 * to the cgroup but is the host's to drop, not the guest's memory; counting it killed
 * processes of an instance that only wrote files. The guest's own memory, its page
 * cache included, lives in gVisor's shared memory (anonymous pages) and is all counted.
 * Null when the cgroup is gone.
 */
export function workingSet(cgroupDir: string): number | null {
  const usage = readNumber(join(cgroupDir, 'memory.usage_in_bytes'));
  if (usage === null) return null;
  let fileCache = 0;
  try {
    const stat = readFileSync(join(cgroupDir, 'memory.stat'), 'utf8');
    for (const name of ['total_inactive_file', 'total_active_file']) {
      const match = new RegExp(`^${name} (\\d+)$`, 'm').exec(stat);
      fileCache += match ? Number(match[1]) : 0;
    }
  } catch {
    // No stat: count all of the usage.
  }
  return Math.max(0, usage - fileCache);
}

/**
 * Lets the kernel's OOM kill act in the memory cgroup again (v1), if it exists, so that
 * a sandbox whose allocations wait at its hard limit can be killed. The limit itself
 * stays: while any process of the sandbox can run, it must not take more than that (a
 * guest process allocating during a teardown would otherwise grow without bound).
 */
export function unfreezeMemory(instanceId: string): void {
  const dir = memoryCgroupDir(instanceId);
  if (!existsSync(dir)) return;
  try {
    setOomKill(dir, true);
  } catch {
    // Gone in the meantime.
  }
}

/**
 * The host memory the sandbox holds now, in bytes, without the host's file cache (see
 * workingSet): its v1 memory cgroup's, else its unified cgroup's on a cgroup v2 host
 * (`memory.current` less the file pages of `memory.stat`). Null when it has neither
 * (no sandbox, or one that has ended).
 */
export function memoryInUse(instanceId: string): number | null {
  const v1 = workingSet(memoryCgroupDir(instanceId));
  if (v1 !== null) return v1;
  const dir = join(CGROUP_ROOT, PARENT, instanceId);
  const current = readNumber(join(dir, 'memory.current'));
  if (current === null) return null;
  let file = 0;
  try {
    file = Number(/^file (\d+)$/m.exec(readFileSync(join(dir, 'memory.stat'), 'utf8'))?.[1] ?? 0);
  } catch {
    // No stat: count all of it.
  }
  return Math.max(0, current - file);
}

/** Removes the instance's cgroup directories that runsc left in any v1 hierarchy. */
export function removeCgroups(instanceId: string): void {
  if (!existsSync(CGROUP_ROOT)) return;
  for (const hierarchy of readdirSync(CGROUP_ROOT)) {
    const dir = join(CGROUP_ROOT, hierarchy, PARENT, instanceId);
    if (existsSync(dir)) {
      try {
        rmdirSync(dir);
      } catch {
        // rmdir on cgroupfs fails while tasks remain; runsc delete has killed them, so
        // this only happens in a race the next sweep settles.
      }
    }
  }
}

/**
 * The pids in the sandbox's host cgroup now, zombies included (on cgroup v1 a killed
 * task stays listed until its parent reaps it); null when it has no cgroup. Read from a
 * v1 hierarchy that runsc fills (pids, else memory), or the unified one on cgroup v2.
 */
export function processesOf(instanceId: string): number[] | null {
  for (const dir of [join(CGROUP_ROOT, 'pids', PARENT, instanceId), join(CGROUP_ROOT, 'memory', PARENT, instanceId), join(CGROUP_ROOT, PARENT, instanceId)]) {
    let text: string;
    try {
      text = readFileSync(join(dir, 'cgroup.procs'), 'utf8');
    } catch {
      continue;
    }
    return text.split('\n').filter(Boolean).map(Number);
  }
  return null;
}

function readNumber(file: string): number | null {
  try {
    return Number(readFileSync(file, 'utf8').trim());
  } catch {
    return null;
  }
}
