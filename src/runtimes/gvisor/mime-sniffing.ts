// The MIME types of the files a command changed, for files_changed: by extension, else
// from their first bytes, read inside the instance in one exec for all of them.
import { encodeName, shellArg, shellDecode } from '../../lib/guest-names.ts';
import { mimeTypeByExtension, sniffMimeType } from '../../lib/mime.ts';
import type { FileChangeEntry } from '../types.ts';
import type { ExecChild } from './commands.ts';
import { collect } from './exec-streams.ts';
import { FILE_OP_TIMEOUT_MS } from './file-operations.ts';

/** Files whose type is read from their first bytes per command; the rest get a type by extension or none. */
const MAX_SNIFFED_FILES = 200;
const SNIFF_BYTES = 512;
const LOOP = `for f; do ${shellDecode('f')}; n=$(head -c ${SNIFF_BYTES} -- "$f" 2>/dev/null | wc -c); echo "$n"; head -c "$n" -- "$f" 2>/dev/null; done`;

/**
 * Types changed files: by extension, else from their first bytes read inside the
 * instance, by a program `startAsRoot` starts there as root.
 */
export async function addMimeTypes(changes: FileChangeEntry[], startAsRoot: (argv: string[]) => ExecChild, relay: string[]): Promise<void> {
  const unknown: FileChangeEntry[] = [];
  for (const change of changes) {
    if (change.status === 'deleted') continue;
    const byExtension = mimeTypeByExtension(change.path);
    if (byExtension) change.mimeType = byExtension;
    else if (unknown.length < MAX_SNIFFED_FILES) unknown.push(change);
  }
  if (unknown.length === 0) return;
  // Each file's first bytes, preceded by their count; as root, since root may have made
  // them. The relay reads them all in one process (paths on stdin); images built before
  // it could do so run a shell loop, a process or two per file.
  const { stdout } =
    relay.length > 0
      ? await collect(startAsRoot([...relay, '--heads', String(SNIFF_BYTES)]), FILE_OP_TIMEOUT_MS, Buffer.concat(unknown.flatMap((c) => [encodeName(c.path), Buffer.of(0)])))
      : await collect(startAsRoot(['sh', '-c', LOOP, 'sh', ...unknown.map((c) => shellArg(c.path))]), FILE_OP_TIMEOUT_MS);
  let offset = 0;
  for (const change of unknown) {
    const newline = stdout.indexOf(10, offset);
    if (newline < 0) break;
    const count = Number(stdout.toString('latin1', offset, newline));
    const head = stdout.subarray(newline + 1, newline + 1 + count);
    offset = newline + 1 + count;
    change.mimeType = sniffMimeType(head, count < SNIFF_BYTES);
  }
}
