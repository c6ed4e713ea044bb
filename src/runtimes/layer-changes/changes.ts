// files_changed for overlay-backed instances. The overlay's upper directory holds
// exactly what the instance changed since it started (new and copied-up files, and
// whiteouts for deletions), so a command's changes are the difference between two
// metadata listings of it, taken before and after, read against the image (the lower
// layer) to tell "created" from "modified" and to see deletions of image files. The
// cost grows with what the instance has changed, never with the image's size (beyond
// one index of the image per process). The listings come from layer-walk.c, which
// never follows a guest-made link on the host.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { compiled } from '../../host/native.ts';
import { decodeName } from '../../lib/guest-names.ts';
import type { FileChangeEntry } from '../types.ts';

const WALKER_SOURCE = fileURLToPath(new URL('../../host/native/layer-walk.c', import.meta.url));
const WALK_TIMEOUT_MS = 60_000;

/** Path inside the guest (without its leading slash) -> the walker's header for it. */
export class Listing extends Map<string, string> {
  /** A directory was too deep to enter (the walker's `x`): what is below it is not listed. */
  incomplete = false;
}

/** What the image holds at a path: its type (f, d, l, o) and, for regular files, its size. */
export interface LowerEntry {
  type: string;
  size: number;
}
export type LowerIndex = Map<string, LowerEntry>;

/** The walker binary, compiled on first use into `cacheDir`. */
export function layerWalker(cacheDir: string): Promise<string> {
  return compiled(WALKER_SOURCE, 'layer-walk', cacheDir);
}

/**
 * The walker and the index of each image, made once per process for all the instances
 * of that image; a failed attempt is forgotten, so the next one tries again.
 */
export class LayerIndexes {
  private readonly cacheDir: string;
  private readonly rootfsOf: (imageKey: string) => string;
  private walkerBinary: Promise<string> | undefined;
  private readonly lower = new Map<string, Promise<LowerIndex>>();

  /** `cacheDir` receives the compiled walker; `rootfsOf` finds an image's root filesystem. */
  constructor(cacheDir: string, rootfsOf: (imageKey: string) => string) {
    this.cacheDir = cacheDir;
    this.rootfsOf = rootfsOf;
  }

  walker(): Promise<string> {
    this.walkerBinary ??= layerWalker(this.cacheDir);
    this.walkerBinary.catch(() => (this.walkerBinary = undefined));
    return this.walkerBinary;
  }

  /** The index of an image's root filesystem. */
  lowerIndex(imageKey: string): Promise<LowerIndex> {
    let index = this.lower.get(imageKey);
    if (!index) {
      index = this.walker().then((walker) => listLayer(walker, this.rootfsOf(imageKey))).then(lowerIndexOf);
      index.catch(() => this.lower.delete(imageKey));
      this.lower.set(imageKey, index);
    }
    return index;
  }
}

/** Lists `dir` with the walker: every entry's metadata, keyed by its path relative to `dir`. */
export function listLayer(walker: string, dir: string): Promise<Listing> {
  return new Promise((resolve, reject) => {
    const child = spawn(walker, [dir], { stdio: ['ignore', 'pipe', 'pipe'] });
    const chunks: Buffer[] = [];
    let stderr = '';
    const timer = setTimeout(() => child.kill('SIGKILL'), WALK_TIMEOUT_MS);
    child.stdout.on('data', (c: Buffer) => chunks.push(c));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d.slice(0, 2000)));
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (code !== 0) return reject(new Error(`listing the writable layer failed (${signal ?? `exit ${code}`}): ${stderr.trim()}`));
      resolve(parseListing(Buffer.concat(chunks)));
    });
  });
}

export function parseListing(data: Buffer): Listing {
  const listing = new Listing();
  let start = 0;
  while (start < data.length) {
    const end = data.indexOf(0, start);
    if (end < 0) break;
    const tab = data.indexOf(9, start);
    if (tab > start && tab < end) {
      listing.set(decodeName(data, tab + 1, end), data.toString('latin1', start, tab));
      if (data[start] === 0x78 /* x */) listing.incomplete = true;
    }
    start = end + 1;
  }
  return listing;
}

