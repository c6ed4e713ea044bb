// Host admission: an instance is placed only when this host can carry it next to every
// live one. Memory is judged by use, not by limits: what running instances use now
// (measured by the runtime, from each sandbox's host cgroup; one still starting or
// resuming at the runtime's estimate of a started one, at least), plus the new one's
// estimate, plus a reserve (ROOMKIT_ADMIT_RESERVE_MB, room for running instances to
// grow) must fit within ROOMKIT_ADMIT_MEMORY_PERCENT of the host's memory (or of
// ROOMKIT_ADMIT_HOST_MEMORY_MB), and within what the host really has available
// (MemAvailable) less HOST_FLOOR_PERCENT of it, which other programs may be using. Each instance keeps its own limit
// (memory_mb, and its runtime's host limit). Disk: the writable disks of live instances
// plus the new one stay within ROOMKIT_ADMIT_DISK_PERCENT of the data directory's free
// space (above 100 it thin-provisions: layers are sparse and take what is written), and
// whatever that setting, the file system keeps DISK_FLOOR free for real. Otherwise 503 capacity_exhausted with Retry-After, before anything is made;
// before that answer a create or a resume makes room under memory pressure by pausing
// idle instances (memory-pressure.ts). Admission is the node's own business, so its
// checks run one at a time in this process (serial()); it counts every live instance
// in the store, which is this node's while the store serves one node.
import { statfs } from 'node:fs/promises';
import type { Config } from '../config.ts';
import { AppError } from '../errors.ts';
import { type HostMemory, readHostMemory } from '../host/meminfo.ts';
import { Serial } from '../lib/keyed-serial.ts';
import type { MachineResources, Runtime } from '../runtimes/types.ts';
import type { Db } from '../store/db.ts';
import { liveResources } from './instance-queries.ts';
import { type InstanceState, isProvisioning } from './lifecycle.ts';

/** What a refused create is told to wait before trying again. */
export const CAPACITY_RETRY_AFTER_S = 30;
/** The share of the host's real memory admission always leaves available, whatever else the host runs. */
export const HOST_FLOOR_PERCENT = 5;
/**
 * What the data directory's file system keeps free for real before a create is refused,
 * however far ROOMKIT_ADMIT_DISK_PERCENT overcommits: the larger of these. Below it,
 * instances' sparse layers, saved memory and the store itself could run out of room.
 */
export const DISK_FLOOR = { mb: 1024, percent: 5 } as const;

/** The memory side of admission, in MiB. */
export interface MemoryFigures {
  /** ROOMKIT_ADMIT_MEMORY_PERCENT of the host's memory (or of ROOMKIT_ADMIT_HOST_MEMORY_MB). */
  limitMb: number;
  /** What running instances use now, measured (starting ones at least at their estimate). */
  inUseMb: number;
  /** Kept free for running instances to grow (ROOMKIT_ADMIT_RESERVE_MB). */
  reserveMb: number;
  /** What the host has available for more instances: MemAvailable less HOST_FLOOR_PERCENT of MemTotal. */
  hostFreeMb: number;
}

/** What admission weighs: memory in use, the disks committed, and what the new instance asks. */
export interface AdmissionInput {
  memory: MemoryFigures;
  /** `freeMb` and `floorMb`: what the file system has free now, and what it must keep free (DISK_FLOOR). */
  disk: { limitMb: number; committedMb: number; freeMb: number; floorMb: number };
  request: { memoryMb: number; diskMb: number };
}

export type AdmissionBreach =
  | { resource: 'memory'; limitMb: number; inUseMb: number; reserveMb: number; roomMb: number; requestedMb: number; hostBound: boolean }
  | { resource: 'disk'; limitMb: number; committedMb: number; requestedMb: number }
  | { resource: 'disk_floor'; freeMb: number; floorMb: number };

/**
 * Memory an instance may still start in: the smaller of what the share leaves beside the
 * instances' use and what the host really has free, less the reserve. Negative under
 * memory pressure (the reserve is being eaten into).
 */
export function memoryRoomMb(m: MemoryFigures): number {
  return Math.min(m.limitMb - m.inUseMb, m.hostFreeMb) - m.reserveMb;
}

/** Whether running instances eat into the reserve: memory pressure, which pauses idle ones. */
export function underPressure(m: MemoryFigures): boolean {
  return memoryRoomMb(m) < 0;
}

/** The resource the new instance does not fit in, or undefined when the host can carry it. */
export function admissionBreach(input: AdmissionInput): AdmissionBreach | undefined {
  const { memory, disk, request } = input;
  const roomMb = memoryRoomMb(memory);
  if (request.memoryMb > roomMb) {
    return {
      resource: 'memory',
      limitMb: memory.limitMb,
      inUseMb: memory.inUseMb,
      reserveMb: memory.reserveMb,
      roomMb,
      requestedMb: request.memoryMb,
      hostBound: memory.hostFreeMb < memory.limitMb - memory.inUseMb,
    };
  }
  if (disk.committedMb + request.diskMb > disk.limitMb) {
    return { resource: 'disk', limitMb: disk.limitMb, committedMb: disk.committedMb, requestedMb: request.diskMb };
  }
  if (request.diskMb > 0 && disk.freeMb <= disk.floorMb) return { resource: 'disk_floor', freeMb: disk.freeMb, floorMb: disk.floorMb };
  return undefined;
}

