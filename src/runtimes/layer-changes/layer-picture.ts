// One instance's writable layer as the walker would list it (path -> header, see
// layer-walk.c), kept up to date from what change-watch.c reports instead of listed
// again for each command. A command's start marks the picture; at its end, the paths
// changed since the mark are read from a log of changes, so the diff costs what changed
// since, never the size of the layer. The log is kept only while a mark is open.
import type { FileChangeEntry } from '../types.ts';
import { judgeChanges, type ListingView, type LowerIndex } from './changes.ts';

/** What change-watch.c reports, record by record. */
export type WatchRecord =
  /** Forget this path and everything below it ('' is the whole layer). */
  | { kind: 'reset'; path: string }
  /** The path as it is now, with the walker's header. */
  | { kind: 'entry'; path: string; header: string }
  /** Every path of this inode was touched (a link count changed, no name reported). */
  | { kind: 'inode'; ino: string }
  /** Events were lost (why): a whole listing follows. */
  | { kind: 'overflow'; why: string };

interface Mark {
  /** Where in the log the mark's changes start. */
  at: number;
  /** Why the picture was listed anew (events lost) since the mark, if it was: the diff came from a walk. */
  walked: string | undefined;
}

export class LayerPicture implements ListingView {
  private readonly entries = new Map<string, string>();
  /** The paths directly below each directory ('' for the top). */
  private readonly children = new Map<string, Set<string>>();
  /** The path of each regular file by inode number; a set for the few with several names (hard links). */
  private readonly inodes = new Map<string, string | Set<string>>();
  /** Directories listed as too deep to enter (the walker's `x`). */
  private tooDeep = 0;
  /** Each change since the oldest open mark: the path and its header before the change. */
  private log: { path: string; before: string | undefined }[] = [];
  private readonly marks = new Map<number, Mark>();
  private nextMark = 1;

  get size(): number {
    return this.entries.size;
  }

  get(path: string): string | undefined {
    return this.entries.get(path);
  }

  /** Starts a command's window; the token goes to changesSince() or release(). */
  mark(): number {
    const token = this.nextMark++;
    this.marks.set(token, { at: this.log.length, walked: undefined });
    return token;
  }

  release(token: number): void {
    this.marks.delete(token);
    if (this.marks.size === 0) this.log = [];
  }

  /**
   * Applies a batch of records; returns the paths of regular files whose other names
   * must be listed again: hard links of a file that changed, and every name of an
   * inode that was touched without one.
   */
  apply(records: Iterable<WatchRecord>): string[] {
    const listed = new Set<string>();
    const touchedInodes = new Set<string>();
    for (const record of records) {
      switch (record.kind) {
        case 'overflow':
          for (const mark of this.marks.values()) mark.walked ??= record.why;
          break;
        case 'reset':
          this.forget(record.path);
          break;
        case 'entry': {
          this.set(record.path, record.header);
          listed.add(record.path);
          const ino = inodeOf(record.header);
          if (ino !== undefined) touchedInodes.add(ino);
          break;
        }
        case 'inode':
          touchedInodes.add(record.ino);
          break;
      }
    }
    const again: string[] = [];
    for (const ino of touchedInodes) {
      const paths = this.inodes.get(ino);
      for (const path of typeof paths === 'string' ? [paths] : (paths ?? [])) if (!listed.has(path)) again.push(path);
    }
    return again;
  }

  /** The regular files changed since the mark, and whether part of the layer is unlisted. */
  changesSince(token: number, lower: LowerIndex): { changes: FileChangeEntry[]; incomplete: boolean; walked: string | undefined } {
    const mark = this.marks.get(token);
    if (!mark) throw new Error(`no mark ${token} on this layer`);
    const was = new Map<string, string | undefined>();
    for (let i = mark.at; i < this.log.length; i++) {
      const entry = this.log[i]!;
      if (!was.has(entry.path)) was.set(entry.path, entry.before);
    }
    const before: ListingView = { get: (path) => (was.has(path) ? was.get(path) : this.entries.get(path)) };
    const differences = function* (entries: Map<string, string>): Generator<[string, string | undefined, string | undefined]> {
      for (const [path, header] of was) yield [path, header, entries.get(path)];
    };
    let incomplete = this.tooDeep > 0;
    for (const header of was.values()) if (header?.startsWith('x ')) incomplete = true;
    return { changes: judgeChanges(differences(this.entries), before, this, lower), incomplete, walked: mark.walked };
  }

  private set(path: string, header: string): void {
    const old = this.entries.get(path);
    if (old === header) return;
    if (this.marks.size > 0) this.log.push({ path, before: old });
    if (old !== undefined) this.unindex(path, old);
    this.entries.set(path, header);
    const parent = parentOf(path);
    let siblings = this.children.get(parent);
    if (!siblings) this.children.set(parent, (siblings = new Set()));
    siblings.add(path);
    if (header.startsWith('x ')) this.tooDeep++;
    const ino = inodeOf(header);
    if (ino !== undefined) {
      const paths = this.inodes.get(ino);
      if (paths === undefined || paths === path) this.inodes.set(ino, path);
      else if (typeof paths === 'string') this.inodes.set(ino, new Set([paths, path]));
      else paths.add(path);
    }
  }

  /** Removes a path and everything below it. */
  private forget(path: string): void {
    if (path === '') {
      for (const p of [...(this.children.get('') ?? [])]) this.forget(p);
      return;
    }
    for (const child of [...(this.children.get(path) ?? [])]) this.forget(child);
    this.children.delete(path);
    const old = this.entries.get(path);
    if (old === undefined) return;
    if (this.marks.size > 0) this.log.push({ path, before: old });
    this.unindex(path, old);
    this.entries.delete(path);
    const siblings = this.children.get(parentOf(path));
    siblings?.delete(path);
    if (siblings?.size === 0) this.children.delete(parentOf(path));
  }

  private unindex(path: string, header: string): void {
    if (header.startsWith('x ')) this.tooDeep--;
    const ino = inodeOf(header);
    if (ino === undefined) return;
    const paths = this.inodes.get(ino);
    if (paths === path) this.inodes.delete(ino);
    else if (typeof paths === 'object') {
      paths.delete(path);
      if (paths.size === 1) this.inodes.set(ino, [...paths][0]!);
    }
  }
}

function parentOf(path: string): string {
  const slash = path.lastIndexOf('/');
  return slash < 0 ? '' : path.slice(0, slash);
}

/**
 * A regular file's inode number from its header (TYPE MODE SIZE MTIME CTIME INO OPAQUE).
 * Only regular files count: another kind's header changing with its links (the
 * overlay's shared whiteouts) never changes what files_changed says.
 */
function inodeOf(header: string): string | undefined {
  if (!header.startsWith('f ')) return undefined;
  return header.split(' ')[5];
}
