// Snapshots of gVisor instances: a copy of an instance's writable layer (the sparse
// disk image under `instances/<id>/disk.img`) kept under `snapshots/<id>/`, and new
// instances started over a copy of one. The image's read-only layers are not copied:
// they stay in the image cache, and the snapshot names the image it was taken over
// (images prune keeps it). A copy is sparse, so a snapshot costs the blocks the layer
// uses (its file system's own metadata, about 1 MiB for ext4, plus the instance's
// changes), not its size.
//
// A running instance's layer is taken whole: the guest flushes its writes (sync), the
// host freezes the layer's file system (fsfreeze, which also flushes the host's cache),
// the image is copied, and the file system is thawed. The instance's writes wait while
// it is frozen (for the copy: milliseconds for a layer of a few MiB). A paused
// instance's layer is still mounted (its pause keeps the mounts for the resume) and is
// frozen the same way, with no guest to flush; one not mounted (the host restarted) is
// copied as it is.
//
// A snapshot with memory also holds the sandbox's saved state under `memory/`, taken at
// the same instant as the layer so that the two agree (memory-snapshots.ts: the sandbox
// is held still while both are taken, and goes on running after); a paused instance's
// saved memory, when its pause kept one, is copied with its layer, which it matches.
//
// A btrfs layer (one that keeps undo points) is copied the same way; each copy made
// from it gets a file system id of its own (btrfstune -m) so that both can be mounted
// at once, and loses the source's undo points (they belong to the source's commands).
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statfsSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { deleteSubvolume } from '../../host/btrfs.ts';
import { isMountPoint } from '../../host/mounts.ts';
import { run, runChecked } from '../../host/run.ts';
import { formatBytes } from '../../lib/format-size.ts';
import { HostOutOfSpace } from '../types.ts';
import { imageBytes } from './checkpoint.ts';
import type { InstanceHandle } from './instance-handle.ts';

/** How long copying one layer may take (a full 10 GiB layer at ~100 MiB/s, with room). */
const COPY_TIMEOUT_MS = 10 * 60_000;
const TOOL_TIMEOUT_MS = 30_000;
/**
 * Free disk a snapshot's copy must leave in the data directory: instances' sparse layers
 * grow into it, and a host file system that fills up fails them all. The larger of this
 * and a twentieth of the file system.
 */
const KEEP_FREE_BYTES = 1024 * 1024 * 1024;
/** Snapshot ids are uuids: nothing else is ever a path below the snapshots directory. */
const SNAPSHOT_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** What a snapshot's directory says about it (snapshot.json). */
export interface SnapshotMeta {
  snapshotId: string;
  sourceInstanceId: string;
  /** The image the layer was taken over; a restore mounts the layer over the same one. */
  imageKey: string;
  /** The layer is btrfs (it kept undo points); absent: ext4. */
  undoLayer?: boolean;
  /**
   * It holds the sandbox's memory and processes too (`memory/`). Its agent, restored
   * from that memory, answers to the source's key (it read its key once, at its
   * boot): an instance restored from it takes that key.
   */
  memory?: { agentKey: string };
  createdAt: string;
}

/** Where a snapshot's memory comes from: the running sandbox, or the saved state of a paused one. */
export type MemorySource =
  | { running: (memoryDir: string, copyLayer: () => Promise<void>) => Promise<void>; agentKey: string }
  | { savedDir: string; agentKey: string };

export class LayerSnapshots {
  readonly dir: string;
  private readonly log: Logger;

  constructor(dataDir: string, log: Logger) {
    this.dir = join(dataDir, 'snapshots');
    this.log = log;
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
  }

  private dirOf(snapshotId: string): string {
    if (!SNAPSHOT_ID.test(snapshotId)) throw new Error(`not a snapshot id: ${snapshotId}`);
    return join(this.dir, snapshotId);
  }

  private imageOf(snapshotId: string): string {
    return join(this.dirOf(snapshotId), 'layer.img');
  }

  /** The snapshot's record, or undefined when it has none (never made, removed, or half made). */
  meta(snapshotId: string): SnapshotMeta | undefined {
    try {
      return JSON.parse(readFileSync(join(this.dirOf(snapshotId), 'snapshot.json'), 'utf8')) as SnapshotMeta;
    } catch {
      return undefined;
    }
  }

  /** The directory of the snapshot's saved memory (it holds one when its record says `memory`). */
  memoryDirOf(snapshotId: string): string {
    return join(this.dirOf(snapshotId), 'memory');
  }

