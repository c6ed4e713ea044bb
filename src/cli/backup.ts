// `roomkit backup FILE`: an online backup of the data directory's store, safe while
// `serve` runs on it. Restoring is: stop the service, copy the file over
// <data-dir>/roomkit.sqlite (removing roomkit.sqlite-wal and -shm), start it. A store in
// PostgreSQL is the database server's to back up (pg_dump): the command says so.
import { resolve } from 'node:path';
import { loadConfig } from '../config.ts';
import { describeDatabase } from '../store/postgres/postgres-errors.ts';
import { BackupError, backupSqliteStore } from '../store/sqlite/sqlite-backup.ts';
import { formatBytes } from '../lib/format-size.ts';
import { CliError } from './errors.ts';

export async function backup(file: string, options: { dataDir?: string | undefined; force?: boolean | undefined; json?: boolean | undefined }): Promise<void> {
  const config = loadConfig({ dataDir: options.dataDir, runtime: 'none' });
  if (config.databaseUrl !== undefined) {
    throw new CliError(
      `the store is the PostgreSQL database ${describeDatabase(config.databaseUrl)} (ROOMKIT_DATABASE_URL), which this command does not copy: ` +
        'back it up with PostgreSQL\'s own tools, e.g. pg_dump --format=custom --file FILE "$ROOMKIT_DATABASE_URL" (restore with pg_restore), ' +
        'or the server\'s continuous archiving',
      1,
    );
  }
  const destination = resolve(file);
  let result;
  try {
    result = await backupSqliteStore(config.dataDir, destination, { overwrite: options.force === true });
  } catch (err) {
    if (err instanceof BackupError) throw new CliError(err.message, 1);
    throw err;
  }
  if (options.json) {
    process.stdout.write(`${JSON.stringify({ file: result.file, bytes: result.bytes, migration: result.migration })}\n`);
  } else {
    process.stdout.write(`Backed up ${config.dataDir} to ${result.file} (${formatBytes(result.bytes)}, schema ${result.migration ?? 'empty'})\n`);
  }
}
