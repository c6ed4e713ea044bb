// The instance lifecycle: every state an instance can be in and the only moves allowed
// between them. All state changes go through assertTransition, so an illegal move is a
// bug that throws instead of a silent write.
import { PROVISION_STEPS } from '../runtimes/types.ts';

export type { ProvisionStep } from '../runtimes/types.ts';

/** The spec's creation progression, in order; each after `active` is a runtime's provisioning step. */
export const PROVISION_STATES = ['active', ...PROVISION_STEPS] as const;

/**
 * After `ready`: a pause stops the machine and keeps the instance's files (and its
 * memory where the runtime can); a resume brings it back to `ready`.
 */
export const PAUSE_STATES = ['pausing', 'paused', 'resuming'] as const;

/**
 * `lost`: its node stopped heartbeating and another node declared it lost
 * (cluster/node-registry.ts); whatever it held is on that node's host, which removes it
 * when it comes back. Like `failed`, it ends the instance and frees its room.
 */
export const STATES = [...PROVISION_STATES, ...PAUSE_STATES, 'stopping', 'stopped', 'failed', 'lost'] as const;

export type InstanceState = (typeof STATES)[number];
export type ProvisionState = (typeof PROVISION_STATES)[number];

export const TERMINAL_STATES = ['stopped', 'failed', 'lost'] as const satisfies readonly InstanceState[];
/** States in which an instance holds resources and occupies its room. */
export const LIVE_STATES: InstanceState[] = STATES.filter(
  (s) => !(TERMINAL_STATES as readonly string[]).includes(s),
);

// Every live state may also become `lost`, when its node is declared lost.
const NEXT: Record<InstanceState, readonly InstanceState[]> = {
  active: ['network_allocated', 'stopping', 'failed', 'lost'],
  network_allocated: ['ftap_created', 'stopping', 'failed', 'lost'],
  ftap_created: ['image_generated', 'stopping', 'failed', 'lost'],
  image_generated: ['vm_started', 'stopping', 'failed', 'lost'],
  vm_started: ['vm_booted', 'stopping', 'failed', 'lost'],
  vm_booted: ['ready', 'stopping', 'failed', 'lost'],
  ready: ['pausing', 'stopping', 'failed', 'lost'],
  // A pause that cannot finish fails the instance; a crash during one is settled as paused.
  pausing: ['paused', 'failed', 'lost'],
  paused: ['resuming', 'stopping', 'failed', 'lost'],
  // A resume that fails leaves the instance paused again.
  resuming: ['ready', 'paused', 'failed', 'lost'],
  stopping: ['stopped', 'failed', 'lost'],
  stopped: [],
  failed: [],
  lost: [],
};

export class IllegalTransitionError extends Error {
  readonly from: InstanceState;
  readonly to: InstanceState;

  constructor(from: InstanceState, to: InstanceState) {
    super(`illegal instance state transition ${from} -> ${to}`);
    this.name = 'IllegalTransitionError';
    this.from = from;
    this.to = to;
  }
}

export function isState(value: string): value is InstanceState {
  return (STATES as readonly string[]).includes(value);
}

export function canTransition(from: InstanceState, to: InstanceState): boolean {
  return NEXT[from].includes(to);
}

export function assertTransition(from: InstanceState, to: InstanceState): void {
  if (!canTransition(from, to)) throw new IllegalTransitionError(from, to);
}

export function isLive(state: InstanceState): boolean {
  return LIVE_STATES.includes(state);
}

/** States whose instance holds no machine (no memory or CPU), only its files. */
export const HELD_ON_DISK_STATES: InstanceState[] = ['paused'];

export function isProvisioning(state: InstanceState): boolean {
  return (PROVISION_STATES as readonly string[]).includes(state) && state !== 'ready';
}
