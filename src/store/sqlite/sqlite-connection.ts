// The SQLite dialect of the store: one file in the data directory, in WAL mode so that a
// second process (such as `roomkit keys create`) can write while the service runs, with
// the pragmas the services rely on (foreign keys, a busy timeout instead of an error
// when another process holds the write lock).
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import { type Dialect, SqliteDialect } from 'kysely';

/** The store's file in the data directory. */
export const SQLITE_FILE = 'roomkit.sqlite';

export interface SqliteSettings {
  dialect: 'sqlite';
  /** The data directory; the store is SQLITE_FILE in it. */
  dataDir: string;
}

export function sqliteDialect(settings: SqliteSettings): Dialect {
  mkdirSync(settings.dataDir, { recursive: true, mode: 0o700 });
  const sqlite = new SQLite(join(settings.dataDir, SQLITE_FILE));
  sqlite.pragma('journal_mode = WAL');
  sqlite.pragma('busy_timeout = 5000');
  sqlite.pragma('foreign_keys = ON');
  sqlite.pragma('synchronous = NORMAL');
  return new SqliteDialect({ database: sqlite });
}
