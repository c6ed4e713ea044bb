// Applying an image's layers into a fresh root filesystem: every blob is checked against
// its size and digest before anything is written, then each layer (plain, gzip or zstd,
// told apart by its content) is unpacked in order and its tar checked against the image
// config's `diff_ids`.
//
// Layers are untrusted input, and they are applied by root on the host, so this code,
// not a tar program or an extracting library, decides what is written (tar-reader.ts
// says why the reader is our own). Every entry's path is checked component by
// component with lstat: `..` is refused, a leading `/` stays inside the root, and an
// entry whose parent is a symbolic link is refused (layers made by image builders
// record real paths, so a real image never needs to write through a link). Files are
// created with O_EXCL|O_NOFOLLOW after whatever was at their path is removed, so nothing
// is ever written through a link. Ownership, modes, times, hard links and device nodes
// are kept; extended attributes (file capabilities) are not, since Node cannot set them,
// and the build says how many it left out.
import { createHash } from 'node:crypto';
import {
  chmodSync,
  closeSync,
  constants,
  fchmodSync,
  fchownSync,
  futimesSync,
  linkSync,
  lchownSync,
  lstatSync,
  lutimesSync,
  mkdirSync,
  openSync,
  readdirSync,
  rmSync,
  symlinkSync,
  writeSync,
} from 'node:fs';
import { join } from 'node:path';
import { pipeline, type Readable } from 'node:stream';
import { createGunzip, createZstdDecompress } from 'node:zlib';
import { run } from '../../host/run.ts';
import { OciImageError } from './errors.ts';
import { blobPath, type Descriptor, type OciImage } from './layout.ts';
import { ChunkReader, type TarEntry, tarEntries } from './tar-reader.ts';

export async function verifyBlob(image: OciImage, layer: Descriptor): Promise<void> {
  const path = blobPath(layer, image.image);
  const size = image.source.size(path);
  if (size !== layer.size) {
    throw new OciImageError(`${image.image}: layer ${layer.digest} is ${size} bytes, its descriptor says ${layer.size}; the layout is damaged`);
  }
  const hash = createHash('sha256');
  for await (const chunk of image.source.stream(path)) hash.update(chunk as Buffer);
  const digest = `sha256:${hash.digest('hex')}`;
  if (digest !== layer.digest) {
    throw new OciImageError(`${image.image}: layer ${layer.digest} does not match its digest (it hashes to ${digest}); the layout is damaged`);
  }
}

async function decompressed(image: OciImage, layer: Descriptor): Promise<Readable> {
  const path = blobPath(layer, image.image);
  // The content decides, not the media type: some tools label gzip layers as plain tar.
  const head = Buffer.alloc(4);
  let got = 0;
  for await (const chunk of image.source.stream(path)) {
    const c = chunk as Buffer;
    got = c.copy(head, 0, 0, 4);
    break;
  }
  const raw = image.source.stream(path);
  // pipeline() destroys the file stream too when the reader stops early.
  if (got >= 2 && head[0] === 0x1f && head[1] === 0x8b) return pipeline(raw, createGunzip(), () => {});
  if (got >= 4 && head.readUInt32LE(0) === 0xfd2fb528) return pipeline(raw, createZstdDecompress(), () => {});
  return raw;
}

export interface LayerStats {
  entries: number;
  xattrs: number;
}

