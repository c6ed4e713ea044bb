// btrfs for writable layers that keep undo points: a loop-mounted btrfs file system
// (instead of ext4) whose `state` subvolume holds the overlay's upper and work
// directories, so that a read-only snapshot of it, taken in tens of milliseconds and
// copy-on-write, is the layer as it was at that moment. Quotas (qgroups) are on, so the
// disk each snapshot holds alone can be read back (exclusiveBytes).
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { createSparseFile, isMountPoint } from './mounts.ts';
import { runChecked } from './run.ts';
import { which } from './which.ts';

const BTRFS_TIMEOUT_MS = 30_000;

/** Whether this host can make btrfs layers: the kernel knows btrfs and btrfs-progs is installed. */
export function btrfsAvailable(): { ok: boolean; detail: string } {
  const kernel = readFileSync('/proc/filesystems', 'utf8').split('\n').some((l) => l.trim() === 'btrfs');
  if (!kernel) return { ok: false, detail: 'the kernel has no btrfs (not in /proc/filesystems)' };
  if (!which('mkfs.btrfs') || !which('btrfs')) return { ok: false, detail: 'mkfs.btrfs or btrfs is not installed (btrfs-progs)' };
  return { ok: true, detail: 'btrfs in the kernel, btrfs-progs installed' };
}

/**
 * A sparse file of `sizeMb`, formatted btrfs with quotas on, mounted at `mountPoint`,
 * with the subvolume `state` (created once). Idempotent, like mountDiskImage.
 */
export async function mountBtrfsImage(image: string, mountPoint: string, sizeMb: number): Promise<void> {
  if (!existsSync(image)) {
    await createSparseFile(image, sizeMb);
    // --mixed: data and metadata share block groups, which suits a small file system
    // (a few hundred MiB) whose split between them is unknown in advance.
    await runChecked('mkfs.btrfs', ['-q', '-f', '--mixed', '-R', 'quota', image], { timeoutMs: BTRFS_TIMEOUT_MS });
  }
  if (!isMountPoint(mountPoint)) {
    await runChecked('mount', ['-t', 'btrfs', '-o', 'loop,nosuid,nodev', image, mountPoint], { timeoutMs: BTRFS_TIMEOUT_MS });
  }
  if (!existsSync(`${mountPoint}/state`)) await runChecked('btrfs', ['subvolume', 'create', `${mountPoint}/state`], { timeoutMs: BTRFS_TIMEOUT_MS });
  mkdirSync(`${mountPoint}/undo`, { recursive: true, mode: 0o700 });
}

/** A read-only snapshot of the subvolume `source` at `target`. */
export async function snapshotReadOnly(source: string, target: string): Promise<void> {
  await runChecked('btrfs', ['subvolume', 'snapshot', '-r', source, target], { timeoutMs: BTRFS_TIMEOUT_MS });
}

/** Deletes a subvolume (its space is freed in the background by the file system). */
export async function deleteSubvolume(path: string): Promise<void> {
  await runChecked('btrfs', ['subvolume', 'delete', path], { timeoutMs: BTRFS_TIMEOUT_MS });
}

/**
 * The bytes each subvolume of the file system at `mountPoint` holds alone (its qgroup's
 * exclusive size), by path relative to the mount, after the pending writes are
 * committed (btrfs counts at commit).
 */
export async function exclusiveBytes(mountPoint: string): Promise<Map<string, number>> {
  await runChecked('btrfs', ['filesystem', 'sync', mountPoint], { timeoutMs: BTRFS_TIMEOUT_MS });
  const shown = await runChecked('btrfs', ['qgroup', 'show', '--raw', mountPoint], { timeoutMs: BTRFS_TIMEOUT_MS });
  const sizes = new Map<string, number>();
  for (const line of shown.stdout.split('\n')) {
    const [id, , exclusive, path] = line.trim().split(/\s+/);
    if (!id?.startsWith('0/') || exclusive === undefined || path === undefined) continue;
    sizes.set(path, Number(exclusive));
  }
  return sizes;
}
