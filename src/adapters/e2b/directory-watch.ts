// files.watchDir over core's directory listings: the watched directory (and, when asked,
// what is under it) is listed every POLL_MS and compared with the listing before, each
// difference an E2B file system event (create, write, remove; a rename shows as the old
// name removed and the new one created). Polling is what core offers until it has a
// watch of its own; a tree larger than MAX_ENTRIES is refused rather than half-watched.
import { randomUUID } from 'node:crypto';
import { Code, ConnectError } from '@connectrpc/connect';
import type { DirectoryListing } from '../../core/file-schema.ts';
import type { InstanceRef } from '../../core/instance-address.ts';
import type { Services } from '../../services.ts';
import { EventType } from './generated/filesystem/filesystem_pb.js';

/** How often the watched tree is listed. */
export const POLL_MS = 500;
/** Most entries a watched tree may hold. */
const MAX_ENTRIES = 5000;
/** Deepest level a recursive watch lists. */
const MAX_DEPTH = 16;

type Seen = Map<string, { type: string; size: number; mtime: string }>;

export interface WatchEvent {
  /** The entry's path relative to the watched directory. */
  name: string;
  type: EventType;
}

/** The tree under `root`, by path relative to it. */
async function listTree(services: Services, address: InstanceRef, root: string, recursive: boolean): Promise<Seen> {
  const seen: Seen = new Map();
  const walk = async (directory: string, prefix: string, level: number): Promise<void> => {
    let listing: DirectoryListing;
    try {
      listing = await services.files.listAt(address, directory);
    } catch (err) {
      // A subdirectory removed between two listings is simply gone.
      if (level > 1) return;
      throw err;
    }
    for (const entry of listing.entries) {
      const name = prefix === '' ? entry.name : `${prefix}/${entry.name}`;
      seen.set(name, { type: entry.type, size: entry.size, mtime: entry.mtime });
      if (seen.size > MAX_ENTRIES) throw new ConnectError(`the watched directory holds more than ${MAX_ENTRIES} entries; watch a smaller one`, Code.ResourceExhausted);
      if (recursive && entry.type === 'directory' && level < MAX_DEPTH) await walk(`${directory === '/' ? '' : directory}/${entry.name}`, name, level + 1);
    }
  };
  await walk(root, '', 1);
  return seen;
}

function differences(before: Seen, after: Seen): WatchEvent[] {
  const events: WatchEvent[] = [];
  for (const [name, now] of after) {
    const was = before.get(name);
    if (!was || was.type !== now.type) events.push({ name, type: EventType.CREATE });
    else if (now.type !== 'directory' && (was.size !== now.size || was.mtime !== now.mtime)) events.push({ name, type: EventType.WRITE });
  }
  for (const name of before.keys()) if (!after.has(name)) events.push({ name, type: EventType.REMOVE });
  return events;
}

/** What the watch yields first, once the tree has been listed: it has started. */
export const FIRST: readonly WatchEvent[] = Object.freeze([]);

/**
 * Lists the tree once (so a missing or unreadable directory fails at once) and yields
 * FIRST, then each poll's events until `signal` aborts.
 */
export async function* watchDirectory(
  services: Services,
  address: InstanceRef,
  root: string,
  options: { recursive: boolean; signal: AbortSignal },
): AsyncGenerator<WatchEvent[]> {
  let before = await listTree(services, address, root, options.recursive);
  yield FIRST as WatchEvent[];
  while (!options.signal.aborted) {
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, POLL_MS);
      options.signal.addEventListener('abort', () => {
        clearTimeout(timer);
        resolve();
      }, { once: true });
    });
    if (options.signal.aborted) return;
    const after = await listTree(services, address, root, options.recursive);
    yield differences(before, after);
    before = after;
  }
}

/** How long a polled watcher lives without being asked for its events. */
const UNREAD_WATCHER_MS = 60_000;
/** Most events a polled watcher keeps between two reads (the oldest go first). */
const MAX_PENDING_EVENTS = 10_000;

interface Watcher {
  instanceId: string;
  events: WatchEvent[];
  stop: AbortController;
  lastRead: number;
  failure?: unknown;
}

/**
 * The polling form of a watch (CreateWatcher, GetWatcherEvents, RemoveWatcher), as E2B's
 * synchronous SDKs use it: each watcher runs watchDirectory in the background and keeps
 * its events until they are read; one not read for a minute is removed.
 */
export class Watchers {
  private readonly watchers = new Map<string, Watcher>();

  /** Starts a watcher once the tree has been listed (a missing directory fails here). */
  async create(services: Services, address: InstanceRef, root: string, recursive: boolean): Promise<string> {
    const stop = new AbortController();
    const watch = watchDirectory(services, address, root, { recursive, signal: stop.signal });
    await watch.next();
    const id = randomUUID();
    const watcher: Watcher = { instanceId: address.instanceId, events: [], stop, lastRead: Date.now() };
    this.watchers.set(id, watcher);
    void (async () => {
      try {
        for await (const events of watch) {
          watcher.events.push(...events);
          if (watcher.events.length > MAX_PENDING_EVENTS) watcher.events.splice(0, watcher.events.length - MAX_PENDING_EVENTS);
          if (Date.now() - watcher.lastRead > UNREAD_WATCHER_MS) this.remove(address.instanceId, id);
        }
      } catch (err) {
        // Kept for the next read to report; forgotten if nobody reads it.
        watcher.failure = err;
        setTimeout(() => {
          if (this.watchers.get(id) === watcher) this.watchers.delete(id);
        }, UNREAD_WATCHER_MS).unref();
      }
    })();
    return id;
  }

  /** The events since the last read; the watch's failure once it has failed. */
  take(instanceId: string, id: string): WatchEvent[] {
    const watcher = this.find(instanceId, id);
    watcher.lastRead = Date.now();
    if (watcher.failure !== undefined && watcher.events.length === 0) {
      this.remove(instanceId, id);
      throw watcher.failure;
    }
    return watcher.events.splice(0);
  }

  remove(instanceId: string, id: string): void {
    const watcher = this.find(instanceId, id);
    watcher.stop.abort();
    this.watchers.delete(id);
  }

  private find(instanceId: string, id: string): Watcher {
    const watcher = this.watchers.get(id);
    if (!watcher || watcher.instanceId !== instanceId) throw new ConnectError(`no watcher ${id} in this sandbox`, Code.NotFound);
    return watcher;
  }
}
