// How E2B's objects map onto roomkit's. A sandbox is an instance and its id is the
// instance's id, so the same machine is found through REST, the CLI and the console; an
// instance created through E2B lives in a room of its own named `e2b-` and twelve hex
// digits. A template is one of the organization's profiles, by id or by name, or one
// of its snapshots by id; the SDKs' own defaults are the profiles every organization
// has: `base` the `default` profile, `code-interpreter-v1` (the code interpreter
// package's) the `code-interpreter` profile.
import { randomBytes } from 'node:crypto';
import type { Instance } from '../../core/instance-schema.ts';
import type { Profile } from '../../core/profile-schema.ts';
import { CODE_INTERPRETER_PROFILE_NAME, DEFAULT_PROFILE_NAME, type Profiles } from '../../core/profiles.ts';
import type { SnapshotSource } from '../../core/instances.ts';
import { AppError } from '../../errors.ts';
import type { Services } from '../../services.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * The envd version sandboxes report. The SDK turns features on by it: 0.5.7 gives
 * octet-stream uploads and closing stdin; metadata in extended attributes (0.6.2) and
 * watch events with their entries (0.6.3) are not served yet.
 */
export const ENVD_VERSION = '0.5.7';
/** The port envd listens on in an E2B sandbox, which the SDK names in E2b-Sandbox-Port. */
export const ENVD_PORT = 49983;
/** The port E2B's code interpreter listens on in a sandbox (interpreter-routes.ts serves it). */
export const INTERPRETER_PORT = 49999;
/** What the SDK's create gives when it is asked for no timeout: its own default. */
export const DEFAULT_TIMEOUT_S = 300;
/** The client id a sandbox answers with: there is one node. */
const CLIENT_ID = 'roomkit';
/** The SDKs' default templates and the profile each means: `e2b`'s, and `@e2b/code-interpreter`'s. */
export const DEFAULT_TEMPLATES: Readonly<Record<string, string>> = { base: DEFAULT_PROFILE_NAME, 'code-interpreter-v1': CODE_INTERPRETER_PROFILE_NAME };
/** endAt of an instance without a deadline. */
const NO_DEADLINE = '9999-12-31T23:59:59.000Z';

export type SandboxState = 'running' | 'paused';

/** The room of an instance created through E2B. */
export function newRoomId(): string {
  return `e2b-${randomBytes(6).toString('hex')}`;
}

/**
 * What a create's template names: a snapshot of the organization (by id: the instance
 * starts from it, in its profile), else one of its profiles by id or name.
 */
export async function templateSource(services: Pick<Services, 'profiles' | 'snapshots'>, organizationId: string, template: string | undefined): Promise<{ profile: Profile; snapshot?: SnapshotSource }> {
  if (template !== undefined && UUID.test(template)) {
    const snapshot = await services.snapshots.get(organizationId, template).catch(() => undefined);
    if (snapshot) {
      return { profile: await services.profiles.get(organizationId, snapshot.profile_id), snapshot: await services.snapshots.source(organizationId, snapshot.snapshot_id) };
    }
  }
  return { profile: await profileOfTemplate(services.profiles, organizationId, template) };
}

/** The profile a template names; 404 when the organization has none by that id or name. */
export async function profileOfTemplate(profiles: Profiles, organizationId: string, template: string | undefined): Promise<Profile> {
  const name = template === undefined || template === '' ? DEFAULT_PROFILE_NAME : (Object.hasOwn(DEFAULT_TEMPLATES, template) ? DEFAULT_TEMPLATES[template] : undefined) ?? template;
  const byId = await profiles.find(organizationId, name);
  if (byId) return byId;
  const id = await profiles.idOfName(organizationId, name);
  if (id) return profiles.get(organizationId, id);
  throw new AppError('profile_not_found', `no template ${template ?? name}: a template is one of the organization's profiles, by id or name${name !== template ? ` (the SDK's default template is the profile named "${name}")` : ''}`);
}

/** A live instance's state in E2B's terms; undefined for one that has ended (E2B no longer lists it). */
export function sandboxState(instance: Instance): SandboxState | undefined {
  if (instance.state === 'stopped' || instance.state === 'failed' || instance.state === 'lost' || instance.state === 'stopping') return undefined;
  return instance.state === 'paused' || instance.state === 'pausing' ? 'paused' : 'running';
}

/** What a sandbox's answers add to its instance: its profile's name, roomkit's preview domain, its timeout action. */
export interface SandboxExtras {
  profileName?: string | undefined;
  /**
   * Roomkit's preview domain (ROOMKIT_PREVIEW_DOMAIN), when the server has one: the SDK
   * builds a sandbox's host names from it (`getHost(port)`: `{port}-{id}.{domain}`, which
   * are roomkit's preview host names).
   */
  domain?: string | undefined;
  /** What its deadline does (getInfo's lifecycle): E2B's kill or pause. */
  onTimeout?: 'kill' | 'pause';
}

/** A sandbox as E2B's list and get describe it. */
export function sandboxOf(instance: Instance, state: SandboxState, extras: SandboxExtras = {}) {
  const { profileName, domain, onTimeout } = extras;
  return {
    sandboxID: instance.instance_id,
    templateID: instance.profile_id,
    ...(profileName === undefined ? {} : { alias: profileName }),
    clientID: CLIENT_ID,
    startedAt: instance.created_at,
    endAt: instance.expires_at ?? NO_DEADLINE,
    cpuCount: instance.resources.vcpus,
    memoryMB: instance.resources.memory_mb,
    diskSizeMB: instance.resources.disk_mb,
    metadata: instance.metadata,
    state,
    envdVersion: ENVD_VERSION,
    ...(domain === undefined ? {} : { domain }),
    // A paused sandbox is resumed by connect only: traffic never resumes it (autoResume).
    ...(onTimeout === undefined ? {} : { lifecycle: { onTimeout, autoResume: false } }),
  };
}

/** What a create or connect answers: how the SDK reaches the sandbox from then on. */
export function connectedSandbox(instance: Instance, envdAccessToken: string, extras: Pick<SandboxExtras, 'profileName' | 'domain'> = {}) {
  const { profileName, domain } = extras;
  return {
    sandboxID: instance.instance_id,
    templateID: instance.profile_id,
    ...(profileName === undefined ? {} : { alias: profileName }),
    clientID: CLIENT_ID,
    envdVersion: ENVD_VERSION,
    envdAccessToken,
    // The code interpreter SDK sends its context calls with this token alone (not the access token): the same one serves both.
    trafficAccessToken: envdAccessToken,
    domain: domain ?? null,
  };
}
