// Finds programs on PATH (and in the sbin directories a root shell has), or checks a
// path given whole.
import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';

const EXTRA_DIRS = ['/usr/local/sbin', '/usr/sbin', '/sbin'];

/** The program's path when it can be run: a name is looked for on PATH, a path is taken as it is. */
export function which(program: string, path = process.env.PATH ?? ''): string | null {
  if (program.includes('/')) {
    try {
      accessSync(program, constants.X_OK);
      return program;
    } catch {
      return null;
    }
  }
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
