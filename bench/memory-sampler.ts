// What the memory benchmark reads of one sandbox, from three sides:
// - the host's processes in the sandbox's cgroup (runsc-sandbox, runsc-gofer, the
//   ptrace stubs that hold the guest's address spaces), their RSS and their PSS from
//   /proc/<pid>/smaps_rollup: PSS splits each page shared by several processes (runsc's
//   binary, the guest memory file mapped by the sentry and its stubs) among them, so
//   summed over every sandbox on the host it adds up to what they take together;
// - the sandbox's memory cgroup: what the kernel charges to it (v1 usage_in_bytes and
//   memory.stat, or v2 memory.current and memory.stat);
// - the guest's own view, through a shell script inside (only sh builtins, so that it
//   starts nothing it would count): each process's VmRSS as gVisor reports it, and the
//   memory in use by gVisor's accounting (/proc/meminfo).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { memoryCgroupDir, processesOf, sandboxCgroupsPath } from '../src/runtimes/gvisor/cgroups.ts';

const KIB = 1024;

/** The host roles a sandbox's processes play. */
export const HOST_ROLES = ['runsc-sandbox', 'runsc-gofer', 'ptrace stubs', 'other'] as const;
export type HostRole = (typeof HOST_ROLES)[number];

export interface ProcessMemory {
  rss: number;
  pss: number;
  /** Pages no other process maps (Private_Clean + Private_Dirty): what ending this process alone gives back. */
  private: number;
}

export interface HostView {
  processes: number;
  total: ProcessMemory;
  byRole: Record<HostRole, ProcessMemory>;
}

export interface CgroupView {
  usage: number;
  /** Anonymous memory (v1 `rss`, v2 `anon`). */
  rss: number;
  /** Page cache, shared memory included (v1 `cache`, v2 `file`). */
  cache: number;
  /** Of the cache, shared memory: gVisor's guest memory file lives there. */
  shmem: number;
  /** Kernel memory charged to the cgroup (page tables, stacks, slab of its many tasks): in `usage`, in no process's PSS. */
  kernel: number;
}

/** The guest roles of an instance's processes, by their name. */
export const GUEST_ROLES = ['agent', 'root service', 'tini, sleep', 'other'] as const;
export type GuestRole = (typeof GUEST_ROLES)[number];

export interface GuestView {
  /** MemTotal - MemFree of the guest's /proc/meminfo: what gVisor counts in use. */
  inUse: number;
  /** Summed VmRSS of the guest's processes, by role (bytes). */
  rssByRole: Record<GuestRole, number>;
}

