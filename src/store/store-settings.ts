// Which database the store is, chosen from configuration in this one place. Each dialect
// is a folder of its own (sqlite/: its connection and its online backup; postgres/: its
// pool and its connection errors) with a settings shape and a function that gives
// Kysely's Dialect; adding one is a folder, a member of StoreSettings and a case below.
// SQLite in the data directory is the default; ROOMKIT_DATABASE_URL names a PostgreSQL
// database instead, the record several nodes share.
import type { Dialect } from 'kysely';
import type { Config } from '../config.ts';
import { type PostgresSettings, postgresDialect } from './postgres/postgres-connection.ts';
import { type SqliteSettings, sqliteDialect } from './sqlite/sqlite-connection.ts';

export type StoreSettings = SqliteSettings | PostgresSettings;
export type StoreDialect = StoreSettings['dialect'];

/** What of the configuration names the store; the database settings may be left out (SQLite). */
export type StoreConfig = Pick<Config, 'dataDir'> & Partial<Pick<Config, 'databaseUrl' | 'databasePoolSize'>>;

/** Connections to PostgreSQL when the configuration does not say (as config.ts's default). */
const DEFAULT_POOL_SIZE = 10;

/** The store a configuration names. */
export function storeSettings(config: StoreConfig): StoreSettings {
  if (config.databaseUrl !== undefined) {
    return { dialect: 'postgres', url: config.databaseUrl, poolSize: config.databasePoolSize ?? DEFAULT_POOL_SIZE };
  }
  return { dialect: 'sqlite', dataDir: config.dataDir };
}

/** Kysely's dialect for the store `settings` name: its connection is opened here. */
export function dialectOf(settings: StoreSettings): Dialect {
  switch (settings.dialect) {
    case 'sqlite':
      return sqliteDialect(settings);
    case 'postgres':
      return postgresDialect(settings);
  }
}
