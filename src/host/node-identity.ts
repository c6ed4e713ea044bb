// A node's id: made on its first start and kept in its data directory (file node-id,
// readable by the service's user only), so that a node that restarts is the same node
// to the others, and one that comes back after being declared lost knows it was.
import { randomUUID } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const FILE = 'node-id';

export function nodeIdOf(dataDir: string): string {
  const file = join(dataDir, FILE);
  try {
    const kept = readFileSync(file, 'utf8').trim();
    if (kept !== '') return kept;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  mkdirSync(dataDir, { recursive: true });
  try {
    writeFileSync(file, `${randomUUID()}\n`, { mode: 0o600, flag: 'wx' });
  } catch (err) {
    // Another process of the same data directory made it first: use theirs.
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  return readFileSync(file, 'utf8').trim();
}