export async function applyLayer(image: OciImage, layer: Descriptor, diffId: string, rootfs: string, what: string, signal?: AbortSignal): Promise<LayerStats> {
  const input = await decompressed(image, layer);
  const hash = createHash('sha256');
  const hashed = (async function* () {
    for await (const chunk of input) {
      hash.update(chunk as Buffer);
      yield chunk as Buffer;
    }
  })();
  const reader = new ChunkReader(hashed);
  const applier = new LayerApplier(rootfs, `${image.image}: ${what}`);
  const stats: LayerStats = { entries: 0, xattrs: 0 };
  try {
    for await (const { entry, body } of tarEntries(reader)) {
      signal?.throwIfAborted();
      stats.entries++;
      stats.xattrs += entry.xattrs;
      await applier.apply(entry, body);
    }
    await reader.drain();
  } catch (err) {
    input.destroy();
    if (signal?.aborted) throw err;
    if (err instanceof OciImageError) throw new OciImageError(err.message.startsWith(image.image) ? err.message : `${image.image}: ${what}: ${err.message}`);
    throw new OciImageError(`${image.image}: ${what} cannot be applied: ${(err as Error).message}`);
  }
  applier.finish();
  const digest = `sha256:${hash.digest('hex')}`;
  if (digest !== diffId) throw new OciImageError(`${image.image}: ${what} unpacks to ${digest}, but the image config says ${diffId}; the layout is damaged`);
  return stats;
}

/** Splits an entry's path into components inside the root; `..` anywhere is refused. */
function entryParts(name: string, what: string): string[] {
  const parts = name.split('/').filter((p) => p !== '' && p !== '.');
  if (parts.includes('..')) throw new OciImageError(`${what}: entry "${name}" has a ".." component; refused`);
  return parts;
}

/** Applies the entries of one layer; knows which paths this layer wrote, for whiteouts. */
class LayerApplier {
  private readonly rootfs: string;
  private readonly what: string;
  /** Paths this layer wrote, and every directory above them. */
  private readonly touched = new Set<string>();
  private readonly dirTimes: { parts: string[]; mtime: number }[] = [];

  constructor(rootfs: string, what: string) {
    this.rootfs = rootfs;
    this.what = what;
  }

  private path(parts: string[]): string {
    return join(this.rootfs, ...parts);
  }

  /**
   * Makes every directory above `parts` exist as a real directory. An existing symbolic
   * link on the way is refused: following it could lead out of the root.
   */
  private parentDirs(parts: string[], name: string, create: boolean): boolean {
    for (let i = 1; i < parts.length; i++) {
      const dir = parts.slice(0, i);
      const stat = lstatSync(this.path(dir), { throwIfNoEntry: false });
      if (stat?.isDirectory()) continue;
      if (!stat && create) {
        mkdirSync(this.path(dir), { mode: 0o755 });
        continue;
      }
      if (!create) return false;
      const kind = stat?.isSymbolicLink() ? 'a symbolic link' : 'not a directory';
      throw new OciImageError(`${this.what}: entry "${name}" is below /${dir.join('/')}, which is ${kind}; refused`);
    }
    return true;
  }

