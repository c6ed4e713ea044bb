// Profiles: create, read, change and delete an organization's VM configuration
// templates. Input has been validated against the schemas in profile-schema.ts; this
// module applies defaults and the rules a schema cannot express.
import { createHash, randomUUID } from 'node:crypto';
import { AppError } from '../errors.ts';
import { isOciImage, OciImageError, parseOciImage } from '../images/oci/oci-image.ts';
import type { Db } from '../store/db.ts';
import type { MachineSpec } from '../runtimes/types.ts';
import { isUniqueViolation } from '../store/errors.ts';
import type { ProfileRow } from '../store/schema.ts';
import {
  type HostLimits,
  MAX_SETTINGS_BYTES,
  PROFILE_DEFAULTS,
  type Profile,
  type ProfileCreate,
  type ProfilePatch,
  type ProfileSpec,
  type WarmPoolStatus,
} from './profile-schema.ts';
import { liveInRooms, pooledOf } from './instance-queries.ts';
import { decodeSpec } from './stored-json.ts';
import { applyNetworkChange, checkNetwork } from './network-policy.ts';
import { nowIso } from '../lib/time.ts';
import { noteFacts, noteOperation } from './operations.ts';
import { isTemplateName, templateNameOf } from './dockerfile-parser.ts';
import type { Templates } from './templates.ts';

export const DEFAULT_PROFILE_NAME = 'default';
/** The profile every organization also gets, for code contexts: Python with matplotlib, pandas and Pillow. */
export const CODE_INTERPRETER_PROFILE_NAME = 'code-interpreter';

/** What the `code-interpreter` profile is made with (the rest are the defaults). */
export function codeInterpreterProfile(): ProfileCreate {
  return { name: CODE_INTERPRETER_PROFILE_NAME, packages: ['python3-matplotlib', 'python3-pandas', 'python3-pil'] };
}

/** Told of every profile created, changed or deleted (the warm pool follows them). */
export type ProfileListener = (organizationId: string, profileId: string) => void;

export class Profiles {
  private readonly db: Db;
  private readonly limits: HostLimits;
  private readonly listeners: ProfileListener[];
  /** Where `template:NAME` images are checked; without it, a profile cannot name one. */
  private templates: Pick<Templates, 'source'> | undefined;

  constructor(db: Db, limits: HostLimits, listeners: ProfileListener[] = []) {
    this.db = db;
    this.limits = limits;
    this.listeners = listeners;
  }

  /** A service bound to a transaction, for work that must commit together. */
  withDb(db: Db): Profiles {
    const bound = new Profiles(db, this.limits, this.listeners);
    bound.templates = this.templates;
    return bound;
  }

  /** Lets profiles name the organization's templates (`image: "template:NAME"`), checked as they are saved. */
  useTemplates(templates: Pick<Templates, 'source'>): void {
    this.templates = templates;
  }

  /** A `template:NAME` image must name a template of the organization that has an image. */
  private async checkTemplate(organizationId: string, spec: ProfileSpec): Promise<void> {
    const name = templateNameOf(spec.image);
    if (name === undefined) return;
    if (!this.templates) throw fieldError('image', 'this server builds no templates; use a debian: or oci: image');
    try {
      await this.templates.source(organizationId, name);
    } catch (err) {
      if (err instanceof AppError && (err.code === 'template_not_found' || err.code === 'template_unusable')) {
        throw fieldError('image', `image "${spec.image}": ${err.message}`);
      }
      throw err;
    }
  }

  /** Calls `listener` after each profile is created, changed or deleted. */
  onChange(listener: ProfileListener): void {
    this.listeners.push(listener);
  }

  private changed(organizationId: string, profileId: string): void {
    for (const listener of this.listeners) listener(organizationId, profileId);
  }

  async create(organizationId: string, input: ProfileCreate): Promise<Profile> {
    noteOperation('profile.create');
    const { name, ...fields } = input;
    const spec = applyChanges(defaultSpec(this.limits), fields);
    await this.checkTemplate(organizationId, spec);
    const now = nowIso();
    const row: ProfileRow = {
      id: randomUUID(),
      organization_id: organizationId,
      name,
      spec: JSON.stringify(spec),
      created_at: now,
      updated_at: now,
      deleted_at: null,
    };
    try {
      await this.db.insertInto('profiles').values(row).execute();
    } catch (err) {
      if (isUniqueViolation(err)) throw nameTaken(name);
      throw err;
    }
    noteFacts({ profileId: row.id });
    this.changed(organizationId, row.id);
    return (await this.withPools([row]))[0]!;
  }

  async list(organizationId: string): Promise<Profile[]> {
    const rows = await this.db
      .selectFrom('profiles')
      .selectAll()
      .where('organization_id', '=', organizationId)
      .where('deleted_at', 'is', null)
      .orderBy('created_at')
      .orderBy('id')
      .execute();
    return this.withPools(rows);
  }

