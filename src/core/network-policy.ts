// An egress policy as core takes it: a change applied to the network it replaces
// (a profile's, or an instance's), checked entry by entry, with the first bad entry
// named in a validation_error as the schema validator names its fields.
import { AppError } from '../errors.ts';
import { type NetworkPolicy, PolicyEntryError, parsePolicy } from '../network/egress/policy.ts';
import type { Network, NetworkChange } from './network-schema.ts';
import type { InstanceRecord } from './stored-json.ts';

/**
 * The network that results from `change` over `base`: fields given replace the base's,
 * and a change to an egress other than allowlist that names no lists empties them (they
 * belong to allowlist alone).
 */
export function applyNetworkChange(base: Network, change: NetworkChange | undefined): Network {
  if (!change) return base;
  const leavesAllowlist = change.egress !== undefined && change.egress !== 'allowlist';
  return {
    egress: change.egress ?? base.egress,
    allow: change.allow ?? (leavesAllowlist ? [] : base.allow),
    deny: change.deny ?? (leavesAllowlist ? [] : base.deny),
  };
}

/** Throws validation_error for the first entry that cannot be used, naming it and why. */
export function checkNetwork(network: NetworkPolicy, field = 'network'): void {
  try {
    parsePolicy(network, field);
  } catch (err) {
    if (!(err instanceof PolicyEntryError)) throw err;
    throw new AppError('validation_error', `${err.field}: ${err.message}`, { errors: [{ field: err.field, message: err.message }] });
  }
}

/** A network change asked of an instance that is neither running nor paused. */
export function networkStateConflict(row: InstanceRecord): AppError {
  const words = row.state === 'failed' ? `it failed (${row.failure_reason ?? 'unknown'}); delete it and create another` : `it is ${row.state}`;
  return new AppError(
    'instance_state_conflict',
    `cannot change the network of the room's instance: ${words}; a network changes while the instance is ready or paused`,
    { instance_id: row.id, state: row.state },
    { code: 'poll_until', profile_id: row.profile_id, room_id: row.room_id, until: 'ready' },
  );
}