/** Bytes from smaps_rollup's fields (given in kB). */
export function parseSmapsRollup(text: string): ProcessMemory {
  const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB$`, 'm').exec(text)?.[1] ?? 0) * KIB;
  return { rss: field('Rss'), pss: field('Pss'), private: field('Private_Clean') + field('Private_Dirty') };
}

/** `name value` lines of a cgroup's memory.stat (v1 or v2), values in bytes or counts. */
export function parseMemoryStat(text: string): Map<string, number> {
  const values = new Map<string, number>();
  for (const line of text.split('\n')) {
    const match = /^(\w+) (\d+)$/.exec(line.trim());
    if (match) values.set(match[1]!, Number(match[2]));
  }
  return values;
}

/**
 * The role of a process of a sandbox's cgroup from its command line: runsc names its
 * sandbox and gofer processes in argv[0]; the ptrace stubs are forked without an exec
 * and have none.
 */
export function hostRole(cmdline: string): HostRole {
  const argv0 = cmdline.split('\0')[0] ?? '';
  if (argv0 === 'runsc-sandbox') return 'runsc-sandbox';
  if (argv0 === 'runsc-gofer') return 'runsc-gofer';
  if (cmdline === '') return 'ptrace stubs';
  return 'other';
}

/** RSS, PSS and private memory of the processes in sandbox `id`'s cgroup, by role; null when it has no cgroup. */
export function hostView(id: string): HostView | null {
  const pids = processesOf(id);
  if (pids === null) return null;
  const zero = (): ProcessMemory => ({ rss: 0, pss: 0, private: 0 });
  const view: HostView = { processes: 0, total: zero(), byRole: Object.fromEntries(HOST_ROLES.map((r) => [r, zero()])) as Record<HostRole, ProcessMemory> };
  for (const pid of pids) {
    let memory: ProcessMemory;
    let cmdline: string;
    try {
      cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      memory = parseSmapsRollup(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'));
    } catch {
      continue; // ended since the cgroup was read
    }
    view.processes++;
    for (const into of [view.total, view.byRole[hostRole(cmdline)]]) {
      into.rss += memory.rss;
      into.pss += memory.pss;
      into.private += memory.private;
    }
  }
  return view;
}

/** What the kernel charges to sandbox `id`'s memory cgroup: v1 when the host has it, else v2; null when there is none. */
export function cgroupView(id: string): CgroupView | null {
  const read = (file: string) => readFileSync(file, 'utf8');
  try {
    const dir = memoryCgroupDir(id);
    const stat = parseMemoryStat(read(join(dir, 'memory.stat')));
    let kernel = 0; // 0 when kernel memory is not accounted (cgroup.memory=nokmem)
    try {
      kernel = Number(read(join(dir, 'memory.kmem.usage_in_bytes')));
    } catch {
      // not accounted
    }
    return { usage: Number(read(join(dir, 'memory.usage_in_bytes'))), rss: stat.get('rss') ?? 0, cache: stat.get('cache') ?? 0, shmem: stat.get('shmem') ?? 0, kernel };
  } catch {
    // No v1 memory cgroup: the unified hierarchy.
  }
  try {
    const dir = join('/sys/fs/cgroup', sandboxCgroupsPath(id));
    const stat = parseMemoryStat(read(join(dir, 'memory.stat')));
    const kernel = stat.get('kernel') ?? ['kernel_stack', 'pagetables', 'slab', 'sock'].reduce((sum, name) => sum + (stat.get(name) ?? 0), 0);
    return { usage: Number(read(join(dir, 'memory.current'))), rss: stat.get('anon') ?? 0, cache: stat.get('file') ?? 0, shmem: stat.get('shmem') ?? 0, kernel };
  } catch {
    return null;
  }
}

/**
 * Run with `sh -c` as root inside the guest: `mem <field> <kB>` for MemTotal and MemFree,
 * then `proc <pid> <ppid> <VmRSS kB> <name>` per process, leaving out the shell itself
 * and anything it started. Builtins only, so that the listing forks nothing.
 */
export const GUEST_SCRIPT = [
  'while read -r k v _; do case $k in MemTotal:|MemFree:) echo "mem ${k%:} $v";; esac; done < /proc/meminfo',
  'for d in /proc/[0-9]*; do',
  '  p=${d#/proc/}; n=; pp=; r=0',
  '  { while read -r k v _; do case $k in Name:) n=$v;; PPid:) pp=$v;; VmRSS:) r=$v;; esac; done < $d/status; } 2>/dev/null',
  '  [ -n "$n" ] && [ "$p" != "$$" ] && [ "$pp" != "$$" ] && echo "proc $p $pp $r $n"',
  'done',
  'true',
].join('\n');

/** The role of a guest process by its name: the agent (`agent init` and `agent serve`), the root service (python3), the init without the agent. */
export function guestRole(name: string): GuestRole {
  if (name === 'agent') return 'agent';
  if (name === 'python3') return 'root service';
  if (name === 'tini' || name === 'sleep') return 'tini, sleep';
  return 'other';
}

/** The guest's view from GUEST_SCRIPT's output. */
export function parseGuestView(text: string): GuestView {
  const mem = new Map<string, number>();
  const rssByRole = Object.fromEntries(GUEST_ROLES.map((r) => [r, 0])) as Record<GuestRole, number>;
  for (const line of text.split('\n')) {
    const words = line.trim().split(/\s+/);
    if (words[0] === 'mem' && words.length === 3) mem.set(words[1]!, Number(words[2]) * KIB);
    if (words[0] === 'proc' && words.length >= 5) rssByRole[guestRole(words.slice(4).join(' '))] += Number(words[3]) * KIB;
  }
  const total = mem.get('MemTotal');
  const free = mem.get('MemFree');
  if (total === undefined || free === undefined) throw new Error(`the guest's listing has no MemTotal/MemFree: ${JSON.stringify(text.slice(0, 200))}`);
  return { inUse: total - free, rssByRole };
}