  async apply(entry: TarEntry, body: () => AsyncGenerator<Buffer>): Promise<void> {
    const parts = entryParts(entry.name, this.what);
    const base = parts.at(-1);
    if (base === undefined) {
      // The root itself (`./`): only its metadata.
      if (entry.type === '5') this.setMeta(this.rootfs, entry, true);
      return;
    }
    if (base.startsWith('.wh.')) {
      // Nothing to hide below a directory that does not exist (or is a link).
      if (!this.parentDirs(parts, entry.name, false)) return;
      const dir = parts.slice(0, -1);
      if (base === '.wh..wh..opq') {
        for (const child of readdirSync(this.path(dir))) this.hideLower([...dir, child]);
      } else if (!base.startsWith('.wh..wh.')) {
        const hidden = base.slice(4);
        // `.wh..` and `.wh...` would name the directory itself or its parent.
        if (hidden === '' || hidden === '.' || hidden === '..') throw new OciImageError(`${this.what}: whiteout "${entry.name}" names no entry; refused`);
        this.hideLower([...dir, hidden]);
      }
      return;
    }
    this.parentDirs(parts, entry.name, true);
    const target = this.path(parts);
    const existing = lstatSync(target, { throwIfNoEntry: false });
    for (let i = 1; i <= parts.length; i++) this.touched.add(parts.slice(0, i).join('/'));
    switch (entry.type) {
      case '5':
        if (!existing?.isDirectory()) {
          if (existing) rmSync(target, { recursive: true, force: true });
          mkdirSync(target);
        }
        this.setMeta(target, entry, true);
        this.dirTimes.push({ parts, mtime: entry.mtime });
        return;
      case '0':
      case '\0':
      case '7': {
        if (existing) rmSync(target, { recursive: true, force: true });
        const fd = openSync(target, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
        try {
          for await (const chunk of body()) {
            for (let at = 0; at < chunk.length; ) at += writeSync(fd, chunk, at);
          }
          // Owner first: chown clears the setuid and setgid bits the mode may set.
          fchownSync(fd, entry.uid, entry.gid);
          fchmodSync(fd, entry.mode & 0o7777);
          futimesSync(fd, entry.mtime, entry.mtime);
        } finally {
          closeSync(fd);
        }
        return;
      }
      case '2':
        if (existing) rmSync(target, { recursive: true, force: true });
        // The link's target is only text here; it is resolved inside the sandbox.
        symlinkSync(entry.linkname, target);
        lchownSync(target, entry.uid, entry.gid);
        lutimesSync(target, entry.mtime, entry.mtime);
        return;
      case '1': {
        const sourceParts = entryParts(entry.linkname, this.what);
        if (sourceParts.length === 0 || !this.parentDirs(sourceParts, entry.linkname, false)) {
          throw new OciImageError(`${this.what}: hard link "${entry.name}" points to "${entry.linkname}", which is not in the image`);
        }
        const source = this.path(sourceParts);
        const stat = lstatSync(source, { throwIfNoEntry: false });
        if (!stat || stat.isDirectory()) throw new OciImageError(`${this.what}: hard link "${entry.name}" points to "${entry.linkname}", which is not a file in the image`);
        if (source === target) return;
        if (existing) rmSync(target, { recursive: true, force: true });
        // link(2) does not follow a symbolic link it is given: it links the link itself.
        linkSync(source, target);
        return;
      }
      case '3':
      case '4':
      case '6': {
        if (existing) rmSync(target, { recursive: true, force: true });
        const args = entry.type === '6' ? [target, 'p'] : [target, entry.type === '3' ? 'c' : 'b', String(entry.devmajor), String(entry.devminor)];
        const made = await run('mknod', args, { timeoutMs: 10_000 });
        if (made.code !== 0) throw new OciImageError(`${this.what}: cannot create device "${entry.name}": ${made.stderr.trim()}`);
        this.setMeta(target, entry, false);
        return;
      }
      default:
        throw new OciImageError(`${this.what}: entry "${entry.name}" has tar type "${entry.type}", which roomkit does not apply`);
    }
  }

  /** For a path just checked to be no link (a directory or a device node). */
  private setMeta(path: string, entry: TarEntry, isDir: boolean): void {
    lchownSync(path, entry.uid, entry.gid);
    chmodSync(path, entry.mode & 0o7777);
    if (!isDir) lutimesSync(path, entry.mtime, entry.mtime);
  }

  /**
   * Hides what lower layers put at `parts`: a whiteout applies only to lower layers, so
   * what this layer wrote stays, and a directory holding something this layer wrote
   * keeps only that.
   */
  private hideLower(parts: string[]): void {
    const path = this.path(parts);
    const stat = lstatSync(path, { throwIfNoEntry: false });
    if (!stat) return;
    if (!this.touched.has(parts.join('/'))) {
      rmSync(path, { recursive: true, force: true });
      return;
    }
    if (stat.isDirectory()) for (const child of readdirSync(path)) this.hideLower([...parts, child]);
  }

  /** Directory times last: writing entries into a directory changes its time. */
  finish(): void {
    for (const { parts, mtime } of this.dirTimes.reverse()) {
      // The layer may since have replaced a parent with a link; then the time is skipped.
      if (!this.parentDirs(parts, '', false)) continue;
      if (!lstatSync(this.path(parts), { throwIfNoEntry: false })?.isDirectory()) continue;
      lutimesSync(this.path(parts), mtime, mtime);
    }
  }
}