/** The image's index, built from a listing of its root filesystem. */
export function lowerIndexOf(listing: Listing): LowerIndex {
  const index: LowerIndex = new Map();
  for (const [path, header] of listing) {
    const [type = 'o', , size = '0'] = header.split(' ');
    index.set(path, { type, size: Number(size) });
  }
  return index;
}

interface Header {
  type: string;
  size: number;
  opaque: boolean;
}

function parseHeader(header: string): Header {
  const parts = header.split(' ');
  return { type: parts[0] ?? 'o', size: Number(parts[2] ?? 0), opaque: parts[6] === 'O' };
}

/** Whether an upper entry hides what the image has at and below its path. */
function hides(header: string | undefined): boolean {
  if (header === undefined) return false;
  const h = parseHeader(header);
  // A directory too deep to enter (`x`) is still a directory: it hides nothing below it.
  return (h.type !== 'd' && h.type !== 'x') || h.opaque;
}

type Visible = { from: 'upper'; header: string; size: number } | { from: 'lower'; size: number } | null;

/** Reads an upper layer's headers by path: a whole listing, or a view of one (layer-picture.ts). */
export interface ListingView {
  get(path: string): string | undefined;
}

/** The regular file the guest sees at `path` given an upper listing, or null. */
export function visible(upper: ListingView, lower: Pick<LowerIndex, 'get'>, path: string): Visible {
  const header = upper.get(path);
  if (header !== undefined) {
    const h = parseHeader(header);
    return h.type === 'f' ? { from: 'upper', header, size: h.size } : null;
  }
  // Not in the upper layer: the image's file shows through unless an ancestor hides it.
  for (let i = path.indexOf('/'); i >= 0; i = path.indexOf('/', i + 1)) {
    if (hides(upper.get(path.slice(0, i)))) return null;
  }
  const entry = lower.get(path);
  return entry?.type === 'f' ? { from: 'lower', size: entry.size } : null;
}

/** The image's paths below `dir`. */
function lowerBelow(lower: LowerIndex, dir: string): string[] {
  const prefix = `${dir}/`;
  const paths: string[] = [];
  for (const path of lower.keys()) if (path.startsWith(prefix)) paths.push(path);
  return paths;
}

/**
 * The regular files created, modified or deleted between two listings of an upper
 * directory, with absolute guest paths, sorted by path. A file is modified when its
 * size, times or inode changed, or when it was copied up from the image.
 */
export function diffLayers(before: Listing, after: Listing, lower: LowerIndex): FileChangeEntry[] {
  function* differences(): Generator<[string, string | undefined, string | undefined]> {
    for (const [path, now] of after) yield [path, before.get(path), now];
    for (const [path, was] of before) if (!after.has(path)) yield [path, was, undefined];
  }
  return judgeChanges(differences(), before, after, lower);
}

/**
 * The regular files changed between two states of an upper directory, given the paths
 * whose header differs (path, header before, header after: every such path, and
 * possibly more) and a view of each whole state. Sorted by path, absolute.
 */
export function judgeChanges(
  differences: Iterable<[string, string | undefined, string | undefined]>,
  before: ListingView,
  after: ListingView,
  lower: LowerIndex,
): FileChangeEntry[] {
  const candidates = new Set<string>();
  for (const [path, was, now] of differences) {
    if (was === now) continue;
    candidates.add(path);
    // A new whiteout or opaque directory hides the image's files below it (and the reverse).
    if (hides(was) !== hides(now) && lower.get(path)?.type === 'd') for (const p of lowerBelow(lower, path)) candidates.add(p);
  }

  const changes: FileChangeEntry[] = [];
  for (const path of candidates) {
    const was = visible(before, lower, path);
    const now = visible(after, lower, path);
    if (was === null && now === null) continue;
    if (was === null && now !== null) changes.push({ path: `/${path}`, status: 'created', size: now.size });
    else if (was !== null && now === null) changes.push({ path: `/${path}`, status: 'deleted' });
    else if (was !== null && now !== null) {
      const copiedUp = was.from === 'lower' && now.from === 'upper';
      const rewritten = was.from === 'upper' && now.from === 'upper' && was.header !== now.header;
      if (copiedUp || rewritten) changes.push({ path: `/${path}`, status: 'modified', size: now.size });
    }
  }
  return changes.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}
