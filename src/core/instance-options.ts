// What a create asks of its instance beyond the profile (instance-options-schema.ts):
// checked against the profile, written with the instance's row (or onto a warm pool
// instance a room claims), compared when a create is answered by the room's live
// instance, read back for the instance's answer and its commands, and the deadline
// (timeout_s) that the expiry check and keep-alives work with.
import { AppError } from '../errors.ts';
import type { Db } from '../store/db.ts';
import type { InstanceRow } from '../store/schema.ts';
import { RESERVED_ENV_PREFIX } from './command-input.ts';
import {
  type CreateOptions,
  MAX_INSTANCE_ENV_BYTES,
  MAX_METADATA,
  MAX_METADATA_KEY,
  MAX_METADATA_VALUE,
  METADATA_KEY_PATTERN,
} from './instance-options-schema.ts';
import type { ProfileSpec } from './profile-schema.ts';
import { applyNetworkChange } from './network-policy.ts';
import { decodeEnv, type InstanceRecord } from './stored-json.ts';

/** The columns of the instance's row that a create's options set. */
export type OptionColumns = Pick<InstanceRow, 'env' | 'timeout_s' | 'expires_at' | 'timeout_action'>;

/**
 * A create's options as core takes them: the API's, and what an adapter may ask beyond
 * them (not part of the REST create): what the deadline does when it passes, over the
 * profile's idle_action (E2B's onTimeout, kill or pause).
 */
export type InstanceOptions = CreateOptions & { timeoutAction?: 'pause' | 'stop' };

/**
 * The writes of instance-records.ts that options make, named here so that the records
 * module, which reads options' columns, and this one do not import each other.
 */
export interface OptionWrites {
  setOptions(instanceId: string, columns: OptionColumns): Promise<void>;
  touch(instanceId: string, expiresAt?: string): Promise<void>;
}

/** The columns of an instance made without options (a warm pool's, or a create that gave none). */
export const NO_OPTIONS: OptionColumns = { env: null, timeout_s: 0, expires_at: null, timeout_action: null };

/**
 * Checks what the schema cannot: no reserved variable names, the env's total size, and a
 * timeout_s within the profile's lifetime limit. Throws validation_error.
 */
export function checkCreateOptions(options: CreateOptions, spec: ProfileSpec): void {
  const env = options.env ?? {};
  let bytes = 0;
  for (const [name, value] of Object.entries(env)) {
    if (name.startsWith(RESERVED_ENV_PREFIX)) throw new AppError('validation_error', `env ${name}: names starting with ${RESERVED_ENV_PREFIX} are reserved`);
    bytes += Buffer.byteLength(name) + Buffer.byteLength(value);
  }
  if (bytes > MAX_INSTANCE_ENV_BYTES) {
    throw new AppError(
      'validation_error',
      `env is ${bytes} bytes (names and values), more than the ${MAX_INSTANCE_ENV_BYTES} a create may give`,
      { bytes, max_bytes: MAX_INSTANCE_ENV_BYTES },
      { code: 'env_in_file' },
    );
  }
  for (const [key, value] of Object.entries(options.metadata ?? {})) {
    // A label is text to show and filter by; PostgreSQL's text cannot hold a NUL at all.
    if (value.includes('\u0000')) throw new AppError('validation_error', `metadata ${key}: the value contains a NUL character, which a label cannot carry`);
  }
  if (options.timeout_s !== undefined) checkTimeout(options.timeout_s, spec);
}

/** A timeout_s above the profile's lifetime limit would never be reached: refused with the bound. */
export function checkTimeout(timeoutS: number, spec: ProfileSpec): void {
  if (spec.max_lifetime_s > 0 && timeoutS > spec.max_lifetime_s) {
    throw new AppError(
      'validation_error',
      `timeout_s ${timeoutS} is more than the profile's max_lifetime_s of ${spec.max_lifetime_s}; ask for at most ${spec.max_lifetime_s}, or raise the profile's max_lifetime_s`,
      { timeout_s: timeoutS, max_lifetime_s: spec.max_lifetime_s },
    );
  }
}

/** The row's columns for a create's options, its deadline counted from `now`. */
export function optionColumns(options: InstanceOptions, now = Date.now()): OptionColumns {
  const env = options.env ?? {};
  return {
    env: Object.keys(env).length === 0 ? null : JSON.stringify(env),
    timeout_s: options.timeout_s ?? 0,
    expires_at: options.timeout_s === undefined ? null : deadline(now, options.timeout_s),
    timeout_action: options.timeoutAction ?? null,
  };
}

/** Writes the options onto the instance: its row's columns and its labels. For a new row or one a room just claimed. */
export async function applyOptions(db: Db, records: OptionWrites, instanceId: string, options: InstanceOptions): Promise<OptionColumns> {
  const columns = optionColumns(options);
  await records.setOptions(instanceId, columns);
  await writeMetadata(db, instanceId, options.metadata ?? {});
  return columns;
}

export async function writeMetadata(db: Db, instanceId: string, metadata: Record<string, string>): Promise<void> {
  const rows = Object.entries(metadata).map(([key, value]) => ({ instance_id: instanceId, key, value }));
  if (rows.length > 0) await db.insertInto('instance_metadata').values(rows).execute();
}

