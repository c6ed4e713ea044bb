// The subreaper (native/subreaper.c): runs a program whose children outlive it and reaps
// each of them as soon as it ends, instead of leaving that to the host's init. runsc's
// `create` and `restore` run under it (runtimes/gvisor/runsc.ts): a sandbox that ended
// is then gone from the process table at once, and runsc's delete of its record, which
// waits for that, takes tens of milliseconds rather than however long init takes.
import { fileURLToPath } from 'node:url';
import { compiled } from './native.ts';

const SOURCE = fileURLToPath(new URL('./native/subreaper.c', import.meta.url));

/** The subreaper binary, compiled on first use into `cacheDir`. */
export function subreaper(cacheDir: string): Promise<string> {
  return compiled(SOURCE, 'subreaper', cacheDir);
}
