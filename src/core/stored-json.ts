// The JSON columns of stored rows, decoded in one place and checked against the TypeBox
// schema of their shape, so that the rest of core works with typed values and a row
// that does not match (written by hand, or by a version that stored another shape)
// fails with an error naming the row and the field instead of somewhere further on.
import Type from 'typebox';
import Compile, { type Validator } from 'typebox/compile';
import type { InstanceRow, SnapshotRow } from '../store/schema.ts';
import { Instance, type InstanceResources } from './instance-schema.ts';
import { PROFILE_DEFAULTS, profileFieldSchemas, type ProfileSpec } from './profile-schema.ts';

/**
 * A stored spec is checked for its shape, not against this host's bounds: a profile
 * made under larger limits, or an instance made from it, still reads as it was stored
 * (the bounds apply when a profile is written).
 */
const UNBOUNDED = { maxMemoryMb: Number.MAX_SAFE_INTEGER, maxVcpus: Number.MAX_SAFE_INTEGER, maxDiskMb: Number.MAX_SAFE_INTEGER };
// Compiled once: a row is read on every request that names an instance.
const StoredSpec = Compile(Type.Object(profileFieldSchemas(UNBOUNDED)));
const StoredResources = Compile(Instance.properties.resources);
const StoredEnv = Compile(Type.Record(Type.String(), Type.String()));

/** The row a stored value came from, for the error: e.g. `instance 1b3…`. */
export type RowName = string;

/** Thrown when a stored JSON column does not hold the shape it should. */
export class StoredShapeError extends Error {
  constructor(row: RowName, column: string, problem: string) {
    super(`${row} has a ${column} in the store that does not match its schema: ${problem}`);
    this.name = 'StoredShapeError';
  }
}

function parse(text: string, row: RowName, column: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new StoredShapeError(row, column, `not JSON (${err instanceof Error ? err.message : String(err)})`);
  }
}

function checked<T>(validator: Validator, value: unknown, row: RowName, column: string): T {
  if (!validator.Check(value)) {
    const first = validator.Errors(value)[0];
    throw new StoredShapeError(row, column, first ? `${first.instancePath || '/'} ${first.message}` : 'it has another shape');
  }
  return value as T;
}

/**
 * A stored profile spec (of a profile, an instance or a snapshot). Fields added after
 * it was stored take their defaults, as they would have had when it was written.
 */
export function decodeSpec(text: string, row: RowName): ProfileSpec {
  const stored = parse(text, row, 'spec');
  if (typeof stored !== 'object' || stored === null || Array.isArray(stored)) throw new StoredShapeError(row, 'spec', 'not an object');
  const spec = {
    raw_files: PROFILE_DEFAULTS.raw_files,
    warm_pool: PROFILE_DEFAULTS.warm_pool,
    keep_undo: PROFILE_DEFAULTS.keep_undo,
    idle_action: PROFILE_DEFAULTS.idle_action,
    paused_retention_s: PROFILE_DEFAULTS.paused_retention_s,
    command_idle_output_timeout_s: PROFILE_DEFAULTS.command_idle_output_timeout_s,
    ...stored,
  };
  // Specs stored before deny lists were kept have none.
  const network = (stored as { network?: unknown }).network;
  const withDeny = typeof network === 'object' && network !== null && !('deny' in network) ? { ...spec, network: { ...network, deny: [] } } : spec;
  return checked<ProfileSpec>(StoredSpec, withDeny, row, 'spec');
}

/** An instance's stored resources (what it was granted when made). */
export function decodeResources(text: string, row: RowName): InstanceResources {
  return checked<InstanceResources>(StoredResources, parse(text, row, 'resources'), row, 'resources');
}

/** Stored environment variables (an instance's create's `env`). */
export function decodeEnv(text: string, row: RowName): Record<string, string> {
  return checked<Record<string, string>>(StoredEnv, parse(text, row, 'env'), row, 'env');
}

/** An instance's row with its JSON columns decoded: what core reads of an instance. */
export type InstanceRecord = Omit<InstanceRow, 'spec' | 'resources'> & {
  /** The spec it was made from; null for instances made before it was kept. */
  spec: ProfileSpec | null;
  resources: InstanceResources;
};

export function decodeInstance(row: InstanceRow): InstanceRecord {
  const name = `instance ${row.id}`;
  return { ...row, spec: row.spec === null ? null : decodeSpec(row.spec, name), resources: decodeResources(row.resources, name) };
}

export function encodeInstance(record: InstanceRecord): InstanceRow {
  return { ...record, spec: record.spec === null ? null : JSON.stringify(record.spec), resources: JSON.stringify(record.resources) };
}

/** A snapshot's row with its spec decoded. */
export type SnapshotRecord = Omit<SnapshotRow, 'spec'> & { spec: ProfileSpec };

export function decodeSnapshot(row: SnapshotRow): SnapshotRecord {
  return { ...row, spec: decodeSpec(row.spec, `snapshot ${row.id}`) };
}
