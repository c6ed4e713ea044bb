// Organizations and their API keys: the tenancy boundary. Every other service takes
// the organization id that authenticate() returned and scopes all it does by it.
import { randomUUID } from 'node:crypto';
import { AppError } from '../errors.ts';
import type { ApiKey } from './key-schema.ts';
import type { Db } from '../store/db.ts';
import { isUniqueViolation } from '../store/errors.ts';
import type { ApiKeyRow, OrganizationRow } from '../store/schema.ts';
import { generateApiKey, hashApiKey, type KeyEnv, keyPrefix, parseApiKey, sameHash } from './apikeys.ts';
import { CODE_INTERPRETER_PROFILE_NAME, codeInterpreterProfile, DEFAULT_PROFILE_NAME, type Profiles } from './profiles.ts';
import { nowIso } from '../lib/time.ts';
import { noteFacts, noteOperation } from './operations.ts';

/** Who is calling: the result of a successful authentication. */
export interface Caller {
  organizationId: string;
  keyId: string;
  env: KeyEnv;
}

export interface Organization {
  organization_id: string;
  name: string;
  created_at: string;
}

/** last_used_at is written at most this often per key, not on every request. */
const LAST_USED_RESOLUTION_MS = 60_000;

export class Organizations {
  private readonly db: Db;
  private readonly profiles: Profiles;

  constructor(deps: { db: Db; profiles: Profiles }) {
    this.db = deps.db;
    this.profiles = deps.profiles;
  }

  /** The organization with this name, created (with its `default` and `code-interpreter` profiles) if missing. */
  async ensure(name: string): Promise<{ organization: Organization; created: boolean }> {
    const existing = await this.findByName(name);
    if (existing) return { organization: toOrganization(existing), created: false };
    const row: OrganizationRow = { id: randomUUID(), name, created_at: nowIso() };
    try {
      await this.db.transaction().execute(async (trx) => {
        await trx.insertInto('organizations').values(row).execute();
        const first = await this.profiles.withDb(trx).create(row.id, { name: DEFAULT_PROFILE_NAME });
        // Listed after `default` (profiles come by creation time), which callers take as the organization's first profile.
        while (nowIso() <= first.created_at) await new Promise((resolve) => setTimeout(resolve, 1));
        await this.profiles.withDb(trx).create(row.id, codeInterpreterProfile());
      });
    } catch (err) {
      // Created by a concurrent caller (another process on the same data directory).
      const winner = isUniqueViolation(err) ? await this.findByName(name) : undefined;
      if (!winner) throw err;
      return { organization: toOrganization(winner), created: false };
    }
    return { organization: toOrganization(row), created: true };
  }

  /**
   * Gives the `code-interpreter` profile to organizations made before every organization
   * got one: those that never had a profile of that name (one deleted, or renamed from
   * it, is not made again). Called at start; answers how many it made.
   */
  async addCodeInterpreterProfiles(): Promise<number> {
    const rows = await this.db
      .selectFrom('organizations')
      .select('id')
      .where(({ not, exists, selectFrom }) =>
        not(exists(selectFrom('profiles').select('profiles.id').whereRef('profiles.organization_id', '=', 'organizations.id').where('profiles.name', '=', CODE_INTERPRETER_PROFILE_NAME))),
      )
      .execute();
    let made = 0;
    for (const row of rows) {
      try {
        await this.profiles.create(row.id, codeInterpreterProfile());
        made += 1;
      } catch (err) {
        // Made meanwhile by another process on the same store.
        if (!(err instanceof AppError && err.code === 'profile_name_taken')) throw err;
      }
    }
    return made;
  }

  /** An organization by its name or id (for the operator), or an organization_not_found error. */
  async find(nameOrId: string): Promise<Organization> {
    const row = await this.db
      .selectFrom('organizations')
      .selectAll()
      .where((eb) => eb.or([eb('name', '=', nameOrId), eb('id', '=', nameOrId)]))
      .executeTakeFirst();
    if (!row) throw new AppError('organization_not_found', `no organization named or with id "${nameOrId}"; \`roomkit keys create --org NAME\` creates one`);
    return toOrganization(row);
  }

