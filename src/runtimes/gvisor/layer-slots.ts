// Writable layers made ahead of creates: sparse files formatted ext4 at the size the
// last create asked for, kept in a directory of the data directory beside the
// instances, so that a create moves one into its instance's directory (a rename)
// instead of running mkfs.ext4 on its path (23-37 ms at p50 under load). They refill in
// the background, one at a time, off the create's path, as network slots do.
//
// Only plain ext4 layers come from here: a layer that keeps undo points is btrfs, and a
// snapshot's layer is a copy of its source's. A create of another size than the one
// made ahead formats its own and makes that size the one kept ready. The files hold
// nothing of any instance (never mounted), so close() and the next start simply remove
// whatever is in the directory.
import { randomUUID } from 'node:crypto';
import { mkdirSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { formatDiskImage } from '../../host/mounts.ts';

interface ReadyLayer {
  path: string;
  sizeMb: number;
}

export interface LayerSlotsOptions {
  /** Where the layers are made: on the instances' file system, so that a rename moves one. */
  dir: string;
  /** Layers kept ready; 0 turns them off. */
  size: number;
  log: Logger;
}

export class LayerSlots {
  private readonly dir: string;
  private readonly log: Logger;
  readonly size: number;
  private readonly ready: ReadyLayer[] = [];
  /** The size of layer to keep ready: the last create's (none before the first). */
  private wantedMb: number | undefined;
  private filling: Promise<void> | undefined;
  private closed = false;

  constructor(options: LayerSlotsOptions) {
    this.dir = options.dir;
    this.log = options.log;
    this.size = options.size;
  }

  /** Layers ready to be taken now. */
  get available(): number {
    return this.ready.length;
  }

  /** Removes what an earlier run left (made or half made); called at start, before any take. */
  removeLeftovers(): void {
    rmSync(this.dir, { recursive: true, force: true });
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
  }

  /**
   * Moves a ready layer of `sizeMb` to `target` (which must not exist); false when none
   * is ready, and the caller formats its own. Either way `sizeMb` becomes the size kept
   * ready from now on.
   */
  take(sizeMb: number, target: string): boolean {
    this.want(sizeMb);
    for (let i = this.ready.findIndex((l) => l.sizeMb === sizeMb); i >= 0; i = this.ready.findIndex((l) => l.sizeMb === sizeMb)) {
      const [layer] = this.ready.splice(i, 1);
      try {
        renameSync(layer!.path, target);
        return true;
      } catch (err) {
        // Gone behind the service's back, or another file system (EXDEV): not usable.
        this.log.warn({ err, path: layer!.path }, 'could not take a writable layer made ahead; it is removed');
        rmSync(layer!.path, { force: true });
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
      else rmSync(layer.path, { force: true });
    }
  }

  /** Makes layers until `size` are ready, one at a time, in the background; joins a fill under way. */
  fill(): Promise<void> {
    if (this.size === 0 || this.closed || this.wantedMb === undefined) return Promise.resolve();
    this.filling ??= (async () => {
      try {
        mkdirSync(this.dir, { recursive: true, mode: 0o700 });
        while (!this.closed && this.wantedMb !== undefined && this.ready.filter((l) => l.sizeMb === this.wantedMb).length < this.size) {
          const sizeMb = this.wantedMb;
          const id = randomUUID();
          const partial = join(this.dir, `${id}.partial`);
          const path = join(this.dir, `${id}.img`);
          try {
            await formatDiskImage(partial, sizeMb);
            renameSync(partial, path);
          } catch (err) {
            rmSync(partial, { force: true });
            throw err;
          }
          if (this.closed || this.wantedMb !== sizeMb) rmSync(path, { force: true });
          else this.ready.push({ path, sizeMb });
        }
      } catch (err) {
        // The next create formats its own layer; the next fill tries again.
        this.log.warn({ err }, 'could not make a writable layer ahead of creates');
      } finally {
        this.filling = undefined;
      }
    })();
    return this.filling;
  }

  /** Stops filling and removes every layer made ahead. */
  async close(): Promise<void> {
    this.closed = true;
    await this.filling;
    this.ready.splice(0);
    try {
      for (const name of readdirSync(this.dir)) rmSync(join(this.dir, name), { force: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') this.log.warn({ err }, 'could not remove the writable layers made ahead; the next start removes them');
    }
  }
}
