// The client: where the server is, which key to send, how patient to be; and the
// organization-wide resources (profiles, instances, snapshots, templates, keys). Rooms come from `room()`.
import { Templates } from './templates.ts';
import { RoomkitError } from './errors.ts';
import type { ApiKey, CreatedApiKey, Instance, Profile, Snapshot, Usage } from './generated/api.ts';
import { type RequestOptions, Transport } from './http.ts';
import { environmentVariable } from './portable.ts';
import { Room, type RoomContext } from './room.ts';
import type { Health, InstancePage, InstanceState, KeyCreate, ProfileCreate, ProfileUpdate, SnapshotPage } from './types.ts';
import type { WebSocketConstructor } from './terminal.ts';

export const DEFAULT_BASE_URL = 'http://127.0.0.1:8080';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export interface RoomkitOptions {
  /** The server's address; default ROOMKIT_URL, else http://127.0.0.1:8080. */
  baseUrl?: string | undefined;
  /** The API key; default ROOMKIT_API_KEY. */
  apiKey?: string | undefined;
  /** Extra tries of a request that is safe to repeat (default 3). */
  maxRetries?: number;
  /** First backoff between tries; doubled each time, with jitter (default 250 ms). */
  retryDelayMs?: number;
  /** Give up on a request with no answer after this long (default: no limit; a create that waits can take minutes). */
  timeoutMs?: number;
  /** Between polls while following a create with onProgress (default 500 ms). */
  pollIntervalMs?: number;
  /** The fetch to use (default the global one). */
  fetch?: typeof fetch;
  /**
   * The WebSocket terminals use (default the global one, which Node.js has from version
   * 22): on Node.js 18 and 20 give one, e.g. the `ws` package's `WebSocket`.
   */
  WebSocket?: WebSocketConstructor;
}

export class Roomkit {
  readonly baseUrl: string;
  readonly profiles: Profiles;
  readonly instances: Instances;
  readonly snapshots: Snapshots;
  /** Templates built from Dockerfiles. */
  readonly templates: Templates;
  readonly keys: Keys;
  readonly #transport: Transport;
  readonly #context: RoomContext;
  /** Profile names resolved to ids, once per client: after renaming a profile, use a new client or its id. */
  readonly #profileIds = new Map<string, Promise<string>>();

