// The PostgreSQL dialect of the store: a pool of connections to the database that
// ROOMKIT_DATABASE_URL names, shared by every node of a deployment. pg hands bigint and
// numeric values (what count(*) and sum() give) back as strings to keep their precision;
// the store's counts and sums are far below 2^53, so this pool reads them as numbers,
// as SQLite gives them, and the services compare them the same way on both.
import pg from 'pg';
import { type Dialect, PostgresDialect } from 'kysely';

export interface PostgresSettings {
  dialect: 'postgres';
  /** postgres://user:password@host:port/database */
  url: string;
  /** Connections kept open at most. */
  poolSize: number;
}

const INT8_OID = 20;
const NUMERIC_OID = 1700;

/** A connection that cannot be made in this long fails, rather than hanging a start or a request. */
const CONNECT_TIMEOUT_MS = 10_000;

function typeParser(oid: number, format?: 'text' | 'binary'): (value: string) => unknown {
  if (oid === INT8_OID || oid === NUMERIC_OID) return Number;
  return format === 'binary' ? pg.types.getTypeParser(oid, 'binary') : pg.types.getTypeParser(oid, 'text');
}

export function postgresPool(settings: PostgresSettings): pg.Pool {
  const pool = new pg.Pool({
    connectionString: settings.url,
    max: settings.poolSize,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    types: { getTypeParser: typeParser as typeof pg.types.getTypeParser },
  });
  // An idle connection the server closed (a restart, a failover) is dropped by the pool,
  // which opens another when one is needed; without a listener the error would end the
  // process.
  pool.on('error', () => {});
  return pool;
}

export function postgresDialect(settings: PostgresSettings): Dialect {
  return new PostgresDialect({ pool: postgresPool(settings) });
}
