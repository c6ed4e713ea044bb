// The MIME types of the files a command changed, for files_changed: by extension, else
// sniffed from their first bytes, which the instance's agent reads as root for all of
// them in one operation.
import { encodeName } from '../../lib/guest-names.ts';
import { mimeTypeByExtension, sniffMimeType } from '../../lib/mime.ts';
import type { FileChangeEntry } from '../types.ts';

/** Files whose type is read from their first bytes per command; the rest get a type by extension or none. */
const MAX_SNIFFED_FILES = 200;
const SNIFF_BYTES = 512;

/** Reads the first `bytes` bytes of each path (absolute, as bytes) inside the instance, as root. */
export type ReadHeads = (paths: Buffer[], bytes: number) => Promise<Buffer[]>;

/** Types changed files: by extension, else from their first bytes read inside the instance. */
export async function addMimeTypes(changes: FileChangeEntry[], readHeads: ReadHeads): Promise<void> {
  const unknown: FileChangeEntry[] = [];
  for (const change of changes) {
    if (change.status === 'deleted') continue;
    const byExtension = mimeTypeByExtension(change.path);
    if (byExtension) change.mimeType = byExtension;
    else if (unknown.length < MAX_SNIFFED_FILES) unknown.push(change);
  }
  if (unknown.length === 0) return;
  const heads = await readHeads(
    unknown.map((c) => encodeName(c.path)),
    SNIFF_BYTES,
  );
  unknown.forEach((change, i) => {
    const head = heads[i];
    if (head !== undefined) change.mimeType = sniffMimeType(head, head.length < SNIFF_BYTES);
  });
}