  constructor(options: RoomkitOptions = {}) {
    const baseUrl = (options.baseUrl ?? nonEmpty(environmentVariable('ROOMKIT_URL')) ?? DEFAULT_BASE_URL).replace(/\/+$/, '');
    let parsed: URL;
    try {
      parsed = new URL(baseUrl);
    } catch {
      throw new TypeError(`baseUrl "${baseUrl}" is not a URL; expected e.g. ${DEFAULT_BASE_URL}`);
    }
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new TypeError(`baseUrl "${baseUrl}" must be http:// or https://`);
    this.baseUrl = baseUrl;
    this.#transport = new Transport({
      baseUrl,
      apiKey: nonEmpty(options.apiKey) ?? nonEmpty(environmentVariable('ROOMKIT_API_KEY')),
      fetch: options.fetch ?? globalThis.fetch.bind(globalThis),
      maxRetries: options.maxRetries ?? 3,
      retryDelayMs: options.retryDelayMs ?? 250,
      timeoutMs: options.timeoutMs,
    });
    this.#context = {
      transport: this.#transport,
      resolveProfileId: (profile, opts) => this.resolveProfileId(profile, opts),
      homeOf: async (profileId, opts) => (await this.profiles.get(profileId, opts)).home,
      pollIntervalMs: options.pollIntervalMs ?? 500,
      WebSocket: options.WebSocket,
    };
    this.profiles = new Profiles(this.#transport, (p, o) => this.resolveProfileId(p, o));
    this.instances = new Instances(this.#transport, (p, o) => this.resolveProfileId(p, o));
    this.snapshots = new Snapshots(this.#transport);
    this.templates = new Templates(this.#transport);
    this.keys = new Keys(this.#transport);
  }

  /** A room of a profile (its id, or its name such as `default`). Nothing is sent until a method is called. */
  room(profile: string, roomId: string): Room {
    return new Room(this.#context, profile, roomId);
  }

  /** The organization's quotas and its use of each (GET /api/usage). */
  async usage(options: RequestOptions = {}): Promise<Usage> {
    return this.#transport.json('get', '/api/usage', {}, options);
  }

  /** The server's health and whether it can create instances. Needs no key. */
  async health(options: RequestOptions = {}): Promise<Health> {
    return this.#transport.json('get', '/healthz', {}, options);
  }

  /** A profile's id: a UUID is taken as an id, anything else as a name looked up in GET /api/profiles. */
  resolveProfileId(profile: string, options: RequestOptions = {}): Promise<string> {
    if (UUID.test(profile)) return Promise.resolve(profile.toLowerCase());
    let id = this.#profileIds.get(profile);
    if (id === undefined) {
      id = (async () => {
        const { profiles } = await this.#transport.json('get', '/api/profiles', {}, options);
        const found = profiles.find((p) => p.name === profile);
        if (!found) {
          throw new RoomkitError({
            status: 404,
            code: 'profile_not_found',
            message: `no profile named "${profile}" in this organization (it has: ${profiles.map((p) => p.name).join(', ') || 'none'})`,
          });
        }
        return found.profile_id;
      })();
      this.#profileIds.set(profile, id);
      // A failed lookup is not remembered, so the next call asks again.
      id.catch(() => this.#profileIds.delete(profile));
    }
    return id;
  }
}

type Resolve = (profile: string, options?: RequestOptions) => Promise<string>;

/** The organization's profiles; each method takes a profile's id or name. */
export class Profiles {
  readonly #transport: Transport;
  readonly #resolve: Resolve;

  constructor(transport: Transport, resolve: Resolve) {
    this.#transport = transport;
    this.#resolve = resolve;
  }

  async list(options: RequestOptions = {}): Promise<Profile[]> {
    return (await this.#transport.json('get', '/api/profiles', {}, options)).profiles;
  }

  /** Creates a profile; every field but `name` has a default. */
  async create(profile: ProfileCreate, options: RequestOptions = {}): Promise<Profile> {
    return this.#transport.json('post', '/api/profiles', { body: profile }, options);
  }

  async get(profile: string, options: RequestOptions = {}): Promise<Profile> {
    return this.#transport.json('get', '/api/profiles/{profile_id}', { params: { profile_id: await this.#resolve(profile, options) } }, options);
  }

  /** Sets the fields given and keeps the rest. */
  async update(profile: string, changes: ProfileUpdate, options: RequestOptions = {}): Promise<Profile> {
    return this.#transport.json('patch', '/api/profiles/{profile_id}', { params: { profile_id: await this.#resolve(profile, options) }, body: changes }, options);
  }

  /** Refused with `profile_in_use` while the profile has live instances. */
  async delete(profile: string, options: RequestOptions = {}): Promise<void> {
    await this.#transport.json('delete', '/api/profiles/{profile_id}', { params: { profile_id: await this.#resolve(profile, options) } }, options);
  }
}

export interface InstanceFilter {
  /** Only this profile's instances (id or name). */
  profile?: string;
  state?: InstanceState;
  /** Only instances carrying all these labels (their create's `metadata`), e.g. `{ user: 'u-42' }`. */
  metadata?: Record<string, string>;
  /** Page size, 1-200 (default 50). */
  limit?: number;
  cursor?: string;
}

/** The organization's instances, newest first, including stopped and failed ones. */
export class Instances {
  readonly #transport: Transport;
  readonly #resolve: Resolve;

  constructor(transport: Transport, resolve: Resolve) {
    this.#transport = transport;
    this.#resolve = resolve;
  }

  /** One page; pass `next_cursor` back as `cursor` for the next. */
  async list(filter: InstanceFilter & RequestOptions = {}): Promise<InstancePage> {
    const query = {
      ...(filter.profile === undefined ? {} : { profile_id: await this.#resolve(filter.profile, filter) }),
      ...(filter.state === undefined ? {} : { state: filter.state }),
      ...(filter.metadata === undefined ? {} : { metadata: metadataQuery(filter.metadata) }),
      ...(filter.limit === undefined ? {} : { limit: String(filter.limit) }),
      ...(filter.cursor === undefined ? {} : { cursor: filter.cursor }),
    };
    return this.#transport.json('get', '/api/instances', { query }, { signal: filter.signal });
  }

  /** Every instance matching the filter, page after page. */
  async *all(filter: Omit<InstanceFilter, 'cursor'> & RequestOptions = {}): AsyncGenerator<Instance> {
    let cursor: string | undefined;
    do {
      const page = await this.list({ ...filter, ...(cursor === undefined ? {} : { cursor }) });
      yield* page.instances;
      cursor = page.next_cursor ?? undefined;
    } while (cursor !== undefined);
  }
}

export interface SnapshotFilter {
  /** Only snapshots taken of this instance. */
  instanceId?: string;
  /** Page size, 1-200 (default 50). */
  limit?: number;
  cursor?: string;
}

/**
 * The organization's snapshots, newest first: a room's instance takes one with
 * `room.snapshot()`, and `room.create({ snapshot_id })` starts an instance from one.
 */
export class Snapshots {
  readonly #transport: Transport;

  constructor(transport: Transport) {
    this.#transport = transport;
  }

  /** One page; pass `next_cursor` back as `cursor` for the next. */
  async list(filter: SnapshotFilter & RequestOptions = {}): Promise<SnapshotPage> {
    const query = {
      ...(filter.instanceId === undefined ? {} : { instance_id: filter.instanceId }),
      ...(filter.limit === undefined ? {} : { limit: String(filter.limit) }),
      ...(filter.cursor === undefined ? {} : { cursor: filter.cursor }),
    };
    return this.#transport.json('get', '/api/snapshots', { query }, { signal: filter.signal });
  }

  /** Every snapshot matching the filter, page after page. */
  async *all(filter: Omit<SnapshotFilter, 'cursor'> & RequestOptions = {}): AsyncGenerator<Snapshot> {
    let cursor: string | undefined;
    do {
      const page = await this.list({ ...filter, ...(cursor === undefined ? {} : { cursor }) });
      yield* page.snapshots;
      cursor = page.next_cursor ?? undefined;
    } while (cursor !== undefined);
  }

  async get(snapshotId: string, options: RequestOptions = {}): Promise<Snapshot> {
    return this.#transport.json('get', '/api/snapshots/{snapshot_id}', { params: { snapshot_id: snapshotId } }, options);
  }

  /**
   * Deletes the snapshot and frees its disk; instances started from it keep their files.
   * Answers with the snapshot as it was. Not retried: a repeat would answer snapshot_not_found.
   */
  async delete(snapshotId: string, options: RequestOptions = {}): Promise<Snapshot> {
    return this.#transport.json('delete', '/api/snapshots/{snapshot_id}', { params: { snapshot_id: snapshotId } }, options);
  }
}

/** The organization's API keys. */
export class Keys {
  readonly #transport: Transport;

  constructor(transport: Transport) {
    this.#transport = transport;
  }

  async list(options: RequestOptions = {}): Promise<ApiKey[]> {
    return (await this.#transport.json('get', '/api/keys', {}, options)).keys;
  }

  /** Creates a key; the key itself is in the answer only. */
  async create(key: KeyCreate = {}, options: RequestOptions = {}): Promise<CreatedApiKey> {
    return this.#transport.json('post', '/api/keys', { body: key }, options);
  }

  /** Revokes a key; the next request made with it gets invalid_api_key. */
  async revoke(keyId: string, options: RequestOptions = {}): Promise<void> {
    await this.#transport.json('delete', '/api/keys/{key_id}', { params: { key_id: keyId } }, options);
  }
}

/** The list's `metadata` filter: `k=v` pairs joined by `&`, each part URL-encoded (the transport encodes the whole again). */
export function metadataQuery(labels: Record<string, string>): string {
  return Object.entries(labels)
    .map(([key, value]) => `${encodeURIComponent(key)}=${encodeURIComponent(value)}`)
    .join('&');
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === '' ? undefined : value.trim();
}