  /**
   * Copies the instance's layer into a new snapshot, with its memory when `memory` says
   * where from; the bytes of host disk it holds. `flush` makes the guest write out what
   * it holds (for a running instance).
   */
  async save(h: InstanceHandle, snapshotId: string, flush: () => Promise<void>, memory?: MemorySource): Promise<{ diskBytes: number; memoryKept: boolean }> {
    const meta = h.readMeta();
    if (!meta?.imageKey) throw new Error(`instance ${h.id} has no record of what it was made from`);
    if (!existsSync(h.diskImage)) throw new Error(`instance ${h.id} has no writable layer`);
    const memoryBytes = memory && 'savedDir' in memory ? imageBytes(memory.savedDir) : memory ? (meta.memoryMb ?? 0) * 1024 * 1024 : 0;
    assertRoomFor(this.dir, allocatedBytes(h.diskImage) + memoryBytes);
    const dir = this.dirOf(snapshotId);
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const partial = join(dir, 'layer.img.partial');
    const copyLayer = async () => {
      if (isMountPoint(h.layer)) {
        await runChecked('fsfreeze', ['--freeze', h.layer], { timeoutMs: TOOL_TIMEOUT_MS });
        try {
          await copySparse(h.diskImage, partial);
        } finally {
          await thaw(h.layer, this.log);
        }
      } else {
        await copySparse(h.diskImage, partial);
      }
    };
    try {
      if (isMountPoint(h.layer)) await flush();
      if (memory && 'running' in memory) await memory.running(this.memoryDirOf(snapshotId), copyLayer);
      else {
        await copyLayer();
        if (memory) await runChecked('cp', ['-r', '--sparse=always', '--', memory.savedDir, this.memoryDirOf(snapshotId)], { timeoutMs: COPY_TIMEOUT_MS });
      }
      renameSync(partial, this.imageOf(snapshotId));
      const record: SnapshotMeta = {
        snapshotId,
        sourceInstanceId: h.id,
        imageKey: meta.imageKey,
        ...(meta.undoLayer ? { undoLayer: true } : {}),
        ...(memory ? { memory: { agentKey: memory.agentKey } } : {}),
        createdAt: new Date().toISOString(),
      };
      // Written last: a directory without it is a half-made snapshot, removed by a sweep.
      writeFileSync(join(dir, 'snapshot.json'), `${JSON.stringify(record)}\n`, { mode: 0o600 });
    } catch (err) {
      rmSync(dir, { recursive: true, force: true });
      throw err;
    }
    return { diskBytes: allocatedBytes(this.imageOf(snapshotId)) + imageBytes(this.memoryDirOf(snapshotId)), memoryKept: memory !== undefined };
  }

  /**
   * Copies the snapshot's layer to be the new instance's (before its layer is mounted);
   * the snapshot's record.
   */
  async copyInto(snapshotId: string, h: InstanceHandle): Promise<SnapshotMeta> {
    const meta = this.meta(snapshotId);
    if (!meta) throw new Error(`snapshot ${snapshotId} is not on this host (it was deleted, or never finished)`);
    await copySparse(this.imageOf(snapshotId), h.diskImage);
    // Two btrfs file systems with the same id cannot be mounted side by side reliably.
    if (meta.undoLayer) await runChecked('btrfstune', ['-f', '-m', h.diskImage], { timeoutMs: TOOL_TIMEOUT_MS });
    return meta;
  }

  /** Drops the undo points a copied btrfs layer brought from its source (once it is mounted). */
  async dropInheritedUndoPoints(h: InstanceHandle): Promise<void> {
    if (!existsSync(h.undoDir)) return;
    for (const name of readdirSync(h.undoDir)) await deleteSubvolume(join(h.undoDir, name));
  }

  async remove(snapshotId: string): Promise<void> {
    rmSync(this.dirOf(snapshotId), { recursive: true, force: true });
  }

  /** Ids of the snapshots on this host, finished or not. */
  list(): string[] {
    return readdirSync(this.dir).filter((name) => SNAPSHOT_ID.test(name));
  }

  /** The image keys snapshots were taken over (the image cache must keep them). */
  imageKeys(): Set<string> {
    const keys = new Set<string>();
    for (const id of this.list()) {
      const key = this.meta(id)?.imageKey;
      if (key) keys.add(key);
    }
    return keys;
  }
}

/** Thaws a file system `fsfreeze` froze; one that is not frozen is left as it is. */
export async function thaw(mountPoint: string, log: Logger): Promise<void> {
  const result = await run('fsfreeze', ['--unfreeze', mountPoint], { timeoutMs: TOOL_TIMEOUT_MS });
  // EINVAL ("Invalid argument") is fsfreeze's answer for a file system that is not frozen.
  if (result.code !== 0 && !/Invalid argument/.test(result.stderr)) {
    log.error({ mountPoint, stderr: result.stderr.trim() }, 'could not thaw a writable layer');
  }
}

/** Copies a sparse file keeping its holes (only the blocks in use are read and written). */
async function copySparse(from: string, to: string): Promise<void> {
  await runChecked('cp', ['--sparse=always', '--', from, to], { timeoutMs: COPY_TIMEOUT_MS });
}

/** Refuses a copy of `bytes` that would leave the file system of `dir` with less than it must keep free. */
function assertRoomFor(dir: string, bytes: number): void {
  const fs = statfsSync(dir);
  const free = fs.bavail * fs.bsize;
  const keep = Math.max(KEEP_FREE_BYTES, Math.floor((fs.blocks * fs.bsize) / 20));
  if (free - bytes < keep) {
    throw new HostOutOfSpace(
      `the host's data directory has ${formatBytes(free)} free; this snapshot needs ${formatBytes(bytes)} and ${formatBytes(keep)} must stay free ` +
        "for the instances' writable layers: delete snapshots or instances you no longer need, or ask the operator for more disk",
    );
  }
}

/** Bytes of disk a file's blocks take (a sparse file's holes take none). */
function allocatedBytes(path: string): number {
  return statSync(path).blocks * 512;
}
