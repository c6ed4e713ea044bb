// The profile resource: a VM configuration template. These TypeBox schemas are the one
// source of the profile's fields, their bounds and defaults, its TypeScript types and
// its part of the OpenAPI document.
import Type from 'typebox';
import type { EgressMode } from '../network/egress/policy.ts';
import { Network, NetworkChange } from './network-schema.ts';

export interface HostLimits {
  maxMemoryMb: number;
  maxVcpus: number;
  maxDiskMb: number;
}

export const NAME_PATTERN = '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$';
/** Debian package names (policy 5.6.7), optionally pinned: `name` or `name=version`. */
const PACKAGE_PATTERN = '^[a-z0-9][a-z0-9+.-]+(=[A-Za-z0-9.+~:-]+)?$';
/** An unprivileged POSIX user name; `root` is refused. */
const USER_PATTERN = '^(?!root$)[a-z_][a-z0-9_-]{0,31}$';
/** An absolute, normalised path: no `.` or `..` segments, no doubled or trailing slash. */
const ABS_PATH_PATTERN = '^(/(?!\\.\\.?(/|$))[A-Za-z0-9._+@-]+)+$';
const ENV_NAME_PATTERN = '^[A-Za-z_][A-Za-z0-9_]*$';
/**
 * `debian:<suite>`, `template:NAME` (a template of the organization), or
 * `oci:<name>[:<tag>]` for an OCI image layout in the server's OCI
 * directory. An `oci:` name is only roughly shaped here so that a name with `/` or `..`
 * gets the profile service's own explanation rather than a pattern mismatch.
 */
const IMAGE_PATTERN = '^(oci:[A-Za-z0-9._/:-]{1,200}|[a-z0-9][a-z0-9._/-]{0,127}(:[A-Za-z0-9._-]{1,64})?)$';

export const PROFILE_DEFAULTS = {
  image: 'debian:bookworm',
  packages: [] as string[],
  memory_mb: 1024,
  vcpus: 1,
  disk_mb: 2048,
  user: 'user',
  env: {} as Record<string, string>,
  command_timeout_s: 120,
  command_idle_output_timeout_s: 0,
  idle_timeout_s: 1800,
  idle_action: 'pause' as IdleAction,
  paused_retention_s: 7 * 86400,
  max_lifetime_s: 86400,
  network: { egress: 'internet' as EgressMode, allow: [] as string[], deny: [] as string[] },
  settings: {} as Record<string, unknown>,
  raw_files: 'all' as RawFilesPolicy,
  warm_pool: 0,
  keep_undo: false,
};

/**
 * The most instances one profile may keep booted in its warm pool. Each one holds its
 * memory and disk on the host and counts against the organization's quotas, so a
 * profile asks for a few, not for a fleet.
 */
export const MAX_WARM_POOL = 16;

/** What happens to an instance idle for idle_timeout_s: paused (its files kept), or stopped (removed). */
export const IDLE_ACTIONS = ['pause', 'stop'] as const;
export type IdleAction = (typeof IDLE_ACTIONS)[number];

/** The longest silence limit a command or profile may set: a day, as its time limit. */
export const MAX_IDLE_OUTPUT_TIMEOUT_S = 86400;

/** The longest a paused instance may be kept before it is removed: its disk stays held meanwhile. */
export const MAX_PAUSED_RETENTION_S = 90 * 86400;

/** What the unauthenticated raw endpoint serves of an instance: any file, files a command listed, or none. */
export const RAW_FILES_POLICIES = ['all', 'changed', 'off'] as const;
export type RawFilesPolicy = (typeof RAW_FILES_POLICIES)[number];

export const MAX_SETTINGS_BYTES = 16 * 1024;