/** How many more instances, each counted at `cost` while it starts, the host admits now: the smaller of what memory and disk leave room for. */
export function admissibleCount(input: Omit<AdmissionInput, 'request'>, cost: { memoryMb: number; diskMb: number }): number {
  const byMemory = cost.memoryMb === 0 ? Infinity : Math.floor(memoryRoomMb(input.memory) / cost.memoryMb);
  const byDisk =
    cost.diskMb === 0 ? Infinity : input.disk.freeMb <= input.disk.floorMb ? 0 : Math.floor((input.disk.limitMb - input.disk.committedMb) / cost.diskMb);
  return Math.max(0, Math.min(byMemory, byDisk));
}

/**
 * What admission counts of one live instance's memory: nothing while paused; its
 * measured use while it runs (its limit when the runtime cannot measure it); the
 * starting estimate at least while it starts or resumes; what is left of it while it
 * stops.
 */
export function countedMemoryMb(state: InstanceState, measuredMb: number | undefined, startingMb: number, limitMb: number): number {
  if (state === 'paused') return 0;
  if (isProvisioning(state) || state === 'resuming') return Math.max(measuredMb ?? 0, startingMb);
  if (state === 'stopping') return measuredMb ?? 0;
  return measuredMb ?? limitMb;
}

export interface HostCapacity {
  memory: {
    limit_mb: number;
    committed_mb: number;
    in_use_mb: number;
    reserve_mb: number;
    host_available_mb: number;
    room_mb: number;
    under_pressure: boolean;
  };
  disk: { limit_mb: number; committed_mb: number; free_mb: number; floor_mb: number };
}

export class Admission {
  private readonly config: Config;
  private readonly hostMemory: () => HostMemory;
  private readonly checks = new Serial();

  /** The node whose host this admits to: only its instances count. */
  private readonly nodeId: string;

  constructor(deps: { config: Config; nodeId: string; hostMemory?: () => HostMemory }) {
    this.config = deps.config;
    this.nodeId = deps.nodeId;
    this.hostMemory = deps.hostMemory ?? readHostMemory;
  }

  /** Runs `fn` after every admission check before it has ended, so two cannot both take the last room. */
  serial<T>(fn: () => Promise<T>): Promise<T> {
    return this.checks.run(fn);
  }

  /**
   * Throws capacity_exhausted when the host cannot carry `count` more instances (one
   * unless said) of `request`, all starting at once (a fork's copies are weighed
   * together). Call within serial(). A refusal for memory may be lifted by pausing idle
   * instances (memory-pressure.ts).
   */
  async assertFits(db: Db, runtime: Runtime, request: MachineResources, count = 1): Promise<void> {
    const input = await this.input(db, runtime);
    const asked = { memoryMb: runtime.startingMemoryMb(request) * count, diskMb: runtime.hostCost(request).diskMb * count };
    const breach = admissionBreach({ ...input, request: asked });
    if (breach) throw new CapacityRefusal(breach);
  }

  /** The memory side of admission now (the pressure check reads it between creates). */
  async memory(db: Db, runtime: Runtime): Promise<MemoryFigures> {
    return (await this.input(db, runtime)).memory;
  }

  /** What one organization's running instances use of the host's memory now, as admission counts it (MiB). */
  async inUseOf(db: Db, runtime: Runtime, organizationId: string): Promise<number> {
    let inUseMb = 0;
    for (const row of await liveResources(db, { organizationId, nodeId: this.nodeId })) {
      inUseMb += countedMemoryMb(row.state as InstanceState, runtime.memoryInUseMb(row.id), runtime.startingMemoryMb(row.resources), runtime.hostCost(row.resources).memoryMb);
    }
    return inUseMb;
  }

  /** What live instances use and commit on this host, and how far admission lets it go. */
  async capacity(db: Db, runtime: Runtime): Promise<HostCapacity & { admissible: (resources: MachineResources) => number }> {
    const input = await this.input(db, runtime);
    const { memory } = input;
    return {
      memory: {
        limit_mb: memory.limitMb,
        committed_mb: input.committedMemoryMb,
        in_use_mb: memory.inUseMb,
        reserve_mb: memory.reserveMb,
        host_available_mb: this.hostMemory().availableMb,
        room_mb: memoryRoomMb(memory),
        under_pressure: underPressure(memory),
      },
      disk: { limit_mb: input.disk.limitMb, committed_mb: input.disk.committedMb, free_mb: input.disk.freeMb, floor_mb: input.disk.floorMb },
      admissible: (resources) => admissibleCount(input, { memoryMb: runtime.startingMemoryMb(resources), diskMb: runtime.hostCost(resources).diskMb }),
    };
  }

