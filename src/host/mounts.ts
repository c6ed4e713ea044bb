// Mounts for an instance's root filesystem: a loop-mounted ext4 file that caps the
// writable layer at the profile's disk_mb, and an overlay of that layer over the
// shared read-only image.
import { existsSync, readFileSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { run, runChecked } from './run.ts';

const MOUNT_TIMEOUT_MS = 30_000;

/** Mount points under `dir` (or equal to it), deepest first, from /proc/self/mountinfo. */
export function mountsUnder(dir: string): string[] {
  const prefix = dir.endsWith('/') ? dir : `${dir}/`;
  const points = readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((line) => unescapeMountPath(line.split(' ')[4] ?? ''))
    .filter((p) => p === dir || p.startsWith(prefix));
  return [...new Set(points)].sort((a, b) => b.length - a.length);
}

export function isMountPoint(path: string): boolean {
  return mountsUnder(path).includes(path);
}

/** A new file of `sizeMb` that takes no disk until written (a writable layer's backing file), readable by root alone. */
export async function createSparseFile(path: string, sizeMb: number): Promise<void> {
  const handle = await open(path, 'w', 0o600);
  try {
    await handle.truncate(sizeMb * 1024 * 1024);
  } finally {
    await handle.close();
  }
}

/** A sparse file of `sizeMb` at `image`, formatted ext4. */
export async function formatDiskImage(image: string, sizeMb: number): Promise<void> {
  await createSparseFile(image, sizeMb);
  await runChecked('mkfs.ext4', ['-q', '-F', '-m', '0', '-E', 'lazy_itable_init=1,lazy_journal_init=1', image], {
    timeoutMs: MOUNT_TIMEOUT_MS,
  });
}

/** A sparse file of `sizeMb`, formatted ext4 (unless one is there already) and mounted at `mountPoint`. */
export async function mountDiskImage(image: string, mountPoint: string, sizeMb: number): Promise<void> {
  if (!existsSync(image)) await formatDiskImage(image, sizeMb);
  if (!isMountPoint(mountPoint)) {
    await runChecked('mount', ['-o', 'loop,nosuid,nodev', image, mountPoint], { timeoutMs: MOUNT_TIMEOUT_MS });
  }
}

export async function mountOverlay(options: { lower: string; upper: string; work: string; target: string }): Promise<void> {
  for (const path of Object.values(options)) {
    if (/[,:\s]/.test(path)) throw new Error(`path ${path} has a character overlayfs options cannot carry (, : or space)`);
  }
  if (isMountPoint(options.target)) return;
  await runChecked(
    'mount',
    // nosuid,nodev: a setuid file or a device node that guest root leaves in its layer
    // means nothing on the host, whoever reaches the instance's directory.
    ['-t', 'overlay', 'overlay', '-o', `nosuid,nodev,lowerdir=${options.lower},upperdir=${options.upper},workdir=${options.work}`, options.target],
    { timeoutMs: MOUNT_TIMEOUT_MS },
  );
}

/** Unmounts everything under `dir`, deepest first; a busy mount is detached lazily. */
export async function unmountAll(dir: string): Promise<void> {
  for (const point of mountsUnder(dir)) {
    const result = await run('umount', [point], { timeoutMs: MOUNT_TIMEOUT_MS });
    if (result.code !== 0 && isMountPoint(point)) {
      await runChecked('umount', ['-l', point], { timeoutMs: MOUNT_TIMEOUT_MS });
    }
  }
}

function unescapeMountPath(path: string): string {
  return path.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(Number.parseInt(octal, 8)));
}
