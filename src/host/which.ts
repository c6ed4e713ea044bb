// Finds programs on PATH (and in the sbin directories a root shell has).
import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';

const EXTRA_DIRS = ['/usr/local/sbin', '/usr/sbin', '/sbin'];

export function which(program: string, path = process.env.PATH ?? ''): string | null {
  for (const dir of [...path.split(delimiter).filter(Boolean), ...EXTRA_DIRS]) {
    const candidate = join(dir, program);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return null;
}
