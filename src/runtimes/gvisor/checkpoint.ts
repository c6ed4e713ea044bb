// An instance's saved memory: `runsc checkpoint` writes the sandbox's whole state
// (memory, processes, open files, listening sockets) to a directory in the instance's
// data directory and ends the sandbox; `runsc restore` starts a sandbox of the same id
// from it, over the same bundle, mounts and network namespace. pause.ts decides when.
// The same two, leaving the sandbox running and restoring under another instance's id,
// bundle and namespace, make snapshots and forks with memory (memory-snapshots.ts).
//
// The image is written under `checkpoint.partial` and renamed to `checkpoint` once runsc
// says it is complete, so a directory named `checkpoint` is always a whole image: a
// crash during a checkpoint leaves at most a partial one, which the next pause removes.
// An image belongs to one pause: it is removed once the instance runs again (its writable
// layer moves on from there, and an old image restored over newer files would disagree
// with them). It is the instance's disk, under its directory, and goes with it.
//
// Compression: none, the default here (runsc's own is `flate-best-speed`). A running
// program's memory is mostly heap and buffers that a fast compressor shrinks little,
// while compressing and inflating costs CPU on the host's few cores on both the pause's
// and the resume's path; disk is the cheaper of the two. `npm run bench:pause` measures
// both on the same sandbox (bench/pause.ts) to keep the choice honest.
import { randomUUID } from 'node:crypto';
import { closeSync, existsSync, openSync, readdirSync, readFileSync, renameSync, rmSync, statSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { HostCommandError } from '../../host/run.ts';
import type { InstanceHandle } from './instance-handle.ts';
import type { Runsc } from './runsc.ts';

/** How long a checkpoint or a restore may take: about 3 s per GiB of memory was measured, with room for a busy disk. */
const CHECKPOINT_TIMEOUT_MS = 120_000;
export const CHECKPOINT_COMPRESSIONS = ['none', 'flate-best-speed'] as const;
export type CheckpointCompression = (typeof CHECKPOINT_COMPRESSIONS)[number];
const COMPRESSION: CheckpointCompression = 'none';

/** The directory of the instance's complete saved memory (it may not exist). */
export function checkpointDir(h: InstanceHandle): string {
  return join(h.dir, 'checkpoint');
}

function partialDir(h: InstanceHandle): string {
  return `${checkpointDir(h)}.partial`;
}

/** Whether the instance has a complete saved memory to restore. */
export function hasCheckpoint(h: InstanceHandle): boolean {
  return existsSync(join(checkpointDir(h), 'checkpoint.img'));
}

/** Bytes the instance's saved memory holds on disk (0 without one). */
export function checkpointBytes(h: InstanceHandle): number {
  return imageBytes(checkpointDir(h));
}

/** Names a saved memory has once it is no longer the instance's, until it is removed (spentCheckpoint). */
const SPENT_PREFIX = 'checkpoint.spent-';

/** Removes the instance's saved memory, any partial one, and any a resume had set aside. */
export function removeCheckpoint(h: InstanceHandle): void {
  rmSync(partialDir(h), { recursive: true, force: true });
  rmSync(checkpointDir(h), { recursive: true, force: true });
  for (const name of existsSync(h.dir) ? readdirSync(h.dir) : []) {
    if (name.startsWith(SPENT_PREFIX)) rmSync(join(h.dir, name), { recursive: true, force: true });
  }
}

/**
 * Sets the instance's saved memory aside at once (a rename: it is no longer there to
 * restore) and removes its files in the background, off a resume's path (removing a
 * 100 MB image took 6-26 ms on a busy host). Each is set aside under a name of its own,
 * so a later pause's image is never in the way of one still being removed; whatever a
 * crash left is removed with the instance, or by the next removeCheckpoint.
 */
export async function spendCheckpoint(h: InstanceHandle): Promise<void> {
  const spent = join(h.dir, `${SPENT_PREFIX}${randomUUID()}`);
  try {
    renameSync(checkpointDir(h), spent);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  await rm(spent, { recursive: true, force: true });
}

/**
 * Saves the running sandbox's state and ends it (its host processes exit; runsc's
 * record stays, still saying "running", until a delete). Replaces an older image only
 * once the new one is complete; on failure the older one, if any, is left as it was.
 */
export async function checkpointSandbox(h: InstanceHandle, runsc: Runsc, compression: CheckpointCompression = COMPRESSION): Promise<void> {
  await checkpointInto(h, runsc, checkpointDir(h), { leaveRunning: false, compression });
}

/**
 * Saves the sandbox's state into `dir` (written as `<dir>.partial`, renamed once whole;
 * an older `dir` is replaced only then). `leaveRunning`: the sandbox goes on as it was
 * (running, or paused by `runsc pause`: a checkpoint keeps it paused), for snapshots and
 * forks; else it ends, as for a pause.
 */
export async function checkpointInto(
  h: InstanceHandle,
  runsc: Runsc,
  dir: string,
  options: { leaveRunning: boolean; compression?: CheckpointCompression },
): Promise<void> {
  const partial = `${dir}.partial`;
  rmSync(partial, { recursive: true, force: true });
  const args = ['checkpoint', `--image-path=${partial}`, `--compression=${options.compression ?? COMPRESSION}`, ...(options.leaveRunning ? ['--leave-running'] : []), h.id];
  try {
    await runsc.callChecked(h.netns, args, { timeoutMs: CHECKPOINT_TIMEOUT_MS });
  } catch (err) {
    rmSync(partial, { recursive: true, force: true });
    throw err;
  }
  rmSync(dir, { recursive: true, force: true });
  renameSync(partial, dir);
}

/**
 * Starts the instance's sandbox from its saved memory. runsc hands the sandbox stdio as
 * `create` does, so it gets the console log (a pipe would stay open as long as the
 * sandbox runs); `--detach` returns once the sandbox runs. Rejects with runsc's words.
 */
export async function restoreSandbox(h: InstanceHandle, runsc: Runsc): Promise<void> {
  await restoreFrom(h, runsc, checkpointDir(h));
}

/**
 * Starts the instance's sandbox from the saved state in `imageDir`: its own or another
 * sandbox's (a snapshot's, a fork's source's). runsc takes the id, bundle (root, mounts,
 * network namespace) and address from this instance; the processes, memory and
 * listeners from the image. The files the image's processes had open must be in this
 * instance's root as they were at the checkpoint.
 */
export async function restoreFrom(h: InstanceHandle, runsc: Runsc, imageDir: string): Promise<void> {
  const fd = openSync(h.consoleLog, 'a', 0o600);
  const before = statSync(h.consoleLog).size;
  let result;
  try {
    const args = ['restore', '--detach', `--image-path=${imageDir}`, `--bundle=${h.bundle}`, `--pid-file=${h.pidFile}`, h.id];
    result = await runsc.call(h.netns, args, { outputFd: fd, timeoutMs: CHECKPOINT_TIMEOUT_MS });
  } finally {
    closeSync(fd);
  }
  if (result.code !== 0) {
    // Its words went to the console log with its stdio.
    const said = readFileSync(h.consoleLog, 'utf8').slice(before).trim().split('\n').slice(-3).join(' | ');
    throw new HostCommandError('runsc restore', { ...result, stderr: said || result.stderr });
  }
}

/** Bytes the files of a saved state hold on disk (0 without one). */
export function imageBytes(dir: string): number {
  if (!existsSync(dir)) return 0;
  let total = 0;
  for (const name of readdirSync(dir)) total += statSync(join(dir, name)).size;
  return total;
}

/**
 * Whether this runsc's sandboxes can be checkpointed with their memory: only on gVisor's
 * own network stack (runsc refuses a sandbox on the host's: `checkpoint not supported
 * when using hostinet`).
 */
export function canCheckpoint(runsc: Runsc): boolean {
  return runsc.network === 'sandbox';
}
