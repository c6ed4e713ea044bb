// An instance's saved memory: `runsc checkpoint` writes the sandbox's whole state
// (memory, processes, open files, listening sockets) to a directory in the instance's
// data directory and ends the sandbox; `runsc restore` starts a sandbox of the same id
// from it, over the same bundle, mounts and network namespace. pause.ts decides when.
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
import { closeSync, existsSync, openSync, readdirSync, readFileSync, renameSync, rmSync, statSync } from 'node:fs';
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
  return join(h.dir, 'checkpoint.partial');
}

/** Whether the instance has a complete saved memory to restore. */
export function hasCheckpoint(h: InstanceHandle): boolean {
  return existsSync(join(checkpointDir(h), 'checkpoint.img'));
}

/** Bytes the instance's saved memory holds on disk (0 without one). */
export function checkpointBytes(h: InstanceHandle): number {
  const dir = checkpointDir(h);
  if (!existsSync(dir)) return 0;
  let total = 0;
  for (const name of readdirSync(dir)) total += statSync(join(dir, name)).size;
  return total;
}

/** Removes the instance's saved memory and any partial one. */
export function removeCheckpoint(h: InstanceHandle): void {
  rmSync(partialDir(h), { recursive: true, force: true });
  rmSync(checkpointDir(h), { recursive: true, force: true });
}

/**
 * Saves the running sandbox's state and ends it (its host processes exit; runsc's
 * record stays, still saying "running", until a delete). Replaces an older image only
 * once the new one is complete; on failure the older one, if any, is left as it was.
 */
export async function checkpointSandbox(h: InstanceHandle, runsc: Runsc, compression: CheckpointCompression = COMPRESSION): Promise<void> {
  const partial = partialDir(h);
  rmSync(partial, { recursive: true, force: true });
  try {
    await runsc.callChecked(h.netns, ['checkpoint', `--image-path=${partial}`, `--compression=${compression}`, h.id], { timeoutMs: CHECKPOINT_TIMEOUT_MS });
  } catch (err) {
    rmSync(partial, { recursive: true, force: true });
    throw err;
  }
  rmSync(checkpointDir(h), { recursive: true, force: true });
  renameSync(partial, checkpointDir(h));
}

/**
 * Starts the instance's sandbox from its saved memory. runsc hands the sandbox stdio as
 * `create` does, so it gets the console log (a pipe would stay open as long as the
 * sandbox runs); `--detach` returns once the sandbox runs. Rejects with runsc's words.
 */
export async function restoreSandbox(h: InstanceHandle, runsc: Runsc): Promise<void> {
  const fd = openSync(h.consoleLog, 'a', 0o600);
  const before = statSync(h.consoleLog).size;
  let result;
  try {
    const args = ['restore', '--detach', `--image-path=${checkpointDir(h)}`, `--bundle=${h.bundle}`, `--pid-file=${h.pidFile}`, h.id];
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

/**
 * Whether this runsc's sandboxes can be checkpointed with their memory: only on gVisor's
 * own network stack (runsc refuses a sandbox on the host's: `checkpoint not supported
 * when using hostinet`).
 */
export function canCheckpoint(runsc: Runsc): boolean {
  return runsc.network === 'sandbox';
}
