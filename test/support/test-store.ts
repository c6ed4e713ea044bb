// The store tests run against. SQLite in each test's data directory by default; with
// ROOMKIT_TEST_STORE=postgres and ROOMKIT_TEST_DATABASE_URL (the server's URL, without
// a database: scripts/test starts a throwaway cluster and sets both), a PostgreSQL
// database of its own for each data directory, so that a test that closes its app and
// opens the same data directory again finds its rows, as with SQLite. Each database is
// copied from a migrated template (CREATE DATABASE … TEMPLATE copies files: far faster
// than migrating each one), made once by whichever test process asks first.
import { createHash } from 'node:crypto';
import pg from 'pg';
import { openStore } from '../../src/store/db.ts';
import type { StoreDialect } from '../../src/store/store-settings.ts';

/** The store this run's tests use; a PostgreSQL run without a server's URL fails rather than fall back to SQLite. */
export const TEST_STORE: StoreDialect = storeOfEnvironment();

const TEMPLATE = 'roomkit_template';
/** Serialises making the template between test processes (any fixed number). */
const TEMPLATE_LOCK = 4_113_902_771;

function storeOfEnvironment(): StoreDialect {
  const chosen = process.env.ROOMKIT_TEST_STORE ?? 'sqlite';
  if (chosen === 'sqlite') return 'sqlite';
  if (chosen !== 'postgres') throw new Error(`ROOMKIT_TEST_STORE must be sqlite or postgres, got "${chosen}"`);
  if (!process.env.ROOMKIT_TEST_DATABASE_URL) {
    throw new Error('ROOMKIT_TEST_STORE=postgres needs ROOMKIT_TEST_DATABASE_URL, a PostgreSQL server to make test databases on (scripts/test --store postgres starts one)');
  }
  return 'postgres';
}

function serverUrl(database: string): string {
  const url = new URL(process.env.ROOMKIT_TEST_DATABASE_URL as string);
  url.pathname = `/${database}`;
  return url.toString();
}

/** The test database of a data directory: its name is derived from the directory's path. */
function databaseOf(dataDir: string): string {
  return `roomkit_test_${createHash('sha256').update(dataDir).digest('hex').slice(0, 24)}`;
}

async function withAdmin<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: serverUrl('postgres') });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

const DUPLICATE_DATABASE = '42P04';

async function ensureTemplate(admin: pg.Client): Promise<void> {
  const exists = async () => (await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [TEMPLATE])).rowCount === 1;
  if (await exists()) return;
  await admin.query('SELECT pg_advisory_lock($1)', [TEMPLATE_LOCK]);
  try {
    if (await exists()) return;
    // Made under another name and renamed once migrated and closed: a template that
    // exists is whole, and nobody is connected to it (which a copy needs).
    const making = `${TEMPLATE}_making`;
    await admin.query(`DROP DATABASE IF EXISTS ${making}`);
    await admin.query(`CREATE DATABASE ${making}`);
    const db = await openStore({ dataDir: '', databaseUrl: serverUrl(making), databasePoolSize: 1 });
    await db.destroy();
    await admin.query(`ALTER DATABASE ${making} RENAME TO ${TEMPLATE}`);
  } finally {
    await admin.query('SELECT pg_advisory_unlock($1)', [TEMPLATE_LOCK]);
  }
}

/**
 * The store settings for a test's data directory: none with SQLite (the data directory
 * is the store), the URL of its own database with PostgreSQL, made when it is first asked for.
 */
export async function testStoreConfig(dataDir: string): Promise<{ databaseUrl?: string }> {
  if (TEST_STORE === 'sqlite') return {};
  const database = databaseOf(dataDir);
  await withAdmin(async (admin) => {
    await ensureTemplate(admin);
    try {
      await admin.query(`CREATE DATABASE ${database} TEMPLATE ${TEMPLATE}`);
    } catch (err) {
      if ((err as { code?: string }).code !== DUPLICATE_DATABASE) throw err;
    }
  });
  return { databaseUrl: serverUrl(database) };
}

/** Removes a data directory's test database (with PostgreSQL), once nothing uses it. */
export async function dropTestStore(dataDir: string): Promise<void> {
  if (TEST_STORE === 'sqlite') return;
  await withAdmin((admin) => admin.query(`DROP DATABASE IF EXISTS ${databaseOf(dataDir)} WITH (FORCE)`));
}

/** The environment a `roomkit` child process needs to use a data directory's test store. */
export async function testStoreEnv(dataDir: string): Promise<Record<string, string>> {
  const settings = await testStoreConfig(dataDir);
  return settings.databaseUrl === undefined ? {} : { ROOMKIT_DATABASE_URL: settings.databaseUrl };
}