/** The fields of a profile a caller may set, each optional; bounds follow the host. */
export function profileFieldSchemas(limits: HostLimits) {
  return {
    image: Type.String({
      pattern: IMAGE_PATTERN,
      description: 'Base image of the root filesystem: `debian:bookworm`, `debian:trixie`, `template:NAME` for a template of the organization built from a Dockerfile, or `oci:<name>[:<tag>]` for an OCI image layout the operator put in the server\'s OCI directory.',
      default: PROFILE_DEFAULTS.image,
    }),
    packages: Type.Array(Type.String({ pattern: PACKAGE_PATTERN, maxLength: 128 }), {
      maxItems: 200,
      uniqueItems: true,
      description: 'Distribution packages installed into the image, e.g. `["nodejs", "jq"]`.',
      default: PROFILE_DEFAULTS.packages,
    }),
    memory_mb: Type.Integer({
      minimum: 128,
      maximum: limits.maxMemoryMb,
      description: 'Memory of each instance, MiB.',
      default: PROFILE_DEFAULTS.memory_mb,
    }),
    vcpus: Type.Integer({
      minimum: 1,
      maximum: limits.maxVcpus,
      description: 'CPUs each instance may use.',
      default: PROFILE_DEFAULTS.vcpus,
    }),
    disk_mb: Type.Integer({
      minimum: 256,
      maximum: limits.maxDiskMb,
      description: 'Size of the writable filesystem layer of each instance, MiB.',
      default: PROFILE_DEFAULTS.disk_mb,
    }),
    user: Type.String({
      pattern: USER_PATTERN,
      description: 'Unprivileged user that commands run as (not `root`).',
      default: PROFILE_DEFAULTS.user,
    }),
    home: Type.String({
      pattern: ABS_PATH_PATTERN,
      maxLength: 256,
      description: "Home and working directory of the user; defaults to `/home/<user>`.",
    }),
    // TypeBox turns a key schema into patternProperties, which leave a key that does not
    // match unchecked (and its maxLength is dropped), so the names are checked here.
    env: Type.Record(Type.String(), Type.String({ maxLength: 4096 }), {
      propertyNames: { pattern: ENV_NAME_PATTERN, maxLength: 128 },
      maxProperties: 100,
      description: 'Environment variables set for every command.',
      default: PROFILE_DEFAULTS.env,
    }),
    command_timeout_s: Type.Integer({
      minimum: 1,
      maximum: 86400,
      description: 'Time limit of a command, seconds: the default, and the most a command may ask for.',
      default: PROFILE_DEFAULTS.command_timeout_s,
    }),
    command_idle_output_timeout_s: Type.Integer({
      minimum: 0,
      maximum: MAX_IDLE_OUTPUT_TIMEOUT_S,
      description:
        'Silence limit of a command, seconds: one that prints nothing (stdout nor stderr) for this long is ended as at its time limit, ' +
        'with the end reason `no_output`. The default of a command\'s `idle_output_timeout_s`, but for background commands (none unless they ask); 0 = none.',
      default: PROFILE_DEFAULTS.command_idle_output_timeout_s,
    }),
    idle_timeout_s: Type.Integer({
      minimum: 0,
      maximum: 30 * 86400,
      description: 'Pause or stop (idle_action) an instance after this long without a command or file request; 0 = never.',
      default: PROFILE_DEFAULTS.idle_timeout_s,
    }),
    idle_action: Type.Enum(IDLE_ACTIONS, {
      description:
        'What happens to an instance idle for idle_timeout_s: `pause` (its machine stops, its files are kept, and the next request ' +
        'resumes it; removed after paused_retention_s) or `stop` (removed with everything in it). A runtime that cannot pause stops.',
      default: PROFILE_DEFAULTS.idle_action,
    }),
    paused_retention_s: Type.Integer({
      minimum: 1,
      maximum: MAX_PAUSED_RETENTION_S,
      description:
        'How long a paused instance is kept, seconds from its pause; then it is removed with its files (state history: `retention`). ' +
        `At most ${MAX_PAUSED_RETENTION_S} (90 days).`,
      default: PROFILE_DEFAULTS.paused_retention_s,
    }),
    max_lifetime_s: Type.Integer({
      minimum: 0,
      maximum: 365 * 86400,
      description: 'Stop an instance this long after it was created, whatever it is doing; 0 = never.',
      default: PROFILE_DEFAULTS.max_lifetime_s,
    }),
    network: Network,
    settings: Type.Record(Type.String(), Type.Unknown(), {
      description: `Free-form organization-specific JSON, stored and returned as given (at most ${MAX_SETTINGS_BYTES} bytes).`,
      default: PROFILE_DEFAULTS.settings,
    }),
    raw_files: Type.Enum(RAW_FILES_POLICIES, {
      description:
        'What the unauthenticated raw endpoint GET /vm/{instance_id}/file/{path} serves of this profile\'s instances: ' +
        '`all` (the specification\'s behaviour: any file the instance\'s user can read, to anyone holding the instance id), ' +
        '`changed` (only files a command listed in files_changed as created or modified, and not deleted since), or `off` (nothing). ' +
        'Takes effect at once for live instances. The authenticated read (…/file/{path}?raw=1) is not affected.',
      default: PROFILE_DEFAULTS.raw_files,
    }),
    warm_pool: Type.Integer({
      minimum: 0,
      maximum: MAX_WARM_POOL,
      description:
        'Instances of this profile kept booted and unassigned, so that a create in a new room takes one at once instead of ' +
        'starting a machine (refilled in the background after each one is taken). Pooled instances count against the ' +
        'organization\'s quotas like any other; a change to any other field of the profile replaces them. 0: no pool.',
      default: PROFILE_DEFAULTS.warm_pool,
    }),
    keep_undo: Type.Boolean({
      description:
        'Keep each command\'s undo point, so that POST .../commands/{command_id}/revert can put back the files it changed. ' +
        'Instances get a btrfs writable layer (about 0.2 s more to create) that can keep undo points; a command may then also opt out ' +
        '(`"keep_undo": false`). Undo points are bounded per instance (ROOMKIT_UNDO_MAX_POINTS, ROOMKIT_UNDO_MAX_MB; the oldest dropped first). ' +
        'Takes effect for instances created after the change.',
      default: PROFILE_DEFAULTS.keep_undo,
    }),
  };
}

