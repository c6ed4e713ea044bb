// What the unauthenticated raw endpoint may serve of an instance whose profile has
// `raw_files: changed`: the files a command listed in files_changed as created or
// modified, minus those a later command listed as deleted. Kept in the store for as
// long as the instance lives, so a service restart that adopts it changes nothing.
import { createHash } from 'node:crypto';
import { posix } from 'node:path';
import { encodeName } from '../lib/guest-names.ts';
import type { FileChangeEntry } from '../runtimes/types.ts';
import type { Db } from '../store/db.ts';
import { endedIds } from './instance-queries.ts';

/** Rows written or removed per statement. */
const BATCH = 500;

export class ServedFiles {
  private readonly db: Db;
  private timer: NodeJS.Timeout | undefined;

  constructor(db: Db) {
    this.db = db;
  }

  /** Prunes now and then every `intervalMs`, until close(). */
  startPruning(intervalMs: number, onError: (err: unknown) => void): void {
    const prune = () => this.pruneEnded().catch(onError);
    void prune();
    this.timer = setInterval(prune, intervalMs);
    this.timer.unref();
  }

  close(): void {
    clearInterval(this.timer);
  }

  /** Records the files a command's result listed. */
  async record(instanceId: string, listed: FileChangeEntry[]): Promise<void> {
    const added = listed.filter((c) => c.status !== 'deleted').map((c) => pathKey(c.path));
    const removed = listed.filter((c) => c.status === 'deleted').map((c) => pathKey(c.path));
    for (let i = 0; i < added.length; i += BATCH) {
      const rows = added.slice(i, i + BATCH).map((path_key) => ({ instance_id: instanceId, path_key }));
      await this.db.insertInto('served_files').values(rows).onConflict((oc) => oc.doNothing()).execute();
    }
    for (let i = 0; i < removed.length; i += BATCH) {
      await this.db
        .deleteFrom('served_files')
        .where('instance_id', '=', instanceId)
        .where('path_key', 'in', removed.slice(i, i + BATCH))
        .execute();
    }
  }

  /** Whether a command listed the file at this absolute path (normalised as the guest would name it). */
  async listed(instanceId: string, path: string): Promise<boolean> {
    const row = await this.db
      .selectFrom('served_files')
      .select('path_key')
      .where('instance_id', '=', instanceId)
      .where('path_key', '=', pathKey(posix.normalize(path)))
      .executeTakeFirst();
    return row !== undefined;
  }

  /** Forgets what ended instances had listed. */
  async pruneEnded(): Promise<void> {
    await this.db
      .deleteFrom('served_files')
      .where('instance_id', 'in', endedIds(this.db))
      .execute();
  }
}

function pathKey(path: string): string {
  return createHash('sha256').update(encodeName(path)).digest('hex');
}
