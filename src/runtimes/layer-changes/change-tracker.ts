// files_changed for a runtime's overlay writable layers (tracking.ts's
// LayerChangeTracking), computed off the service's event loop: one
// worker thread (change-worker.ts) lists writable layers, keeps each command's "before"
// listing and diffs it with the "after" one, so that one tenant's big layer never
// delays another tenant's requests. The thread starts on first use, does not keep the
// process alive, and is started again if it dies (the commands it was tracking then
// fail, the next ones work). The thread also runs the fanotify watcher of the instances
// that use it (change-watch.ts); its helper process ends with the thread.
import { Worker } from 'node:worker_threads';
import { layerWalker } from './changes.ts';
import type { ChangeReply, ChangeRequest, ChangeWorkerData } from './change-worker.ts';
import type { ImageRef, LayerChangeTracking, LayerDiff } from './tracking.ts';

/** Each kind of request as the caller writes it, without the id the tracker gives it. */
type WithoutId<T> = T extends unknown ? Omit<T, 'id'> : never;
type Request = WithoutId<ChangeRequest>;

interface Waiting {
  resolve: (reply: ChangeReply & { ok: true }) => void;
  reject: (err: Error) => void;
}

export class ChangeTracker implements LayerChangeTracking {
  private readonly cacheDir: string;
  private worker: Worker | undefined;
  private nextId = 1;
  /** Requests sent to the current thread, waiting for their answers. */
  private pending = new Map<number, Waiting>();
  /** Instances watched with fanotify: a new thread watches them again. */
  private readonly watched = new Map<string, { layer: string; upper: string }>();

  private readonly maxPaths: number;
  private walker: Promise<string> | undefined;
  /** Set by close(): work that comes later (a command that ended after a shutdown began) is refused, not given a new thread. */
  private closed = false;

  /** `cacheDir` receives the compiled layer walker; `maxPaths` bounds what the watcher keeps per instance (config.ts). */
  constructor(cacheDir: string, maxPaths = 65_536) {
    this.cacheDir = cacheDir;
    this.maxPaths = maxPaths;
  }

  /** Takes the layer's state before a command (a mark when watched, else a listing); the token goes to diff() or discard(). */
  async mark(instanceId: string, upper: string): Promise<number> {
    const reply = await this.call({ op: 'snapshot', instanceId, upper });
    return reply.token ?? 0;
  }

  /** The regular files changed since the mark, whether part of the layer could not be listed, and how the list was made. */
  async diff(token: number, upper: string, image: ImageRef): Promise<LayerDiff> {
    const reply = await this.call({ op: 'diff', token, upper, imageKey: image.key, rootfs: image.rootfs });
    return {
      changes: reply.changes ?? [],
      incomplete: reply.incomplete ?? false,
      method: reply.method ?? 'walk',
      ...(reply.walkedBecause ? { walkedBecause: reply.walkedBecause } : {}),
    };
  }

  /**
   * Watches an instance's layer (mounted at `layer`, holding `upper`) with fanotify from
   * now on, so that its commands' marks cost what changed instead of a listing. Rejects when
   * the kernel or the helper cannot: the instance's commands are then listed by walks.
   */
  async watch(instanceId: string, layer: string, upper: string): Promise<void> {
    this.watched.set(instanceId, { layer, upper });
    try {
      await this.call({ op: 'watch', instanceId, layer, upper });
    } catch (err) {
      this.watched.delete(instanceId);
      throw err;
    }
  }

  /** Stops watching an instance; its layer is let go of once this resolves. */
  async unwatch(instanceId: string): Promise<void> {
    if (!this.watched.delete(instanceId) || !this.worker) return;
    await this.call({ op: 'unwatch', instanceId });
  }

  /** The no-follow layer walker (changes.ts), compiled once. */
  walkerBinary(): Promise<string> {
    this.walker ??= layerWalker(this.cacheDir);
    this.walker.catch(() => (this.walker = undefined));
    return this.walker;
  }

  /** Indexes an image now, so that its instances' first diff does not wait for it. */
  async index(image: ImageRef): Promise<void> {
    await this.call({ op: 'index', imageKey: image.key, rootfs: image.rootfs });
  }

  /** Forgets a mark whose command ended without a diff. */
  discard(token: number): void {
    this.call({ op: 'discard', token }).catch(() => {});
  }

  async close(): Promise<void> {
    this.closed = true;
    const worker = this.worker;
    this.worker = undefined;
    if (worker) await worker.terminate();
  }

  private call(request: Request): Promise<ChangeReply & { ok: true }> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const worker = this.thread();
      this.pending.set(id, { resolve, reject });
      worker.postMessage({ ...request, id } as ChangeRequest);
    });
  }

  private thread(): Worker {
    if (this.worker) return this.worker;
    // A thread made after close() would outlive the service and keep its process from exiting.
    if (this.closed) throw new Error('the change tracker was closed');
    const worker = new Worker(new URL('./change-worker.ts', import.meta.url), { workerData: { cacheDir: this.cacheDir, maxPaths: this.maxPaths } satisfies ChangeWorkerData });
    worker.unref();
    // Each thread answers only what was sent to it; a new thread gets a new map.
    const pending = new Map<number, Waiting>();
    this.pending = pending;
    worker.on('message', (reply: ChangeReply) => {
      const waiting = pending.get(reply.id);
      if (!waiting) return;
      pending.delete(reply.id);
      if (reply.ok) waiting.resolve(reply);
      else waiting.reject(new Error(reply.message));
    });
    const fail = (err: Error) => {
      if (this.worker === worker) this.worker = undefined;
      for (const waiting of pending.values()) waiting.reject(err);
      pending.clear();
    };
    worker.on('error', fail);
    worker.on('exit', (code) => fail(new Error(`the files_changed thread exited (${code})`)));
    this.worker = worker;
    // A thread that replaces one that died watches the instances again (each is listed whole once).
    for (const [instanceId, { layer, upper }] of this.watched) {
      const id = this.nextId++;
      pending.set(id, { resolve: () => {}, reject: () => {} });
      worker.postMessage({ op: 'watch', instanceId, layer, upper, id } satisfies ChangeRequest);
    }
    return worker;
  }
}