/** What a profile's warm pool holds now, as GET of the profile shows it. */
export const WarmPoolStatus = Type.Object(
  {
    ready: Type.Integer({ minimum: 0, description: 'Pooled instances booted and waiting for a room' }),
    starting: Type.Integer({ minimum: 0, description: 'Pooled instances still being made' }),
  },
  { description: 'The instances the profile\'s warm pool holds now (made from its current fields)' },
);
export type WarmPoolStatus = Type.Static<typeof WarmPoolStatus>;

export function profileSchemas(limits: HostLimits) {
  const fields = profileFieldSchemas(limits);
  const name = Type.String({ pattern: NAME_PATTERN, description: 'Unique within the organization.' });
  const optionalFields = {
    image: Type.Optional(fields.image),
    packages: Type.Optional(fields.packages),
    memory_mb: Type.Optional(fields.memory_mb),
    vcpus: Type.Optional(fields.vcpus),
    disk_mb: Type.Optional(fields.disk_mb),
    user: Type.Optional(fields.user),
    home: Type.Optional(fields.home),
    env: Type.Optional(fields.env),
    command_timeout_s: Type.Optional(fields.command_timeout_s),
    command_idle_output_timeout_s: Type.Optional(fields.command_idle_output_timeout_s),
    idle_timeout_s: Type.Optional(fields.idle_timeout_s),
    idle_action: Type.Optional(fields.idle_action),
    paused_retention_s: Type.Optional(fields.paused_retention_s),
    max_lifetime_s: Type.Optional(fields.max_lifetime_s),
    network: Type.Optional(NetworkChange),
    settings: Type.Optional(fields.settings),
    raw_files: Type.Optional(fields.raw_files),
    warm_pool: Type.Optional(fields.warm_pool),
    keep_undo: Type.Optional(fields.keep_undo),
  };
  return {
    create: Type.Object({ name, ...optionalFields }, { additionalProperties: false }),
    patch: Type.Object({ name: Type.Optional(name), ...optionalFields }, { additionalProperties: false }),
    profile: Type.Object({
      profile_id: Type.String({ format: 'uuid' }),
      name,
      ...fields,
      warm_pool_instances: WarmPoolStatus,
      created_at: Type.String({ format: 'date-time' }),
      updated_at: Type.String({ format: 'date-time' }),
    }),
  };
}

type Schemas = ReturnType<typeof profileSchemas>;
export type ProfileCreate = Type.Static<Schemas['create']>;
export type ProfilePatch = Type.Static<Schemas['patch']>;
export type Profile = Type.Static<Schemas['profile']>;
/** Everything a profile configures, with defaults applied; a runtime gets its part of it (machineSpecOf). */
export type ProfileSpec = Omit<Profile, 'profile_id' | 'name' | 'warm_pool_instances' | 'created_at' | 'updated_at'>;
