// The thread that computes files_changed for the gVisor runtime (change-tracker.ts
// starts it). Parsing a listing of an instance's writable layer and diffing two of them
// costs time in proportion to the layer: a layer of 200,000 files takes the event loop
// for most of a second, during which every other tenant's requests wait. Here it takes
// this thread only. The listing taken before a command stays on this thread until the
// one after it is compared with it, so neither ever crosses over; what goes back is
// the list of changes.
import { parentPort, workerData } from 'node:worker_threads';
import type { FileChangeEntry } from '../types.ts';
import { diffLayers, LayerIndexes, listLayer, type Listing } from './changes.ts';

export type ChangeRequest =
  /** Lists `upper` now; the answer's token names the listing. */
  | { id: number; op: 'snapshot'; upper: string }
  /** Lists `upper` again and compares it with the token's listing, which is then dropped. */
  | { id: number; op: 'diff'; token: number; upper: string; imageKey: string; rootfs: string }
  /** Indexes an image ahead of its first diff. */
  | { id: number; op: 'index'; imageKey: string; rootfs: string }
  /** Drops a listing whose command never got to its diff. */
  | { id: number; op: 'discard'; token: number };

export type ChangeReply =
  | { id: number; ok: true; token?: number; changes?: FileChangeEntry[]; incomplete?: boolean }
  | { id: number; ok: false; message: string };

export interface ChangeWorkerData {
  /** Where the walker is compiled to. */
  cacheDir: string;
}

const port = parentPort;
if (!port) throw new Error('change-worker.ts runs as a worker thread (see change-tracker.ts)');

const rootfsByImage = new Map<string, string>();
const indexes = new LayerIndexes((workerData as ChangeWorkerData).cacheDir, (key) => {
  const rootfs = rootfsByImage.get(key);
  if (rootfs === undefined) throw new Error(`no root filesystem known for image ${key}`);
  return rootfs;
});
const listings = new Map<number, Listing>();
let nextToken = 1;

async function handle(request: ChangeRequest): Promise<ChangeReply> {
  switch (request.op) {
    case 'snapshot': {
      const listing = await listLayer(await indexes.walker(), request.upper);
      const token = nextToken++;
      listings.set(token, listing);
      return { id: request.id, ok: true, token };
    }
    case 'diff': {
      const before = listings.get(request.token);
      listings.delete(request.token);
      if (!before) throw new Error(`no listing ${request.token} to compare with`);
      rootfsByImage.set(request.imageKey, request.rootfs);
      const [after, lower] = await Promise.all([listLayer(await indexes.walker(), request.upper), indexes.lowerIndex(request.imageKey)]);
      return { id: request.id, ok: true, changes: diffLayers(before, after, lower), incomplete: before.incomplete || after.incomplete };
    }
    case 'index':
      rootfsByImage.set(request.imageKey, request.rootfs);
      await indexes.lowerIndex(request.imageKey);
      return { id: request.id, ok: true };
    case 'discard':
      listings.delete(request.token);
      return { id: request.id, ok: true };
  }
}

port.on('message', (request: ChangeRequest) => {
  handle(request).then(
    (reply) => port.postMessage(reply),
    (err: unknown) => port.postMessage({ id: request.id, ok: false, message: err instanceof Error ? err.message : String(err) } satisfies ChangeReply),
  );
});
