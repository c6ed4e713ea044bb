// files_changed from fanotify: one change-watch.c process serves every watched instance
// of this service, and this module (on the files_changed thread, change-worker.ts) keeps
// each instance's picture of its writable layer (layer-picture.ts) up to date from what
// it reports. A command's start and end each ask for what was touched since the last
// question, so a command that changed nothing costs one round trip, and one that
// changed k paths costs a listing of those k. When the helper dies, every instance is
// listed whole again from a new one, and the commands under way say their list came
// from a walk, as they do when the kernel's queue of events overflowed.
import { type ChildProcessByStdio, spawn } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { compiled } from '../../host/native.ts';
import { decodeName, encodeName } from '../../lib/guest-names.ts';
import { KeyedSerial } from '../../lib/keyed-serial.ts';
import type { FileChangeEntry } from '../types.ts';
import type { LowerIndex } from './changes.ts';
import { LayerPicture, type WatchRecord } from './layer-picture.ts';

const HELPER_SOURCE = fileURLToPath(new URL('../../host/native/change-watch.c', import.meta.url));
const WALKER_SOURCE = fileURLToPath(new URL('../../host/native/layer-walk.c', import.meta.url));

/** The helper binary, compiled on first use into `cacheDir` (it includes the walker's source). */
export function changeWatcher(cacheDir: string): Promise<string> {
  return compiled(HELPER_SOURCE, 'change-watch', cacheDir, [], [WALKER_SOURCE]);
}

interface Pending {
  records: WatchRecord[];
  resolve: (records: WatchRecord[]) => void;
  reject: (err: Error) => void;
}

/** One running helper: requests go in as lines, answers come back in order. */
class Helper {
  private readonly child: ChildProcessByStdio<Writable, Readable, Readable>;
  private readonly pending: Pending[] = [];
  private rest = Buffer.alloc(0);
  private stderr = '';
  dead = false;

  constructor(binary: string, maxPaths: number, onExit: () => void) {
    this.child = spawn(binary, [String(maxPaths)], { stdio: ['pipe', 'pipe', 'pipe'] });
    this.child.stdout.on('data', (chunk: Buffer) => this.read(chunk));
    this.child.stderr.setEncoding('utf8').on('data', (d: string) => (this.stderr = (this.stderr + d).slice(-2000)));
    this.child.stdin.on('error', () => {});
    const end = (why: string) => {
      if (this.dead) return;
      this.dead = true;
      const err = new Error(`the change watcher ${why}${this.stderr ? `: ${this.stderr.trim()}` : ''}`);
      for (const p of this.pending.splice(0)) p.reject(err);
      onExit();
    };
    this.child.on('error', (err) => end(`could not run (${err.message})`));
    this.child.on('exit', (code, signal) => end(`exited (${signal ?? `exit ${code}`})`));
  }

  request(line: string): Promise<WatchRecord[]> {
    if (this.dead) return Promise.reject(new Error('the change watcher is not running'));
    return new Promise((resolve, reject) => {
      this.pending.push({ records: [], resolve, reject });
      this.child.stdin.write(`${line}\n`);
    });
  }

  kill(): void {
    this.child.kill('SIGKILL');
  }

  private read(chunk: Buffer): void {
    const data = this.rest.length > 0 ? Buffer.concat([this.rest, chunk]) : chunk;
    let start = 0;
    for (let end = data.indexOf(0, start); end >= 0; end = data.indexOf(0, start)) {
      this.record(data, start, end);
      start = end + 1;
    }
    this.rest = Buffer.from(data.subarray(start));
  }

  private record(data: Buffer, start: number, end: number): void {
    const current = this.pending[0];
    if (!current) return;
    const kind = data[start];
    if (kind === 0x45 /* E */ && end === start + 1) {
      this.pending.shift();
      current.resolve(current.records);
    } else if (kind === 0x46 /* F */) {
      this.pending.shift();
      current.reject(new Error(data.toString('utf8', start + 2, end)));
    } else if (kind === 0x52 /* R */) {
      current.records.push({ kind: 'reset', path: decodeName(data, start + 2, end) });
    } else if (kind === 0x49 /* I */) {
      current.records.push({ kind: 'inode', ino: data.toString('latin1', start + 2, end) });
    } else if (kind === 0x4f /* O */) {
      current.records.push({ kind: 'overflow', why: data.toString('utf8', start + 2, end) });
    } else {
      const tab = data.indexOf(9, start);
      if (tab > start && tab < end) current.records.push({ kind: 'entry', path: decodeName(data, tab + 1, end), header: data.toString('latin1', start, tab) });
    }
  }
}

interface Watched {
  layer: string;
  upper: string;
  picture: LayerPicture;
  /** Known to the current helper; false after the helper died, until added again. */
  added: boolean;
}

const hex = (s: string) => encodeName(s).toString('hex');