export async function metadataOf(db: Db, instanceId: string): Promise<Record<string, string>> {
  const rows = await db.selectFrom('instance_metadata').select(['key', 'value']).where('instance_id', '=', instanceId).orderBy('key').execute();
  return Object.fromEntries(rows.map((r) => [r.key, r.value]));
}

/** The variables the instance's create set, for its commands and terminals. */
export function envOf(row: Pick<InstanceRow, 'id' | 'env'>): Record<string, string> {
  return row.env === null ? {} : decodeEnv(row.env, `instance ${row.id}`);
}

/**
 * A create answered by the room's live instance: the options it gives must be the ones the
 * instance was made with (a field it leaves out is not compared), else instance_options_conflict,
 * naming the fields that differ (never their values: env holds secrets).
 */
export async function assertSameOptions(db: Db, row: InstanceRecord, options: CreateOptions): Promise<void> {
  const differ: string[] = [];
  if (options.env !== undefined && !sameRecord(options.env, envOf(row))) differ.push('env');
  if (options.metadata !== undefined && !sameRecord(options.metadata, await metadataOf(db, row.id))) differ.push('metadata');
  if (options.timeout_s !== undefined && options.timeout_s !== row.timeout_s) differ.push('timeout_s');
  if (options.network !== undefined && row.spec && JSON.stringify(applyNetworkChange(row.spec.network, options.network)) !== JSON.stringify(row.spec.network)) differ.push('network');
  if (differ.length === 0) return;
  throw new AppError(
    'instance_options_conflict',
    `the room already has a live instance (${row.id}) made with a different ${differ.join(', ')}; a create does not change a live instance`,
    { instance_id: row.id, fields: differ },
    { code: 'instance_options_differ', profile_id: row.profile_id, room_id: row.room_id },
  );
}

function sameRecord(a: Record<string, string>, b: Record<string, string>): boolean {
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((k) => Object.hasOwn(b, k) && b[k] === a[k]);
}

export function deadline(fromMs: number, timeoutS: number): string {
  return new Date(fromMs + timeoutS * 1000).toISOString();
}

/** Whether the instance's deadline has passed at `now`. */
export function deadlinePassed(row: Pick<InstanceRow, 'expires_at'>, now: number): boolean {
  return row.expires_at !== null && Date.parse(row.expires_at) <= now;
}

/** The deadline a resumed instance gets: its timeout_s from now (a fresh run), or none. */
export function resumedDeadline(row: Pick<InstanceRow, 'timeout_s'>, now = Date.now()): string | null {
  return row.timeout_s > 0 ? deadline(now, row.timeout_s) : null;
}

/**
 * A keep-alive: the deadline moves to now + `timeoutS` (default the instance's timeout_s;
 * with neither the instance keeps having none) and the idle limit counts from now.
 */
export async function keepAlive(records: OptionWrites, row: InstanceRecord, timeoutS: number | undefined, spec: ProfileSpec): Promise<void> {
  if (timeoutS !== undefined) checkTimeout(timeoutS, spec);
  const seconds = timeoutS ?? (row.timeout_s > 0 ? row.timeout_s : undefined);
  await records.touch(row.id, seconds === undefined ? undefined : deadline(Date.now(), seconds));
}

/**
 * The list's `metadata` filter (`k=v&k2=v2`, URL-encoded as one parameter, E2B's form) as
 * pairs; validation_error for a malformed one.
 */
export function parseMetadataQuery(query: string): [string, string][] {
  const pairs: [string, string][] = [];
  const seen = new Set<string>();
  const keyPattern = new RegExp(METADATA_KEY_PATTERN);
  for (const part of query.split('&')) {
    if (part === '') continue;
    const eq = part.indexOf('=');
    let key: string;
    let value: string;
    try {
      key = decodeURIComponent((eq < 0 ? part : part.slice(0, eq)).replaceAll('+', ' '));
      value = eq < 0 ? '' : decodeURIComponent(part.slice(eq + 1).replaceAll('+', ' '));
    } catch {
      throw new AppError('validation_error', `metadata filter: "${part}" is not URL-encoded correctly`);
    }
    if (eq < 0) throw new AppError('validation_error', `metadata filter: "${key}" has no "=value"; give key=value pairs joined by &, e.g. metadata=user%3Du-42`);
    if (!keyPattern.test(key)) {
      throw new AppError('validation_error', `metadata filter: key "${key}" is not a label key (1-${MAX_METADATA_KEY} characters [A-Za-z0-9._/-], starting with a letter or digit)`);
    }
    if (value.length > MAX_METADATA_VALUE) throw new AppError('validation_error', `metadata filter: the value of "${key}" is longer than ${MAX_METADATA_VALUE} characters`);
    if (value.includes('\u0000')) throw new AppError('validation_error', `metadata filter: the value of "${key}" contains a NUL character, which no label has`);
    if (seen.has(key)) throw new AppError('validation_error', `metadata filter: key "${key}" is given twice`);
    seen.add(key);
    pairs.push([key, value]);
  }
  if (pairs.length > MAX_METADATA) throw new AppError('validation_error', `metadata filter: more than ${MAX_METADATA} pairs`);
  return pairs;
}