  private async input(db: Db, runtime: Runtime): Promise<Omit<AdmissionInput, 'request'> & { committedMemoryMb: number }> {
    let inUseMb = 0;
    let committedMemoryMb = 0;
    let diskMb = 0;
    for (const row of await liveResources(db, { nodeId: this.nodeId })) {
      const cost = runtime.hostCost(row.resources);
      const state = row.state as InstanceState;
      inUseMb += countedMemoryMb(state, runtime.memoryInUseMb(row.id), runtime.startingMemoryMb(row.resources), cost.memoryMb);
      // A paused instance holds its writable layer, not memory.
      if (state !== 'paused') committedMemoryMb += cost.memoryMb;
      diskMb += cost.diskMb;
    }
    const host = this.hostMemory();
    const percent = this.config.admitMemoryPercent;
    const figureMb = this.config.admitHostMemoryMb > 0 ? this.config.admitHostMemoryMb : host.totalMb;
    const fs = await statfs(this.config.dataDir);
    const freeMb = Math.floor((fs.bavail * fs.bsize) / (1024 * 1024));
    const floorMb = Math.max(DISK_FLOOR.mb, Math.ceil((fs.blocks * fs.bsize * DISK_FLOOR.percent) / 100 / (1024 * 1024)));
    return {
      memory: {
        limitMb: Math.floor((figureMb * percent) / 100),
        inUseMb,
        reserveMb: this.config.admitReserveMb,
        hostFreeMb: host.availableMb - Math.ceil((host.totalMb * HOST_FLOOR_PERCENT) / 100),
      },
      disk: { limitMb: Math.floor((freeMb * this.config.admitDiskPercent) / 100), committedMb: diskMb, freeMb, floorMb },
      committedMemoryMb,
    };
  }
}

/** The refusal of a create or resume for the host's capacity, with what was short. */
export class CapacityRefusal extends AppError {
  readonly breach: AdmissionBreach;
  constructor(breach: AdmissionBreach, paused = 0) {
    const { message, details } = capacityWords(breach, paused);
    super('capacity_exhausted', message, details);
    this.breach = breach;
  }
}

/** The 503's words and details; `paused` is how many idle instances pressure paused for it first. */
function capacityWords(breach: AdmissionBreach, paused: number): { message: string; details: Record<string, unknown> } {
  const retry = { retry_after_s: CAPACITY_RETRY_AFTER_S };
  if (breach.resource === 'disk_floor') {
    const { freeMb, floorMb } = breach;
    return {
      message:
        `this host cannot take another instance now: its data directory has ${freeMb} MB free and keeps at least ${floorMb} MB free for the instances already there; ` +
        'delete instances or snapshots you no longer need, or ask the operator for more disk (ROOMKIT_ADMIT_DISK_PERCENT above 100 lets instances commit more disk than is free, never this floor)',
      details: { resource: 'disk', free_mb: freeMb, floor_mb: floorMb, ...retry },
    };
  }
  if (breach.resource === 'disk') {
    const { limitMb, committedMb, requestedMb } = breach;
    return {
      message:
        `this host cannot take another instance now: live instances commit ${committedMb} MB of disk, this one needs ${requestedMb} MB more, ` +
        `and at most ${limitMb} MB (ROOMKIT_ADMIT_DISK_PERCENT of the free space of the data directory) may be committed; retry later, when instances have ended, or use a smaller profile ` +
        '(an operator whose instances write little may raise ROOMKIT_ADMIT_DISK_PERCENT above 100: layers take only what is written)',
      details: { resource: 'disk', limit_mb: limitMb, committed_mb: committedMb, requested_mb: requestedMb, ...retry },
    };
  }
  const { limitMb, inUseMb, reserveMb, roomMb, requestedMb, hostBound } = breach;
  const bound = hostBound
    ? `the host itself has only ${Math.max(0, roomMb + reserveMb)} MB free for instances (other programs use the rest)`
    : `at most ${limitMb} MB may be used (ROOMKIT_ADMIT_MEMORY_PERCENT of the host's memory)`;
  const pausedWords = paused > 0 ? `${paused} idle instance${paused === 1 ? ' was' : 's were'} paused to make room, and no other` : 'no instance';
  return {
    message:
      `this host cannot take another instance now: running instances use ${inUseMb} MB of memory, this one needs ${requestedMb} MB to start, ` +
      `${reserveMb} MB stay free for running instances to grow (ROOMKIT_ADMIT_RESERVE_MB), and ${bound}; ${pausedWords} has been idle long enough to be paused (ROOMKIT_PRESSURE_IDLE_S). ` +
      'Retry later, pause or delete instances you do not need, or use a smaller profile',
    details: { resource: 'memory', limit_mb: limitMb, committed_mb: inUseMb, reserve_mb: reserveMb, requested_mb: requestedMb, paused_for_room: paused, ...retry },
  };
}
