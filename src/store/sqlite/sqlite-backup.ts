// An online backup of the SQLite store: a consistent copy of the database file, safe to
// take while the service runs on it. SQLite's backup API copies the pages under one read
// transaction (in WAL mode a reader never blocks the service's writes, and sees none
// made after it began); the copy is written next to the destination, checked, switched
// to a plain rollback journal (one self-contained file), synced and only then renamed
// into place, so a file at the destination is always a whole backup.
import { chmodSync, closeSync, existsSync, fsyncSync, openSync, renameSync, rmSync, statSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import SQLite from 'better-sqlite3';
import { SQLITE_FILE } from './sqlite-connection.ts';

/** Most pages one backup step may copy: all of them, so the copy is one read transaction. */
const ALL_PAGES = 0x7fffffff;

export interface BackupResult {
  file: string;
  bytes: number;
  /** The newest schema migration the copy has (restoring it needs a roomkit that knows it). */
  migration: string | null;
}

export class BackupError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'BackupError';
  }
}

export async function backupSqliteStore(dataDir: string, destination: string, options: { overwrite?: boolean } = {}): Promise<BackupResult> {
  const source = join(dataDir, SQLITE_FILE);
  if (!existsSync(source)) throw new BackupError(`there is no roomkit store at ${source}; check --data-dir`);
  if (existsSync(destination) && !options.overwrite) throw new BackupError(`${destination} exists; remove it or pass --force to replace it`);
  if (!existsSync(dirname(destination))) throw new BackupError(`the directory ${dirname(destination)} does not exist`);
  const partial = join(dirname(destination), `.${basename(destination)}.partial-${process.pid}`);
  rmSync(partial, { force: true });
  const db = new SQLite(source, { fileMustExist: true });
  try {
    db.pragma('busy_timeout = 5000');
    await db.backup(partial, { progress: () => ALL_PAGES });
    // It holds key hashes, commands and the audit trail: readable by its owner only.
    chmodSync(partial, 0o600);
  } catch (err) {
    rmSync(partial, { force: true });
    throw new BackupError(`the backup failed: ${(err as Error).message}`);
  } finally {
    db.close();
  }
  let migration: string | null = null;
  try {
    const copy = new SQLite(partial, { fileMustExist: true });
    try {
      const check = copy.pragma('quick_check', { simple: true });
      if (check !== 'ok') throw new BackupError(`the copy does not pass SQLite's quick_check: ${String(check)}`);
      copy.pragma('journal_mode = DELETE');
      const row = copy.prepare("SELECT name FROM kysely_migration ORDER BY name DESC LIMIT 1").get() as { name: string } | undefined;
      migration = row?.name ?? null;
    } finally {
      copy.close();
    }
    const fd = openSync(partial, 'r+');
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(partial, destination);
  } catch (err) {
    rmSync(partial, { force: true });
    throw err instanceof BackupError ? err : new BackupError(`the backup failed: ${(err as Error).message}`);
  }
  const { size } = statSync(destination);
  return { file: destination, bytes: size, migration };
}
