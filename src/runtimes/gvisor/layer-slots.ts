// Instance directories made ahead of creates, each with its writable layer already
// formatted ext4 (at the size the last create asked for) and loop-mounted where an
// instance's layer goes, kept in a directory of the data directory beside the
// instances. A create renames one into place as its instance's directory (a mount
// inside a directory moves with it) instead of running mkfs.ext4 and the loop mount on
// its path (23-37 and 22-30 ms at p50 under load). They refill in the background, one
// at a time, off the create's path, as network slots do.
//
// Only plain ext4 layers come from here: a layer that keeps undo points is btrfs, and a
// snapshot's layer is a copy of its source's. A create of another size than the one
// made ahead makes its own and makes that size the one kept ready. Nothing in them is
// an instance's, so close() and the next start unmount and remove whatever is there.
import { randomUUID } from 'node:crypto';
import { mkdirSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { formatDiskImage, mountDiskImage, unmountAll } from '../../host/mounts.ts';
import { InstanceHandle } from './instance-handle.ts';

interface ReadyLayer {
  /** The directory to become an instance's. */
  dir: string;
  sizeMb: number;
}

export interface LayerSlotsOptions {
  /** Where the directories are made: on the instances' file system, so that a rename moves one. */
  dir: string;
  /** Directories kept ready; 0 turns them off. */
  size: number;
  log: Logger;
  /** Mounts a formatted layer (the host's loop mount unless a test says otherwise). */
  mountLayer?: (image: string, mountPoint: string, sizeMb: number) => Promise<void>;
  /** Unmounts everything under a directory (unmountAll unless a test says otherwise). */
  unmountUnder?: (dir: string) => Promise<void>;
}

export class LayerSlots {
  private readonly dir: string;
  private readonly log: Logger;
  readonly size: number;
  private readonly mountLayer: (image: string, mountPoint: string, sizeMb: number) => Promise<void>;
  private readonly unmountUnder: (dir: string) => Promise<void>;
  private readonly ready: ReadyLayer[] = [];
  /** The size of layer to keep ready: the last create's (none before the first). */
  private wantedMb: number | undefined;
  private filling: Promise<void> | undefined;
  private closed = false;

  constructor(options: LayerSlotsOptions) {
    this.dir = options.dir;
    this.log = options.log;
    this.size = options.size;
    this.mountLayer = options.mountLayer ?? mountDiskImage;
    this.unmountUnder = options.unmountUnder ?? unmountAll;
  }

  /** Directories ready to be taken now. */
  get available(): number {
    return this.ready.length;
  }

  /** Removes what an earlier run left (made or half made, mounted or not); called at start, before any take. */
  async removeLeftovers(): Promise<void> {
    await this.unmountUnder(this.dir);
    rmSync(this.dir, { recursive: true, force: true });
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
  }

  /**
   * Renames a ready directory with a layer of `sizeMb` to `target`, an instance's
   * directory (which must not exist yet); false when none is ready, and the caller makes
   * its own. Either way `sizeMb` becomes the size kept ready from now on.
   */
  take(sizeMb: number, target: string): boolean {
    this.want(sizeMb);
    for (let i = this.ready.findIndex((l) => l.sizeMb === sizeMb); i >= 0; i = this.ready.findIndex((l) => l.sizeMb === sizeMb)) {
      const [layer] = this.ready.splice(i, 1);
      try {
        renameSync(layer!.dir, target);
        return true;
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        // The target is there already: the layer is still good for the next create.
        if (code === 'EEXIST' || code === 'ENOTEMPTY') {
          this.ready.push(layer!);
          return false;
        }
        // Gone behind the service's back, or another file system (EXDEV): not usable.
        this.log.warn({ err, dir: layer!.dir }, 'could not take a writable layer made ahead; it is removed');
        void this.discard(layer!.dir);
      }
    }
    return false;
  }

  private want(sizeMb: number): void {
    if (this.wantedMb === sizeMb) return;
    this.wantedMb = sizeMb;
    // Layers of the size no longer asked for would only take room.
    for (const layer of this.ready.splice(0)) {
      if (layer.sizeMb === sizeMb) this.ready.push(layer);
      else void this.discard(layer.dir);
    }
  }

  /** Makes directories until `size` are ready, one at a time, in the background; joins a fill under way. */
  fill(): Promise<void> {
    if (this.size === 0 || this.closed || this.wantedMb === undefined) return Promise.resolve();
    this.filling ??= (async () => {
      try {
        mkdirSync(this.dir, { recursive: true, mode: 0o700 });
        while (!this.closed && this.wantedMb !== undefined && this.ready.filter((l) => l.sizeMb === this.wantedMb).length < this.size) {
          const sizeMb = this.wantedMb;
          const id = randomUUID();
          // Laid out as an instance's directory is (instance-handle.ts), which it becomes.
          const partial = new InstanceHandle(this.dir, 'slot', `${id}.partial`);
          const dir = join(this.dir, id);
          try {
            mkdirSync(partial.layer, { recursive: true, mode: 0o700 });
            await formatDiskImage(partial.diskImage, sizeMb);
            await this.mountLayer(partial.diskImage, partial.layer, sizeMb);
            renameSync(partial.dir, dir);
          } catch (err) {
            await this.discard(partial.dir);
            throw err;
          }
          if (this.closed || this.wantedMb !== sizeMb) await this.discard(dir);
          else this.ready.push({ dir, sizeMb });
        }
      } catch (err) {
        // The next create makes its own layer; the next fill tries again.
        this.log.warn({ err }, 'could not make a writable layer ahead of creates');
      } finally {
        this.filling = undefined;
      }
    })();
    return this.filling;
  }

  /** Unmounts and removes one directory made here. */
  private async discard(dir: string): Promise<void> {
    try {
      await this.unmountUnder(dir);
      rmSync(dir, { recursive: true, force: true });
    } catch (err) {
      this.log.warn({ err, dir }, 'could not remove a writable layer made ahead; the next start removes it');
    }
  }

  /** Stops filling and removes every directory made ahead. */
  async close(): Promise<void> {
    this.closed = true;
    await this.filling;
    this.ready.splice(0);
    try {
      await this.removeLeftovers();
    } catch (err) {
      this.log.warn({ err }, 'could not remove the writable layers made ahead; the next start removes them');
    }
  }
}
