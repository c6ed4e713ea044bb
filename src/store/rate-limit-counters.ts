// Request rate-limit counters in the store, so that nodes sharing a PostgreSQL store
// count one key's requests together (each node's memory would let a client spread over
// N nodes make N times the limit). A fixed window per key, as the in-memory counters
// count: the first request of a window sets when it ends, each request adds one in a
// single statement (an upsert that starts a new window when the old one has ended), so
// requests racing on several nodes are each counted once. Rows of ended windows are
// removed by sweep(). The shape is the one @fastify/rate-limit asks of a store.
import { sql } from 'kysely';
import type { Db } from './db.ts';

export interface CounterState {
  /** Requests counted in the window, this one included. */
  current: number;
  /** Milliseconds until the window ends. */
  ttl: number;
}

export class RateLimitCounters {
  private readonly db: Db;
  private readonly now: () => number;

  constructor(db: Db, now: () => number = Date.now) {
    this.db = db;
    this.now = now;
  }

  /** Counts one request of `key` in a window of `windowMs`. */
  async increment(key: string, windowMs: number): Promise<CounterState> {
    const now = this.now();
    const ends = now + windowMs;
    const row = await this.db
      .insertInto('rate_limit_counters')
      .values({ key, count: 1, window_ends_at: ends })
      .onConflict((oc) =>
        oc.column('key').doUpdateSet({
          count: sql<number>`case when rate_limit_counters.window_ends_at <= ${now} then 1 else rate_limit_counters.count + 1 end`,
          window_ends_at: sql<number>`case when rate_limit_counters.window_ends_at <= ${now} then ${ends} else rate_limit_counters.window_ends_at end`,
        }),
      )
      .returning(['count', 'window_ends_at'])
      .executeTakeFirstOrThrow();
    return { current: Number(row.count), ttl: Math.max(0, Number(row.window_ends_at) - now) };
  }

  /** The count of `key` without counting a request (0 when its window has ended). */
  async read(key: string): Promise<CounterState> {
    const now = this.now();
    const row = await this.db.selectFrom('rate_limit_counters').select(['count', 'window_ends_at']).where('key', '=', key).executeTakeFirst();
    if (row === undefined || Number(row.window_ends_at) <= now) return { current: 0, ttl: 0 };
    return { current: Number(row.count), ttl: Number(row.window_ends_at) - now };
  }

  /** Removes the rows of windows that ended; how many. */
  async sweep(): Promise<number> {
    const removed = await this.db.deleteFrom('rate_limit_counters').where('window_ends_at', '<=', this.now()).executeTakeFirst();
    return Number(removed.numDeletedRows);
  }

  /**
   * A store class for @fastify/rate-limit over these counters (it makes one with `new`).
   * Every limit shares it: the limits' key generators put the limit's name first.
   */
  pluginStore(): new () => { incr: StoreCall; read: StoreCall; child: () => unknown } {
    const counters = this;
    return class {
      incr(key: string, done: (err: Error | null, state?: CounterState) => void, windowMs: number): void {
        counters.increment(key, windowMs).then((state) => done(null, state), (err: Error) => done(err));
      }
      read(key: string, done: (err: Error | null, state?: CounterState) => void): void {
        counters.read(key).then((state) => done(null, state), (err: Error) => done(err));
      }
      child() {
        return this;
      }
    };
  }
}

type StoreCall = (key: string, done: (err: Error | null, state?: CounterState) => void, windowMs: number) => void;