  async get(organizationId: string, profileId: string): Promise<Profile> {
    return (await this.withPools([await this.getRow(organizationId, profileId)]))[0]!;
  }

  /** The profile, or undefined when there is none (or it was deleted). */
  async find(organizationId: string, profileId: string): Promise<Profile | undefined> {
    const row = await this.findRow(organizationId, profileId);
    return row ? (await this.withPools([row]))[0] : undefined;
  }

  async update(organizationId: string, profileId: string, patch: ProfilePatch): Promise<Profile> {
    noteOperation('profile.update', { profileId });
    const row = await this.getRow(organizationId, profileId);
    const { name, ...fields } = patch;
    const spec = applyChanges(specOf(toProfile(row)), fields);
    if (fields.image !== undefined) await this.checkTemplate(organizationId, spec);
    const updated: ProfileRow = {
      ...row,
      name: name ?? row.name,
      spec: JSON.stringify(spec),
      updated_at: nowIso(),
    };
    try {
      await this.db
        .updateTable('profiles')
        .set({ name: updated.name, spec: updated.spec, updated_at: updated.updated_at })
        .where('id', '=', row.id)
        .execute();
    } catch (err) {
      if (isUniqueViolation(err)) throw nameTaken(updated.name);
      throw err;
    }
    this.changed(organizationId, row.id);
    return (await this.withPools([updated]))[0]!;
  }

  async delete(organizationId: string, profileId: string): Promise<void> {
    noteOperation('profile.delete', { profileId });
    const row = await this.getRow(organizationId, profileId);
    await this.db.transaction().execute(async (trx) => {
      // Its warm pool's instances go with it (the pool removes them once it is deleted).
      const live = await liveInRooms(trx, row.id);
      if (live > 0) {
        throw new AppError(
          'profile_in_use',
          `profile ${row.id} has ${live} live instance(s); delete them first`,
          { live_instances: live },
          { code: 'delete_profile_instances', profile_id: row.id },
        );
      }
      await trx.updateTable('profiles').set({ deleted_at: nowIso() }).where('id', '=', row.id).execute();
    });
    this.changed(organizationId, row.id);
  }

  /** The profiles of `rows` as the API shows them, with what their warm pools hold now. */
  private async withPools(rows: ProfileRow[]): Promise<Profile[]> {
    const profiles = rows.map(toProfile);
    const pooled = profiles.some((p) => p.warm_pool > 0)
      ? await pooledOf(this.db, profiles.map((p) => p.profile_id))
      : [];
    return profiles.map((profile) => {
      const key = warmPoolKey(specOf(profile));
      const status: WarmPoolStatus = { ready: 0, starting: 0 };
      for (const i of pooled) {
        // Instances made from an older version of the profile are on their way out.
        if (i.profile_id !== profile.profile_id || i.warm_pool_key !== key) continue;
        if (i.state === 'ready') status.ready += 1;
        else if (i.state !== 'stopping') status.starting += 1;
      }
      return { ...profile, warm_pool_instances: status };
    });
  }

  /** The id of the organization's profile with this name, if there is one. */
  async idOfName(organizationId: string, name: string): Promise<string | undefined> {
    const row = await this.db
      .selectFrom('profiles')
      .select('id')
      .where('organization_id', '=', organizationId)
      .where('name', '=', name)
      .where('deleted_at', 'is', null)
      .executeTakeFirst();
    return row?.id;
  }

  private async getRow(organizationId: string, profileId: string): Promise<ProfileRow> {
    const row = await this.findRow(organizationId, profileId);
    if (!row) throw profileNotFound(profileId, await this.namesOf(organizationId));
    return row;
  }

  /** The names of the organization's profiles, for an error that says which there are. */
  private async namesOf(organizationId: string): Promise<string[]> {
    const rows = await this.db
      .selectFrom('profiles')
      .select('name')
      .where('organization_id', '=', organizationId)
      .where('deleted_at', 'is', null)
      .orderBy('name')
      .limit(PROFILE_NAMES_SHOWN + 1)
      .execute();
    return rows.map((r) => r.name);
  }

  private findRow(organizationId: string, profileId: string): Promise<ProfileRow | undefined> {
    return this.db
      .selectFrom('profiles')
      .selectAll()
      .where('id', '=', profileId)
      .where('organization_id', '=', organizationId)
      .where('deleted_at', 'is', null)
      .executeTakeFirst();
  }
}

/** How many of the organization's profile names a profile_not_found names. */
const PROFILE_NAMES_SHOWN = 20;

