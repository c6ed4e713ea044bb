// Which database the store is, chosen from configuration in this one place. Each dialect
// is a folder of its own (sqlite/: its connection and its online backup) with a settings
// shape and a function that gives Kysely's Dialect; adding one is a folder, a member of
// StoreSettings and a case below. Today the only one is SQLite in the data directory.
import type { Dialect } from 'kysely';
import type { Config } from '../config.ts';
import { type SqliteSettings, sqliteDialect } from './sqlite/sqlite-connection.ts';

export type StoreSettings = SqliteSettings;

/** The store a configuration names. */
export function storeSettings(config: Pick<Config, 'dataDir'>): StoreSettings {
  return { dialect: 'sqlite', dataDir: config.dataDir };
}

/** Kysely's dialect for the store `settings` name: its connection is opened here. */
export function dialectOf(settings: StoreSettings): Dialect {
  switch (settings.dialect) {
    case 'sqlite':
      return sqliteDialect(settings);
  }
}
