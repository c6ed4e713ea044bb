// The thread that computes files_changed for runtimes' overlay writable layers
// (change-tracker.ts starts it). Parsing a listing of an instance's writable layer and
// diffing two of them costs time in proportion to the layer: a layer of 200,000 files
// takes the event loop for most of a second, during which every other tenant's requests
// wait. Here it takes this thread only. The listing taken before a command stays on
// this thread until the one after it is compared with it, so neither ever crosses over;
// what goes back is the list of changes. Instances watched with fanotify
// (change-watch.ts) are not listed at all: their picture here is kept up to date from
// the paths the kernel says were touched, and a snapshot is a mark in it.
import { parentPort, workerData } from 'node:worker_threads';
import type { FileChangeEntry } from '../types.ts';
import { ChangeWatch, changeWatcher } from './change-watch.ts';
import { diffLayers, LayerIndexes, listLayer, type Listing } from './changes.ts';
import type { ChangeMethod } from './tracking.ts';

export type ChangeRequest =
  /** Takes the state of the instance's layer now (a mark when it is watched, else a listing of `upper`); the answer's token names it. */
  | { id: number; op: 'snapshot'; instanceId: string; upper: string }
  /** Compares the layer now with the token's state, which is then dropped. */
  | { id: number; op: 'diff'; token: number; upper: string; imageKey: string; rootfs: string }
  /** Starts watching an instance's layer with fanotify; fails when that cannot be done. */
  | { id: number; op: 'watch'; instanceId: string; layer: string; upper: string }
  /** Stops watching it, so that its layer can be unmounted. */
  | { id: number; op: 'unwatch'; instanceId: string }
  /** Indexes an image ahead of its first diff. */
  | { id: number; op: 'index'; imageKey: string; rootfs: string }
  /** Drops a listing whose command never got to its diff. */
  | { id: number; op: 'discard'; token: number };

export type ChangeReply =
  | { id: number; ok: true; token?: number; changes?: FileChangeEntry[]; incomplete?: boolean; method?: ChangeMethod; walkedBecause?: string }
  | { id: number; ok: false; message: string };

export interface ChangeWorkerData {
  /** Where the walker is compiled to. */
  cacheDir: string;
  /** Paths the watcher keeps per instance between two syncs. */
  maxPaths: number;
}

const port = parentPort;
if (!port) throw new Error('change-worker.ts runs as a worker thread (see change-tracker.ts)');

const rootfsByImage = new Map<string, string>();
const indexes = new LayerIndexes((workerData as ChangeWorkerData).cacheDir, (key) => {
  const rootfs = rootfsByImage.get(key);
  if (rootfs === undefined) throw new Error(`no root filesystem known for image ${key}`);
  return rootfs;
});
const watch = new ChangeWatch(() => changeWatcher((workerData as ChangeWorkerData).cacheDir), (workerData as ChangeWorkerData).maxPaths);
/** Per instance being added to the watch: whether it is watched. */
const watching = new Map<string, Promise<boolean>>();
/** Each snapshot: a listing of the layer, or a mark in a watched instance's picture. */
const snapshots = new Map<number, { listing: Listing } | { instanceId: string; mark: number }>();
let nextToken = 1;

async function snapshot(instanceId: string, upper: string): Promise<{ listing: Listing } | { instanceId: string; mark: number }> {
  if ((await watching.get(instanceId)) && watch.has(instanceId)) {
    try {
      return { instanceId, mark: await watch.mark(instanceId) };
    } catch {
      // The watcher cannot answer: this command is listed by a walk.
    }
  }
  return { listing: await listLayer(await indexes.walker(), upper) };
}

async function handle(request: ChangeRequest): Promise<ChangeReply> {
  switch (request.op) {
    case 'snapshot': {
      const state = await snapshot(request.instanceId, request.upper);
      const token = nextToken++;
      snapshots.set(token, state);
      return { id: request.id, ok: true, token };
    }
    case 'diff': {
      const before = snapshots.get(request.token);
      snapshots.delete(request.token);
      if (!before) throw new Error(`no listing ${request.token} to compare with`);
      rootfsByImage.set(request.imageKey, request.rootfs);
      if ('mark' in before) {
        const lower = await indexes.lowerIndex(request.imageKey);
        const { changes, incomplete, walked } = await watch.changes(before.instanceId, before.mark, lower);
        return { id: request.id, ok: true, changes, incomplete, method: walked ? 'walk' : 'fanotify', ...(walked ? { walkedBecause: walked } : {}) };
      }
      const [after, lower] = await Promise.all([listLayer(await indexes.walker(), request.upper), indexes.lowerIndex(request.imageKey)]);
      return { id: request.id, ok: true, changes: diffLayers(before.listing, after, lower), incomplete: before.listing.incomplete || after.incomplete, method: 'walk' };
    }
    case 'watch': {
      const added = watch.watch(request.instanceId, request.layer, request.upper);
      watching.set(request.instanceId, added.then(() => true, () => false));
      await added;
      return { id: request.id, ok: true };
    }
    case 'unwatch':
      watching.delete(request.instanceId);
      await watch.unwatch(request.instanceId);
      return { id: request.id, ok: true };
    case 'index':
      rootfsByImage.set(request.imageKey, request.rootfs);
      await indexes.lowerIndex(request.imageKey);
      return { id: request.id, ok: true };
    case 'discard': {
      const state = snapshots.get(request.token);
      snapshots.delete(request.token);
      if (state && 'mark' in state) watch.release(state.instanceId, state.mark);
      return { id: request.id, ok: true };
    }
  }
}

port.on('message', (request: ChangeRequest) => {
  handle(request).then(
    (reply) => port.postMessage(reply),
    (err: unknown) => port.postMessage({ id: request.id, ok: false, message: err instanceof Error ? err.message : String(err) } satisfies ChangeReply),
  );
});