export class ChangeWatch {
  private readonly binary: () => Promise<string>;
  private readonly maxPaths: number;
  private helper: Helper | undefined;
  private readonly watched = new Map<string, Watched>();
  /** Requests per watch, one at a time, so that answers apply in order (keyed by the watch: a new watch of the instance starts afresh). */
  private readonly requests = new KeyedSerial<Watched>();

  /** `binary` gives the compiled helper; `maxPaths` bounds the paths it keeps per instance between two syncs. */
  constructor(binary: () => Promise<string>, maxPaths: number) {
    this.binary = binary;
    this.maxPaths = maxPaths;
  }

  has(instanceId: string): boolean {
    return this.watched.has(instanceId);
  }

  /** Starts watching an instance's layer (mounted at `layer`, the overlay's upper directory in it): lists it once. */
  async watch(instanceId: string, layer: string, upper: string): Promise<void> {
    const w: Watched = { layer, upper, picture: new LayerPicture(), added: false };
    this.watched.set(instanceId, w);
    try {
      await this.serially(w, () => this.add(instanceId, w));
    } catch (err) {
      if (this.watched.get(instanceId) === w) this.watched.delete(instanceId);
      throw err;
    }
  }

  /** Stops watching: the helper lets go of the layer, so that it can be unmounted. */
  async unwatch(instanceId: string): Promise<void> {
    const w = this.watched.get(instanceId);
    if (!w) return;
    this.watched.delete(instanceId);
    await this.serially(w, async () => {
      if (w.added && this.helper && !this.helper.dead) await this.helper.request(`remove ${instanceId}`);
    }).catch(() => {});
  }

  /** Brings the picture up to date and marks the start of a command. */
  mark(instanceId: string): Promise<number> {
    const w = this.get(instanceId);
    return this.serially(w, async () => {
      await this.sync(instanceId, w);
      return w.picture.mark();
    });
  }

  /** The regular files changed since the mark, which is then released. */
  changes(instanceId: string, token: number, lower: LowerIndex): Promise<{ changes: FileChangeEntry[]; incomplete: boolean; walked: string | undefined }> {
    const w = this.get(instanceId);
    return this.serially(w, async () => {
      try {
        await this.sync(instanceId, w);
        return w.picture.changesSince(token, lower);
      } finally {
        w.picture.release(token);
      }
    });
  }

  release(instanceId: string, token: number): void {
    this.watched.get(instanceId)?.picture.release(token);
  }

  /** Entries of the instance's picture (for tests and figures). */
  pictureSize(instanceId: string): number {
    return this.watched.get(instanceId)?.picture.size ?? 0;
  }

  close(): void {
    this.helper?.kill();
    this.helper = undefined;
  }

  private get(instanceId: string): Watched {
    const w = this.watched.get(instanceId);
    if (!w) throw new Error(`instance ${instanceId} is not watched`);
    return w;
  }

  private serially<T>(w: Watched, op: () => Promise<T>): Promise<T> {
    return this.requests.run(w, op);
  }

  private async running(): Promise<Helper> {
    if (this.helper && !this.helper.dead) return this.helper;
    const binary = await this.binary();
    if (this.helper && !this.helper.dead) return this.helper;
    const helper = new Helper(binary, this.maxPaths, () => {
      if (this.helper === helper) this.helper = undefined;
      for (const w of this.watched.values()) w.added = false;
    });
    this.helper = helper;
    return helper;
  }

  /** Adds the instance to the helper, which answers with a listing of the whole layer. */
  private async add(instanceId: string, w: Watched): Promise<void> {
    const helper = await this.running();
    const records = await helper.request(`add ${instanceId} ${hex(w.layer)} ${hex(w.upper)}`);
    // The picture is listed anew: a command under way no longer knows what it did alone.
    w.picture.apply([{ kind: 'overflow', why: 'the layer was listed anew (the watch started again)' }, ...records]);
    w.added = !helper.dead;
  }

  /** Applies what was touched since the last sync; once more (a whole listing) if that failed. */
  private async sync(instanceId: string, w: Watched): Promise<void> {
    try {
      await this.syncOnce(instanceId, w);
    } catch {
      // The helper died (the instance is added to a new one, with a whole listing), or
      // a listing failed (the helper answers the next sync with a whole listing).
      await this.syncOnce(instanceId, w);
    }
  }

  private async syncOnce(instanceId: string, w: Watched): Promise<void> {
    if (!w.added) return this.add(instanceId, w);
    const helper = await this.running();
    const again = w.picture.apply(await helper.request(`sync ${instanceId}`));
    // Other names of files that changed (hard links) are listed too, as a walk would.
    for (let i = 0; i < again.length; i += 512) {
      const paths = again.slice(i, i + 512).map(hex).join(' ');
      w.picture.apply(await helper.request(`scan ${instanceId} ${paths}`));
    }
  }
}
