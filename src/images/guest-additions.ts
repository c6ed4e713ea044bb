// What roomkit adds to every image's root filesystem after the base is built, so that
// instances behave as agents expect under this gVisor release: a preloaded library
// that makes `ls` and `stat` work (guest/statx-compat.c), a `sudo` that reaches root
// through a service roomkit starts in each instance (guest/sudo.py, rootd.py), and
// roomkit's agent (guest/agent, in Go), the instance's first process, the one way the
// host reaches into an instance (commands, files, terminals), and the interpreters that
// code contexts run (guest/code-context.py, guest/code-context.cjs). Native parts are compiled on
// the host once per source version and cached beside the images (host/native.ts).
import { lstatSync, mkdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { compiled, compiledGo, NativeBuildError, packageVersion, sourceVersion } from '../host/native.ts';

const GUEST_DIR = join(dirname(fileURLToPath(import.meta.url)), 'guest');
const STATX_SOURCE = join(GUEST_DIR, 'statx-compat.c');
const AGENT_PACKAGE = join(GUEST_DIR, 'agent');
/** Where the additions live inside an instance. */
export const GUEST_LIB_DIR = '/usr/local/lib/roomkit';
const STATX_LIB = `${GUEST_LIB_DIR}/libstatx-compat.so`;
/** roomkit's agent (guest/agent): `agent init` is the instance's first process. */
export const GUEST_AGENT = `${GUEST_LIB_DIR}/agent`;
/** The root service, started as root when an instance boots (if the image has python3). */
export const ROOT_SERVICE = `${GUEST_LIB_DIR}/rootd`;
/** The interpreter of a Python code context (guest/code-context.py), started per context by python3. */
export const CODE_CONTEXT_DRIVER = `${GUEST_LIB_DIR}/code-context.py`;
/** The interpreter of a JavaScript code context (guest/code-context.cjs), started per context by node. */
export const CODE_CONTEXT_JS_DRIVER = `${GUEST_LIB_DIR}/code-context.cjs`;
/** The driver of a bash code context (guest/code-context-bash.py), started per context by python3. */
export const CODE_CONTEXT_BASH_DRIVER = `${GUEST_LIB_DIR}/code-context-bash.py`;
const SCRIPTS: { source: string; target: string }[] = [
  { source: join(GUEST_DIR, 'rootd.py'), target: ROOT_SERVICE },
  { source: join(GUEST_DIR, 'sudo.py'), target: '/usr/local/bin/sudo' },
  { source: join(GUEST_DIR, 'code-context.py'), target: CODE_CONTEXT_DRIVER },
  // Read by the Python driver from beside it (its chart data).
  { source: join(GUEST_DIR, 'code-context-charts.py'), target: `${GUEST_LIB_DIR}/code-context-charts.py` },
  { source: join(GUEST_DIR, 'code-context.cjs'), target: CODE_CONTEXT_JS_DRIVER },
  { source: join(GUEST_DIR, 'code-context-bash.py'), target: CODE_CONTEXT_BASH_DRIVER },
];

/** Changes whenever an addition's source changes, so images built with an older one are rebuilt. */
export function guestAdditionsVersion(): string {
  return [...[STATX_SOURCE, ...SCRIPTS.map((s) => s.source)].map((s) => sourceVersion(s)), packageVersion(AGENT_PACKAGE)].join('-');
}

export class GuestAdditionsError extends Error {}

/**
 * Makes `path` (absolute inside the guest) a real directory under `rootfs`, refusing to
 * pass through a symbolic link: an image's links must never send a host-side write
 * outside its root filesystem.
 */
function guestDir(rootfs: string, path: string): string {
  let current = rootfs;
  for (const part of path.split('/').filter(Boolean)) {
    current = join(current, part);
    let stat;
    try {
      stat = lstatSync(current);
    } catch {
      mkdirSync(current, { mode: 0o755 });
      continue;
    }
    if (!stat.isDirectory()) throw new GuestAdditionsError(`the image's ${path} is not a plain directory (at ${current.slice(rootfs.length)})`);
  }
  return current;
}

/** Writes a file of the guest, replacing whatever is at its path (a link included) rather than writing through it. */
function writeGuestFile(rootfs: string, path: string, content: string | Buffer, mode: number): void {
  const target = join(guestDir(rootfs, dirname(path)), path.split('/').at(-1) ?? '');
  try {
    unlinkSync(target);
  } catch {
    // nothing there
  }
  writeFileSync(target, content, { mode, flag: 'wx' });
}

/** Installs the additions into a freshly built root filesystem (no guest code has run in it). */
export async function installGuestAdditions(rootfs: string, cacheDir: string): Promise<void> {
  let lib: string;
  let agent: string;
  try {
    lib = await compiled(STATX_SOURCE, 'libstatx-compat.so', cacheDir, ['-shared', '-fPIC']);
    agent = await compiledGo(AGENT_PACKAGE, 'agent', cacheDir);
  } catch (err) {
    throw err instanceof NativeBuildError ? new GuestAdditionsError(err.message) : err;
  }
  writeGuestFile(rootfs, STATX_LIB, readFileSync(lib), 0o644);
  writeGuestFile(rootfs, GUEST_AGENT, readFileSync(agent), 0o755);
  for (const script of SCRIPTS) writeGuestFile(rootfs, script.target, readFileSync(script.source), 0o755);
  let preload = '';
  try {
    const existing = join(rootfs, 'etc', 'ld.so.preload');
    if (lstatSync(existing).isFile()) preload = readFileSync(existing, 'utf8');
  } catch {
    // no preload list yet
  }
  const lines = preload.split('\n').filter((l) => l.trim() && l.trim() !== STATX_LIB);
  writeGuestFile(rootfs, '/etc/ld.so.preload', `${[STATX_LIB, ...lines].join('\n')}\n`, 0o644);
}