  async count(): Promise<number> {
    const row = await this.db
      .selectFrom('organizations')
      .select(({ fn }) => fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  /** Creates a key; the returned secret is the only time the key is ever visible. */
  async createKey(
    organizationId: string,
    options: { env: KeyEnv; name?: string | undefined },
  ): Promise<{ info: ApiKey; secret: string }> {
    noteOperation('key.create');
    // PostgreSQL's text cannot hold a NUL: refused on either store, rather than a 500 on one.
    if (options.name?.includes('\u0000')) throw new AppError('validation_error', 'name contains a NUL character, which a name cannot carry');
    const secret = generateApiKey(options.env);
    const row: ApiKeyRow = {
      id: randomUUID(),
      organization_id: organizationId,
      env: options.env,
      name: options.name ?? null,
      prefix: keyPrefix(secret),
      hash: hashApiKey(secret),
      created_at: nowIso(),
      last_used_at: null,
      revoked_at: null,
    };
    await this.db.insertInto('api_keys').values(row).execute();
    noteFacts({ targetKeyId: row.id });
    return { info: toKeyInfo(row), secret };
  }

  async listKeys(organizationId: string): Promise<ApiKey[]> {
    const rows = await this.db
      .selectFrom('api_keys')
      .selectAll()
      .where('organization_id', '=', organizationId)
      .where('revoked_at', 'is', null)
      .orderBy('created_at')
      .orderBy('id')
      .execute();
    return rows.map(toKeyInfo);
  }

  async revokeKey(organizationId: string, keyId: string): Promise<void> {
    noteOperation('key.revoke', { targetKeyId: keyId });
    const result = await this.db
      .updateTable('api_keys')
      .set({ revoked_at: nowIso() })
      .where('id', '=', keyId)
      .where('organization_id', '=', organizationId)
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
    if (Number(result.numUpdatedRows) === 0) {
      throw new AppError('key_not_found', `no active API key ${keyId} in this organization`);
    }
  }

  /**
   * The caller a presented key belongs to. Rows are found by the key's public prefix
   * and then compared by hash in constant time, so response timing says nothing about
   * how much of a guessed key was right.
   */
  async authenticate(presented: string): Promise<Caller> {
    if (parseApiKey(presented) === null) {
      throw new AppError(
        'invalid_api_key',
        'the API key is malformed: expected rk_live_ or rk_test_ followed by 32 lowercase hex characters',
      );
    }
    const hash = hashApiKey(presented);
    const candidates = await this.db
      .selectFrom('api_keys')
      .selectAll()
      .where('prefix', '=', keyPrefix(presented))
      .execute();
    const row = candidates.find((c) => sameHash(c.hash, hash));
    if (!row || row.revoked_at !== null) {
      throw new AppError('invalid_api_key', 'the API key is not valid: it is unknown or has been revoked');
    }
    const now = Date.now();
    if (row.last_used_at === null || now - Date.parse(row.last_used_at) >= LAST_USED_RESOLUTION_MS) {
      await this.db.updateTable('api_keys').set({ last_used_at: new Date(now).toISOString() }).where('id', '=', row.id).execute();
    }
    return { organizationId: row.organization_id, keyId: row.id, env: row.env };
  }

  /** Whether a caller's key is still valid (not revoked), for credentials derived from it earlier. */
  async keyIsActive(caller: Caller): Promise<boolean> {
    const row = await this.db.selectFrom('api_keys').select('revoked_at').where('id', '=', caller.keyId).executeTakeFirst();
    return row !== undefined && row.revoked_at === null;
  }

  private async findByName(name: string): Promise<OrganizationRow | undefined> {
    return this.db.selectFrom('organizations').selectAll().where('name', '=', name).executeTakeFirst();
  }
}

function toOrganization(row: OrganizationRow): Organization {
  return { organization_id: row.id, name: row.name, created_at: row.created_at };
}

function toKeyInfo(row: ApiKeyRow): ApiKey {
  return {
    key_id: row.id,
    name: row.name,
    prefix: row.prefix,
    env: row.env,
    created_at: row.created_at,
    last_used_at: row.last_used_at,
  };
}
