// Idempotent requests, as the IETF httpapi draft "The Idempotency-Key HTTP Header Field"
// describes them: the first request with a key runs and its answer is kept; a retry
// with the same key and the same request gets that answer (after waiting for it while
// the first still runs) and runs nothing; the same key with another request is
// refused. Keys belong to an organization and expire a while after their first use.
//
// Races are settled by the store, never by a read before a write: the first request
// inserts the key's row (its primary key is the organization and the key), and a
// request whose insert finds a row there is a retry, on this node or another.
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { AppError } from '../errors.ts';
import type { Database } from '../store/schema.ts';

/** The answer a key keeps: its HTTP status and its JSON body as sent. */
export interface KeptAnswer {
  status: number;
  body: string;
}

/** What a request with a key is to do. */
export type KeyClaim =
  /** Run, then settle with the answer to keep, or null to free the key (nothing was done). */
  | { kind: 'first'; settle(answer: KeptAnswer | null): Promise<void> }
  /** Answer this, run nothing. */
  | { kind: 'replay'; answer: KeptAnswer };

/** How long a retry waits for the first request with its key before 409 idempotency_key_in_use. */
export const KEY_WAIT_MAX_MS = 10 * 60_000;
/** How often a retry reads the key's row while its first request runs on another node. */
const POLL_MS = 200;

export interface IdempotencyKeysOptions {
  db: Kysely<Database>;
  log: Logger;
  /** How long a key lasts from its first use, seconds. */
  ttlS: number;
  /** This node's id: the rows it holds while their requests run. */
  owner: string;
  /** Tests shorten the wait. */
  waitMaxMs?: number;
}

export class IdempotencyKeys {
  private readonly db: Kysely<Database>;
  private readonly log: Logger;
  private readonly ttlS: number;
  private readonly owner: string;
  private readonly waitMaxMs: number;
  /** First requests running on this node, by organization and key: what a local retry waits on. */
  private readonly running = new Map<string, Promise<void>>();

  constructor(options: IdempotencyKeysOptions) {
    this.db = options.db;
    this.log = options.log;
    this.ttlS = options.ttlS;
    this.owner = options.owner;
    this.waitMaxMs = options.waitMaxMs ?? KEY_WAIT_MAX_MS;
  }

  /**
   * Claims `key` for a request whose method, path and body give `fingerprint`. Throws
   * 422 idempotency_key_reused when the key was used for another request, and 409
   * idempotency_key_in_use when its first request still runs after the longest wait.
   */
  async claim(organizationId: string, key: string, fingerprint: string): Promise<KeyClaim> {
    const waitUntil = Date.now() + this.waitMaxMs;
    const local = `${organizationId}\n${key}`;
    for (;;) {
      const now = new Date();
      const inserted = await this.db
        .insertInto('idempotency_keys')
        .values({
          organization_id: organizationId,
          key,
          fingerprint,
          state: 'running',
          status: null,
          body: null,
          owner: this.owner,
          created_at: now.toISOString(),
          expires_at: new Date(now.getTime() + this.ttlS * 1000).toISOString(),
        })
        .onConflict((oc) => oc.columns(['organization_id', 'key']).doNothing())
        .executeTakeFirst();
      if (Number(inserted.numInsertedOrUpdatedRows ?? 0) === 1) return this.first(organizationId, key, local);

      const row = await this.db
        .selectFrom('idempotency_keys')
        .selectAll()
        .where('organization_id', '=', organizationId)
        .where('key', '=', key)
        .executeTakeFirst();
      // Freed by its first request (which did nothing) between the insert and the read: claim it again.
      if (!row) continue;
      if (row.expires_at <= now.toISOString()) {
        await this.db
          .deleteFrom('idempotency_keys')
          .where('organization_id', '=', organizationId)
          .where('key', '=', key)
          .where('expires_at', '=', row.expires_at)
          .execute();
        continue;
      }
      if (row.fingerprint !== fingerprint) {
        throw new AppError(
          'idempotency_key_reused',
          `the Idempotency-Key was used at ${row.created_at} for another request (another method, path or body); ` +
            `a retry must repeat its first request exactly, and a new request needs a new key`,
          { first_used_at: row.created_at, expires_at: row.expires_at },
        );
      }
      if (row.state === 'done' && row.status !== null && row.body !== null) return { kind: 'replay', answer: { status: row.status, body: row.body } };

      const left = waitUntil - Date.now();
      if (left <= 0) {
        throw new AppError(
          'idempotency_key_in_use',
          `the first request with this Idempotency-Key (at ${row.created_at}) is still being answered after ${Math.round(this.waitMaxMs / 1000)} s of waiting; retry with the same key to get its answer`,
          { first_used_at: row.created_at, retry_after_s: 1 },
        );
      }
      // A first request on this node wakes its retries when it settles; one on another node is polled.
      const mine = this.running.get(local);
      await (mine ? Promise.race([mine, sleep(left)]) : sleep(Math.min(POLL_MS, left)));
    }
  }

  /** The claim of the request that inserted the key's row. */
  private first(organizationId: string, key: string, local: string): KeyClaim {
    let wake!: () => void;
    this.running.set(local, new Promise<void>((resolve) => (wake = resolve)));
    let settled = false;
    return {
      kind: 'first',
      settle: async (answer) => {
        if (settled) return;
        settled = true;
        try {
          if (answer) {
            await this.db
              .updateTable('idempotency_keys')
              .set({ state: 'done', status: answer.status, body: answer.body })
              .where('organization_id', '=', organizationId)
              .where('key', '=', key)
              .where('state', '=', 'running')
              .execute();
          } else {
            await this.db
              .deleteFrom('idempotency_keys')
              .where('organization_id', '=', organizationId)
              .where('key', '=', key)
              .where('state', '=', 'running')
              .execute();
          }
        } catch (err) {
          // Its retries wait until the longest wait, then answer 409; the key expires as usual.
          this.log.error({ err, organizationId }, 'could not record the answer of a request with an Idempotency-Key');
        } finally {
          this.running.delete(local);
          wake();
        }
      },
    };
  }

  /**
   * Frees the keys this node held for requests that were running when it stopped: those
   * requests ended with it, unanswered. Called at start, before any request.
   */
  async forgetUnanswered(): Promise<number> {
    const result = await this.db.deleteFrom('idempotency_keys').where('owner', '=', this.owner).where('state', '=', 'running').executeTakeFirst();
    return Number(result.numDeletedRows);
  }

  /** Removes expired keys (the periodic expiry check calls this); how many. */
  async sweep(now = new Date()): Promise<number> {
    const result = await this.db.deleteFrom('idempotency_keys').where('expires_at', '<=', now.toISOString()).executeTakeFirst();
    return Number(result.numDeletedRows);
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
