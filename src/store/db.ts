// Opens roomkit's store. The embedded default is one SQLite file in the data directory
// (WAL mode, so a second process such as `roomkit keys create` can write while the
// service runs); migrations run on open.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import { Kysely, SqliteDialect } from 'kysely';
import { Migrator } from 'kysely/migration';
import { migrationProvider } from './migrations.ts';
import type { Database } from './schema.ts';

export type Db = Kysely<Database>;

export const SQLITE_FILE = 'roomkit.sqlite';

export async function openSqliteStore(dataDir: string): Promise<Db> {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const file = join(dataDir, SQLITE_FILE);
  const sqlite = new SQLite(file);
  sqlite.pragma('journal_mode = WAL');
  sqlite.pragma('busy_timeout = 5000');
  sqlite.pragma('foreign_keys = ON');
  sqlite.pragma('synchronous = NORMAL');
  const db = new Kysely<Database>({ dialect: new SqliteDialect({ database: sqlite }) });
  try {
    await migrate(db);
  } catch (err) {
    await db.destroy();
    throw err;
  }
  return db;
}

export async function migrate(db: Db): Promise<void> {
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
