// Host admission: an instance is placed only when this host can carry it next to every
// live one. Memory: what live instances may take together (each instance's host cost,
// which the runtime states: for gVisor memory_mb plus its sandbox's headroom) plus the
// new one stays within ROOMKIT_ADMIT_MEMORY_PERCENT of the host's memory. Disk: the
// writable disks of live instances plus the new one stay within ROOMKIT_ADMIT_DISK_PERCENT
// of the data directory's free space. Otherwise 503 capacity_exhausted with Retry-After,
// before anything is made. Admission is the node's own business, so its checks run one
// at a time in this process (serial()); it counts every live instance in the store,
// which is this node's while the store serves one node.
import { statfs } from 'node:fs/promises';
import { totalmem } from 'node:os';
import type { Config } from '../config.ts';
import { AppError } from '../errors.ts';
import { Serial } from '../lib/keyed-serial.ts';
import type { MachineResources, Runtime } from '../runtimes/types.ts';
import type { Db } from '../store/db.ts';
import { liveResources } from './instance-queries.ts';
import { HELD_ON_DISK_STATES } from './lifecycle.ts';

/** What a refused create is told to wait before trying again. */
export const CAPACITY_RETRY_AFTER_S = 30;

export interface HostCapacity {
  memory: { limit_mb: number; committed_mb: number };
  disk: { limit_mb: number; committed_mb: number };
}

/** What admission weighs: the host's size, the configured shares and what is committed. */
export interface AdmissionInput {
  hostMemoryMb: number;
  memoryPercent: number;
  freeDiskMb: number;
  diskPercent: number;
  committed: { memoryMb: number; diskMb: number };
  request: { memoryMb: number; diskMb: number };
}

/** The limits admission holds committed memory and disk to. */
export function admissionLimits(input: Pick<AdmissionInput, 'hostMemoryMb' | 'memoryPercent' | 'freeDiskMb' | 'diskPercent'>): { memoryMb: number; diskMb: number } {
  return {
    memoryMb: Math.floor((input.hostMemoryMb * input.memoryPercent) / 100),
    diskMb: Math.floor((input.freeDiskMb * input.diskPercent) / 100),
  };
}

/** The resource the new instance does not fit in, or undefined when the host can carry it. */
export function admissionBreach(input: AdmissionInput): { resource: 'memory' | 'disk'; limitMb: number; committedMb: number; requestedMb: number } | undefined {
  const limits = admissionLimits(input);
  if (input.committed.memoryMb + input.request.memoryMb > limits.memoryMb) {
    return { resource: 'memory', limitMb: limits.memoryMb, committedMb: input.committed.memoryMb, requestedMb: input.request.memoryMb };
  }
  if (input.committed.diskMb + input.request.diskMb > limits.diskMb) {
    return { resource: 'disk', limitMb: limits.diskMb, committedMb: input.committed.diskMb, requestedMb: input.request.diskMb };
  }
  return undefined;
}

/**
 * How many more instances of `resources` the host admits now: the smaller of what
 * memory and disk leave room for.
 */
export function admissibleCount(input: Omit<AdmissionInput, 'request'>, cost: { memoryMb: number; diskMb: number }): number {
  const limits = admissionLimits(input);
  const byMemory = Math.floor((limits.memoryMb - input.committed.memoryMb) / cost.memoryMb);
  const byDisk = cost.diskMb === 0 ? Infinity : Math.floor((limits.diskMb - input.committed.diskMb) / cost.diskMb);
  return Math.max(0, Math.min(byMemory, byDisk));
}

export class Admission {
  private readonly config: Config;
  private readonly hostMemoryMb: number;
  private readonly checks = new Serial();

  constructor(deps: { config: Config; hostMemoryMb?: number }) {
    this.config = deps.config;
    this.hostMemoryMb = deps.hostMemoryMb ?? Math.floor(totalmem() / (1024 * 1024));
  }

  /** Runs `fn` after every admission check before it has ended, so two cannot both take the last room. */
  serial<T>(fn: () => Promise<T>): Promise<T> {
    return this.checks.run(fn);
  }

  /** Throws capacity_exhausted when the host cannot carry one more instance of `request`. Call within serial(). */
  async assertFits(db: Db, runtime: Runtime, request: MachineResources): Promise<void> {
    const input = await this.input(db, runtime);
    const cost = runtime.hostCost(request);
    const breach = admissionBreach({ ...input, request: cost });
    if (!breach) return;
    const { resource, limitMb, committedMb, requestedMb } = breach;
    const setting = resource === 'memory' ? 'ROOMKIT_ADMIT_MEMORY_PERCENT' : 'ROOMKIT_ADMIT_DISK_PERCENT';
    const of = resource === 'memory' ? `the host's memory` : `the free space of the data directory`;
    throw new AppError(
      'capacity_exhausted',
      `this host cannot take another instance now: live instances commit ${committedMb} MB of ${resource}, this one needs ${requestedMb} MB more, ` +
        `and at most ${limitMb} MB (${setting} of ${of}) may be committed; retry later, when instances have ended, or use a smaller profile`,
      { resource, limit_mb: limitMb, committed_mb: committedMb, requested_mb: requestedMb, retry_after_s: CAPACITY_RETRY_AFTER_S },
    );
  }

  /** What is committed on this host and how far admission lets it go. */
  async capacity(db: Db, runtime: Runtime): Promise<HostCapacity & { admissible: (resources: MachineResources) => number }> {
    const input = await this.input(db, runtime);
    const limits = admissionLimits(input);
    return {
      memory: { limit_mb: limits.memoryMb, committed_mb: input.committed.memoryMb },
      disk: { limit_mb: limits.diskMb, committed_mb: input.committed.diskMb },
      admissible: (resources) => admissibleCount(input, runtime.hostCost(resources)),
    };
  }

  private async input(db: Db, runtime: Runtime): Promise<Omit<AdmissionInput, 'request'>> {
    const committed = { memoryMb: 0, diskMb: 0 };
    for (const row of await liveResources(db)) {
      const cost = runtime.hostCost(row.resources);
      // A paused instance holds its writable layer, not memory.
      if (!(HELD_ON_DISK_STATES as string[]).includes(row.state)) committed.memoryMb += cost.memoryMb;
      committed.diskMb += cost.diskMb;
    }
    const fs = await statfs(this.config.dataDir);
    return {
      hostMemoryMb: this.hostMemoryMb,
      memoryPercent: this.config.admitMemoryPercent,
      freeDiskMb: Math.floor((fs.bavail * fs.bsize) / (1024 * 1024)),
      diskPercent: this.config.admitDiskPercent,
      committed,
    };
  }
}
