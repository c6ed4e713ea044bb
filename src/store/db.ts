// Opens roomkit's store from configuration: the dialect the configuration names
// (store-settings.ts), with every migration applied on open.
import { Kysely } from 'kysely';
import { Migrator } from 'kysely/migration';
import type { Config } from '../config.ts';
import { migrationProvider } from './migrations.ts';
import type { Database } from './schema.ts';
import { dialectOf, storeSettings } from './store-settings.ts';

export type Db = Kysely<Database>;

/** Opens the store `config` names and migrates it; closed again when a migration fails. */
export async function openStore(config: Pick<Config, 'dataDir'>): Promise<Db> {
  const db = new Kysely<Database>({ dialect: dialectOf(storeSettings(config)) });
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
