// Opens roomkit's store from configuration: the dialect the configuration names
// (store-settings.ts), with every migration applied on open. On PostgreSQL several nodes
// may start at once against one empty database: the migrations run under an advisory
// lock held by one connection, so one node migrates and the others wait for it, then
// find nothing left to do.
import { Kysely, sql } from 'kysely';
import { Migrator } from 'kysely/migration';
import { migrationProvider } from './migrations.ts';
import { connectionError } from './postgres/postgres-errors.ts';
import type { Database } from './schema.ts';
import { dialectOf, type StoreConfig, type StoreDialect, storeSettings } from './store-settings.ts';

export type Db = Kysely<Database>;

/** Names roomkit's migration lock among a database's advisory locks (any fixed 64-bit number). */
const MIGRATION_LOCK = 7_295_016_381_402_557n;

const dialects = new WeakMap<Db, StoreDialect>();

/** Which database `db` is, as openStore opened it. */
export function storeDialectOf(db: Db): StoreDialect | undefined {
  return dialects.get(db);
}

/** Opens the store `config` names and migrates it; closed again when a migration fails. */
export async function openStore(config: StoreConfig): Promise<Db> {
  const settings = storeSettings(config);
  const db = new Kysely<Database>({ dialect: dialectOf(settings) });
  dialects.set(db, settings.dialect);
  try {
    if (settings.dialect === 'postgres') await migrateLocked(db, settings.url);
    else await migrate(db);
  } catch (err) {
    await db.destroy();
    throw err;
  }
  return db;
}

/** Migrates a PostgreSQL store while holding the migration lock on one connection. */
async function migrateLocked(db: Db, url: string): Promise<void> {
  try {
    await db.connection().execute(async (connection) => {
      await sql`select pg_advisory_lock(${sql.lit(MIGRATION_LOCK)})`.execute(connection);
      try {
        await migrate(connection);
      } finally {
        await sql`select pg_advisory_unlock(${sql.lit(MIGRATION_LOCK)})`.execute(connection);
      }
    });
  } catch (err) {
    throw connectionError(err, url) ?? err;
  }
}

export async function migrate(db: Kysely<Database>): Promise<void> {
  const migrator = new Migrator({ db, provider: migrationProvider });
  const { error, results } = await migrator.migrateToLatest();
  if (error) {
    // A store migrated by a newer roomkit: Kysely refuses to touch it, rightly; say what to do.
    const unknown = /previously executed migration (\S+) is missing/.exec(error instanceof Error ? error.message : '');
    if (unknown) {
      throw new Error(
        `the store has migration ${unknown[1]}, which this version of roomkit does not know: a newer version used it. ` +
          'Run that version again, or restore the backup taken before the upgrade (roomkit backup; see docs/operations.md)',
      );
    }
    const failed = results?.find((r) => r.status === 'Error')?.migrationName ?? 'unknown';
    throw new Error(`database migration ${failed} failed: ${error instanceof Error ? error.message : String(error)}`);
  }
}