/** profile_not_found, naming the organization's profiles when they are known (`names`). */
export function profileNotFound(profileId: string, names?: string[]): AppError {
  if (names === undefined) return new AppError('profile_not_found', `no profile ${profileId} in this organization`);
  const listed = names.slice(0, PROFILE_NAMES_SHOWN).map((n) => `"${n}"`).join(', ');
  const which = names.length === 0 ? 'it has none' : `its profiles are ${listed}${names.length > PROFILE_NAMES_SHOWN ? ', …' : ''}`;
  return new AppError('profile_not_found', `no profile ${profileId} in this organization; ${which}`, { profiles: names.slice(0, PROFILE_NAMES_SHOWN) });
}

function nameTaken(name: string): AppError {
  return new AppError('profile_name_taken', `a profile named "${name}" already exists in this organization`);
}

/** The defaults, lowered where this server allows less (e.g. a host with little memory). */
function defaultSpec(limits: HostLimits): ProfileSpec {
  return structuredClone({
    ...PROFILE_DEFAULTS,
    memory_mb: Math.min(PROFILE_DEFAULTS.memory_mb, limits.maxMemoryMb),
    vcpus: Math.min(PROFILE_DEFAULTS.vcpus, limits.maxVcpus),
    disk_mb: Math.min(PROFILE_DEFAULTS.disk_mb, limits.maxDiskMb),
    home: `/home/${PROFILE_DEFAULTS.user}`,
  });
}

/** The spec that results from setting `changes` on `base`; `network` merges by field. */
function applyChanges(base: ProfileSpec, changes: Omit<ProfilePatch, 'name'>): ProfileSpec {
  const { network, home, user, ...rest } = changes;
  const next: ProfileSpec = {
    ...base,
    ...rest,
    network: applyNetworkChange(base.network, network),
  };
  if (user !== undefined) {
    next.user = user;
    // A home that followed the old user's name follows the new one.
    if (home === undefined && base.home === `/home/${base.user}`) next.home = `/home/${user}`;
  }
  if (home !== undefined) next.home = home;
  if (isOciImage(next.image)) {
    try {
      parseOciImage(next.image);
    } catch (err) {
      if (err instanceof OciImageError) throw fieldError('image', err.message);
      throw err;
    }
    // An OCI image is used as it is; nothing installs packages into it.
    if (next.packages.length > 0) {
      throw fieldError('packages', 'packages cannot be installed into an OCI image (`oci:...`); build them into the image and leave packages empty');
    }
  }
  const template = templateNameOf(next.image);
  if (template !== undefined) {
    if (!isTemplateName(template)) throw fieldError('image', `image "${next.image}": "${template}" is not a template name`);
    // The template's files are its image; its instances start from them, not from a pool booted ahead.
    if (next.packages.length > 0) {
      throw fieldError('packages', 'packages cannot be installed into a template (`template:...`); install them with RUN in its Dockerfile and leave packages empty');
    }
    if (next.warm_pool > 0) throw fieldError('warm_pool', 'a profile of a template (`template:...`) keeps no warm pool; leave warm_pool at 0');
  }
  checkNetwork(next.network);
  const settingsBytes = Buffer.byteLength(JSON.stringify(next.settings));
  if (settingsBytes > MAX_SETTINGS_BYTES) {
    throw fieldError('settings', `settings is ${settingsBytes} bytes of JSON; the most is ${MAX_SETTINGS_BYTES}`);
  }
  return next;
}

/** A validation error in the same shape as the schema validator's. */
function fieldError(field: string, message: string): AppError {
  return new AppError('validation_error', message, { errors: [{ field, message }] });
}

function toProfile(row: ProfileRow): Omit<Profile, 'warm_pool_instances'> {
  const spec = decodeSpec(row.spec, `profile ${row.id}`);
  return {
    profile_id: row.id,
    name: row.name,
    ...spec,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

export function specOf(profile: Omit<Profile, 'warm_pool_instances'> & { warm_pool_instances?: unknown }): ProfileSpec {
  const { profile_id: _id, name: _name, created_at: _c, updated_at: _u, warm_pool_instances: _w, ...spec } = profile;
  return spec;
}

/**
 * What a warm pool's instance must have been made from to be handed out for the profile
 * now: a hash of every field but `warm_pool` itself (a bigger or smaller pool changes
 * no instance), keys sorted so that the order fields were stored in does not matter.
 */
export function warmPoolKey(spec: ProfileSpec): string {
  const { warm_pool: _size, ...made } = spec;
  return createHash('sha256').update(canonicalJson(made)).digest('hex').slice(0, 32);
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
    entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/** What a runtime is told about the machine to make for a profile. */
export function machineSpecOf(spec: ProfileSpec): MachineSpec {
  return {
    image: spec.image,
    packages: spec.packages,
    user: spec.user,
    home: spec.home,
    memory_mb: spec.memory_mb,
    vcpus: spec.vcpus,
    disk_mb: spec.disk_mb,
    network: spec.network,
    ...(spec.keep_undo ? { keep_undo: true } : {}),
  };
}
