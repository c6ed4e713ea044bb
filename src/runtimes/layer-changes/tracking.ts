// What a runtime whose instances have an overlay writable layer (an upper directory on a
// file system of the instance's own) gives its command path for files_changed: mark the
// layer before a command, diff it after against the image's index, watch and unwatch a
// layer, index an image. ChangeTracker (change-tracker.ts) is the implementation every
// such runtime uses; undo points (undo.ts) and MIME types (mime-sniffing.ts) sit beside
// it. Nothing here knows which runtime runs the instance.
import type { FileChangeEntry } from '../types.ts';

/** An image's root filesystem, the layer's lower directory: what changes are judged against. */
export interface ImageRef {
  key: string;
  rootfs: string;
}

/** How a list was made: from the paths the kernel reported touched, or by listing the whole layer. */
export type ChangeMethod = 'fanotify' | 'walk';

export interface LayerDiff {
  /** The regular files created, modified or deleted since the mark. */
  changes: FileChangeEntry[];
  /** Part of the layer could not be listed (deeper than the walker goes). */
  incomplete: boolean;
  method: ChangeMethod;
  /** Why the layer was walked when it is watched (the watch overflowed, the helper died, ...). */
  walkedBecause?: string;
}

export interface LayerChangeTracking {
  /** Indexes an image, so that its instances' first diff does not wait for it. */
  index(image: ImageRef): Promise<void>;
  /**
   * Watches an instance's layer (its file system mounted at `layer`, holding `upper`) so
   * that a mark costs what changed, not the layer's size; rejects when it cannot be
   * watched, and the instance's commands are then diffed by listing the layer.
   */
  watch(instanceId: string, layer: string, upper: string): Promise<void>;
  /** Stops watching; the layer is let go of once this resolves (before it is unmounted). */
  unwatch(instanceId: string): Promise<void>;
  /** Marks the layer's state before a command; the mark goes to diff() or discard(). */
  mark(instanceId: string, upper: string): Promise<number>;
  /** What changed in the layer since the mark. */
  diff(mark: number, upper: string, image: ImageRef): Promise<LayerDiff>;
  /** Forgets a mark whose command ended without a diff. */
  discard(mark: number): void;
  /** The no-follow layer walker, for listings of a layer outside a command (a revert's). */
  walkerBinary(): Promise<string>;
  close(): Promise<void>;
}
