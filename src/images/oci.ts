// Root filesystems from OCI images: a profile's `image` of `oci:<name>[:<tag>]` names an
// OCI image layout (a directory, or a `.tar` of one) in the operator's OCI directory
// (ROOMKIT_OCI_DIR). The builder resolves it to one image manifest, whose digest goes
// into the cache key, verifies every blob, and applies the layers into a fresh root
// filesystem, then adds what instances need (the VM user, tini, a real /tmp).
//
// Layers are untrusted input, and they are applied by root on the host, so the tar
// reader is our own rather than GNU tar: GNU tar follows a symbolic link that an
// earlier layer left in the tree when it writes a later entry below it (`a -> /etc`,
// then `a/passwd`), and making it safe would take a chroot holding a tar binary, or
// parsing `tar -tv` listings, whose names are ambiguous. Here every entry's path is
// checked component by component with lstat: `..` is refused, a leading `/` stays inside
// the root, and an entry whose parent is a symbolic link is refused (layers made by
// image builders record real paths, so a real image never needs to write through a
// link). Files are created with O_EXCL|O_NOFOLLOW after whatever was at their path is
// removed, so nothing is ever written through a link. Ownership, modes, times, hard
// links and device nodes are kept; extended attributes (file capabilities) are not,
// since Node cannot set them, and the build says how many it left out.
//
// Nothing of the image runs on the host: the VM user is added by editing /etc/passwd,
// /etc/group and the shadow files directly instead of running the image's `useradd` in
// a chroot, because a chroot does not contain root and an image's programs are no more
// trusted than its layers. Every instance runs /usr/bin/tini as its init: an image
// without it gets the host's static tini (Debian's `tini` package ships
// /usr/bin/tini-static, which runs in any image, whatever its libc), and without that
// the build fails saying what to install; a dynamically linked tini from the host could
// not be trusted to find its libraries in the image.
//
// A registry pull would only need a function that writes a layout into the OCI
// directory; everything from resolveOciImage() on is the same for it.
import { createHash } from 'node:crypto';
import {
  chmodSync,
  closeSync,
  constants,
  copyFileSync,
  createReadStream,
  fchmodSync,
  fchownSync,
  fstatSync,
  futimesSync,
  linkSync,
  lchownSync,
  lstatSync,
  lutimesSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  readSync,
  rmSync,
  symlinkSync,
  writeSync,
  type Stats,
} from 'node:fs';
import { join } from 'node:path';
import { pipeline, type Readable } from 'node:stream';
import { createGunzip, createZstdDecompress } from 'node:zlib';
import { run } from '../host/run.ts';

export const OCI_PREFIX = 'oci:';

/** Where a host's static tini is found (Debian's `tini` package ships it). */
const HOST_STATIC_TINI = '/usr/bin/tini-static';
/** Manifests, indexes and configs are small; a larger one is refused rather than read. */
const MAX_JSON_BYTES = 4 * 1024 * 1024;
const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
const TAG_RE = /^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$/;

const MEDIA = {
  index: ['application/vnd.oci.image.index.v1+json', 'application/vnd.docker.distribution.manifest.list.v2+json'],
  manifest: ['application/vnd.oci.image.manifest.v1+json', 'application/vnd.docker.distribution.manifest.v2+json'],
  layer: [
    'application/vnd.oci.image.layer.v1.tar',
    'application/vnd.oci.image.layer.v1.tar+gzip',
    'application/vnd.oci.image.layer.v1.tar+zstd',
    'application/vnd.docker.image.rootfs.diff.tar.gzip',
  ],
};

/** A failure the caller can act on; the builder passes its message on as the instance's reason. */
export class OciImageError extends Error {}

export function isOciImage(image: string): boolean {
  return image.startsWith(OCI_PREFIX);
}

export interface OciReference {
  name: string;
  tag?: string;
}

/** Parses `oci:<name>[:<tag>]`; the name is one entry of the OCI directory, never a path. */
export function parseOciImage(image: string): OciReference {
  const rest = image.slice(OCI_PREFIX.length);
  const colon = rest.indexOf(':');
  const name = colon < 0 ? rest : rest.slice(0, colon);
  const tag = colon < 0 ? undefined : rest.slice(colon + 1);
  if (name.includes('/') || name.includes('..') || !NAME_RE.test(name)) {
    throw new OciImageError(
      `image "${image}": an OCI image is named by a directory or .tar file directly inside the server's OCI directory (ROOMKIT_OCI_DIR): ` +
        "letters, digits, '.', '_' and '-', with no '/' or '..'",
    );
  }
  if (tag !== undefined && !TAG_RE.test(tag)) {
    throw new OciImageError(`image "${image}": "${tag}" is not a tag (letters, digits, '.', '_' and '-', at most 128)`);
  }
  return tag === undefined ? { name } : { name, tag };
}

interface Descriptor {
  mediaType?: string;
  digest: string;
  size: number;
  annotations?: Record<string, string>;
  platform?: { os?: string; architecture?: string; variant?: string };
}

export interface OciImage {
  image: string;
  /** The image manifest's digest: the same digest is the same image. */
  manifestDigest: string;
  layers: Descriptor[];
  /** sha256 of each layer's uncompressed tar, from the image config. */
  diffIds: string[];
  source: LayoutSource;
}

/**
 * Finds the image `image` names in `ociDir` and reads (and verifies) its manifest and
 * config; the layers are read only by a build.
 */
export async function resolveOciImage(ociDir: string, image: string, arch: string = process.arch): Promise<OciImage> {
  try {
    return resolveLayout(ociDir, image, arch);
  } catch (err) {
    if (err instanceof OciImageError) throw err;
    throw new OciImageError(`${image}: cannot read the layout: ${(err as Error).message}`);
  }
}

function resolveLayout(ociDir: string, image: string, arch: string): OciImage {
  const ref = parseOciImage(image);
  const source = openLayout(ociDir, ref.name, image);
  const index = parseJson<{ schemaVersion?: number; manifests?: Descriptor[] }>(source.readSmall('index.json'), `${image}: index.json`);
  if (!Array.isArray(index.manifests)) throw new OciImageError(`${image}: index.json lists no manifests; is it an OCI image layout?`);
  const platform = ociArch(arch);
  let descriptor = pickDescriptor(index.manifests, ref, image, platform);
  // An image index (a multi-platform image) leads to one manifest per platform.
  for (let depth = 0; descriptor.mediaType !== undefined && MEDIA.index.includes(descriptor.mediaType); depth++) {
    if (depth > 4) throw new OciImageError(`${image}: image indexes nest too deeply`);
    const nested = parseJson<{ manifests?: Descriptor[] }>(readBlob(source, descriptor, image), `${image}: image index ${descriptor.digest}`);
    descriptor = pickDescriptor(nested.manifests ?? [], {}, image, platform);
  }
  if (descriptor.mediaType !== undefined && !MEDIA.manifest.includes(descriptor.mediaType)) {
    throw new OciImageError(`${image}: ${descriptor.digest} is a ${descriptor.mediaType}, not an image manifest`);
  }
  const manifest = parseJson<{ mediaType?: string; config?: Descriptor; layers?: Descriptor[] }>(
    readBlob(source, descriptor, image),
    `${image}: manifest ${descriptor.digest}`,
  );
  if (!manifest.config || !Array.isArray(manifest.layers)) throw new OciImageError(`${image}: manifest ${descriptor.digest} has no config or no layers`);
  const config = parseJson<{ os?: string; architecture?: string; rootfs?: { diff_ids?: string[] } }>(
    readBlob(source, manifest.config, image),
    `${image}: config ${manifest.config.digest}`,
  );
  if (config.os !== undefined && config.os !== 'linux') throw new OciImageError(`${image} is an image for ${config.os}; instances run Linux images`);
  if (config.architecture !== undefined && config.architecture !== platform) {
    throw new OciImageError(`${image} is built for ${config.architecture}; this host runs ${platform} images`);
  }
  const diffIds = config.rootfs?.diff_ids ?? [];
  if (diffIds.length !== manifest.layers.length) {
    throw new OciImageError(`${image}: the config lists ${diffIds.length} layer digests for ${manifest.layers.length} layers`);
  }
  for (const layer of manifest.layers) {
    if (layer.mediaType !== undefined && !MEDIA.layer.includes(layer.mediaType)) {
      throw new OciImageError(`${image}: layer ${layer.digest} is a ${layer.mediaType}, which cannot be applied (a tar, gzip or zstd layer is needed)`);
    }
  }
  return { image, manifestDigest: descriptor.digest, layers: manifest.layers, diffIds, source };
}

function ociArch(arch: string): string {
  if (arch === 'x64') return 'amd64';
  if (arch === 'arm64') return 'arm64';
  throw new OciImageError(`OCI images are supported on amd64 and arm64 hosts, not ${arch}`);
}

function refName(d: Descriptor): string | undefined {
  return d.annotations?.['org.opencontainers.image.ref.name'];
}

function pickDescriptor(manifests: Descriptor[], ref: { tag?: string }, image: string, platform: string): Descriptor {
  const tags = [...new Set(manifests.map(refName).filter((n): n is string => n !== undefined))];
  let candidates = manifests;
  if (ref.tag !== undefined) {
    const tag = ref.tag;
    // A ref name is a tag, or (as some tools write it) a full reference ending in one.
    candidates = manifests.filter((d) => {
      const name = refName(d);
      return name === tag || (name?.endsWith(`:${tag}`) ?? false);
    });
    if (candidates.length === 0) {
      throw new OciImageError(`${image}: no image tagged "${tag}"; ${tags.length ? `its tags are ${tags.join(', ')}` : 'it has no tags'}`);
    }
  }
  if (candidates.length > 1 && candidates.some((d) => d.platform)) {
    const matching = candidates.filter((d) => d.platform?.os === 'linux' && d.platform.architecture === platform);
    if (matching.length === 0) throw new OciImageError(`${image}: no image for linux/${platform} in it`);
    candidates = matching;
  }
  if (candidates.length > 1 && ref.tag === undefined) {
    const latest = candidates.filter((d) => refName(d) === 'latest');
    if (latest.length === 1) candidates = latest;
  }
  const [only] = candidates;
  if (!only) throw new OciImageError(`${image}: the layout holds no image`);
  if (candidates.length > 1) {
    throw new OciImageError(`${image} holds ${candidates.length} images; name one with its tag: ${tags.map((t) => `${image.split(':').slice(0, 2).join(':')}:${t}`).join(', ') || '(they have no tags)'}`);
  }
  if (typeof only.digest !== 'string' || typeof only.size !== 'number') throw new OciImageError(`${image}: a descriptor in it has no digest or size`);
  return only;
}

function parseJson<T>(data: Buffer, what: string): T {
  try {
    const value = JSON.parse(data.toString('utf8')) as unknown;
    if (value === null || typeof value !== 'object') throw new Error('not a JSON object');
    return value as T;
  } catch (err) {
    throw new OciImageError(`${what} is not valid JSON: ${(err as Error).message}`);
  }
}

function blobPath(d: Descriptor, image: string): string {
  const match = /^sha256:([a-f0-9]{64})$/.exec(String(d.digest));
  if (!match) throw new OciImageError(`${image}: digest "${d.digest}" is not a sha256 digest`);
  return `blobs/sha256/${match[1]}`;
}

function readBlob(source: LayoutSource, d: Descriptor, image: string): Buffer {
  if (d.size > MAX_JSON_BYTES) throw new OciImageError(`${image}: ${d.digest} is ${d.size} bytes, too large for a manifest or config`);
  const data = source.readSmall(blobPath(d, image));
  const digest = `sha256:${createHash('sha256').update(data).digest('hex')}`;
  if (data.length !== d.size || digest !== d.digest) {
    throw new OciImageError(`${image}: blob ${d.digest} does not match its digest (${digest}, ${data.length} bytes); the layout is damaged`);
  }
  return data;
}

// ---------------------------------------------------------------------------------------
// Layout sources: a directory, or an uncompressed tar of one read in place by offset.

export interface LayoutSource {
  /** A file of the layout (a path such as `index.json` or `blobs/sha256/<hex>`). */
  readSmall(path: string): Buffer;
  size(path: string): number;
  stream(path: string): Readable;
}

function openLayout(ociDir: string, name: string, image: string): LayoutSource {
  const missing = () =>
    new OciImageError(`${image}: no OCI image layout named "${name}" (a directory or ${name}.tar) in the server's OCI directory (ROOMKIT_OCI_DIR)`);
  for (const candidate of name.endsWith('.tar') ? [name] : [name, `${name}.tar`]) {
    const path = join(ociDir, candidate);
    let stat: Stats;
    try {
      stat = lstatSync(path);
    } catch {
      continue;
    }
    // A link could lead anywhere on the host; only what is really in the directory counts.
    if (stat.isSymbolicLink()) throw new OciImageError(`${image}: "${candidate}" in the OCI directory is a symbolic link; put the layout itself there`);
    if (stat.isDirectory()) return new DirectoryLayout(path, image);
    if (stat.isFile() && candidate.endsWith('.tar')) return new TarLayout(path, image);
  }
  throw missing();
}

class DirectoryLayout implements LayoutSource {
  private readonly root: string;
  private readonly image: string;

  constructor(root: string, image: string) {
    this.root = root;
    this.image = image;
    if (!lstatSync(join(root, 'oci-layout'), { throwIfNoEntry: false })?.isFile()) {
      throw new OciImageError(`${image}: the directory has no oci-layout file; it is not an OCI image layout`);
    }
  }

  /** Opens a file of the layout without following links anywhere on its path. */
  private open(path: string): number {
    let dir = this.root;
    const parts = path.split('/');
    for (const part of parts.slice(0, -1)) {
      dir = join(dir, part);
      if (!lstatSync(dir, { throwIfNoEntry: false })?.isDirectory()) throw this.missing(path);
    }
    try {
      const fd = openSync(join(this.root, path), constants.O_RDONLY | constants.O_NOFOLLOW);
      if (!fstatSync(fd).isFile()) {
        closeSync(fd);
        throw this.missing(path);
      }
      return fd;
    } catch (err) {
      if (err instanceof OciImageError) throw err;
      throw this.missing(path);
    }
  }

  private missing(path: string): OciImageError {
    return new OciImageError(`${this.image}: the layout has no file ${path}`);
  }

  readSmall(path: string): Buffer {
    const fd = this.open(path);
    try {
      if (fstatSync(fd).size > MAX_JSON_BYTES) throw new OciImageError(`${this.image}: ${path} is too large`);
      return readFileSync(fd);
    } finally {
      closeSync(fd);
    }
  }

  size(path: string): number {
    const fd = this.open(path);
    try {
      return fstatSync(fd).size;
    } finally {
      closeSync(fd);
    }
  }

  stream(path: string): Readable {
    return createReadStream('', { fd: this.open(path) });
  }
}

class TarLayout implements LayoutSource {
  private readonly file: string;
  private readonly image: string;
  private readonly members = new Map<string, { offset: number; size: number }>();

  constructor(file: string, image: string) {
    this.file = file;
    this.image = image;
    this.index();
    if (!this.members.has('oci-layout')) throw new OciImageError(`${image}: the archive has no oci-layout file; it is not an OCI image layout`);
  }

  /** Records where each regular file's data starts, reading only the headers. */
  private index(): void {
    const fd = openSync(this.file, constants.O_RDONLY | constants.O_NOFOLLOW);
    try {
      const total = fstatSync(fd).size;
      const block = Buffer.alloc(BLOCK);
      let offset = 0;
      let pax: Map<string, string> | undefined;
      let longName: string | undefined;
      while (offset + BLOCK <= total) {
        if (readSync(fd, block, 0, BLOCK, offset) !== BLOCK) break;
        offset += BLOCK;
        if (block.every((b) => b === 0)) break;
        const header = decodeHeader(block, `${this.image} (archive)`);
        const padded = Math.ceil(header.size / BLOCK) * BLOCK;
        if (header.type === 'x' || header.type === 'L') {
          if (header.size > MAX_JSON_BYTES) throw new OciImageError(`${this.image}: the archive has an oversized header`);
          const data = Buffer.alloc(header.size);
          readSync(fd, data, 0, header.size, offset);
          if (header.type === 'x') pax = parsePax(data, this.image);
          else longName = cString(data);
        } else if (header.type !== 'g') {
          const name = pax?.get('path') ?? longName ?? header.name;
          const size = pax?.has('size') ? Number(pax.get('size')) : header.size;
          if (header.type === '0' || header.type === '\0' || header.type === '7') {
            const path = name.split('/').filter((p) => p !== '' && p !== '.').join('/');
            this.members.set(path, { offset, size });
          }
          pax = undefined;
          longName = undefined;
          offset += Math.ceil(size / BLOCK) * BLOCK;
          continue;
        }
        offset += padded;
      }
    } finally {
      closeSync(fd);
    }
  }

  private member(path: string): { offset: number; size: number } {
    const m = this.members.get(path);
    if (!m) throw new OciImageError(`${this.image}: the archive has no file ${path}`);
    return m;
  }

  readSmall(path: string): Buffer {
    const m = this.member(path);
    if (m.size > MAX_JSON_BYTES) throw new OciImageError(`${this.image}: ${path} is too large`);
    const fd = openSync(this.file, 'r');
    try {
      const data = Buffer.alloc(m.size);
      readSync(fd, data, 0, m.size, m.offset);
      return data;
    } finally {
      closeSync(fd);
    }
  }

  size(path: string): number {
    return this.member(path).size;
  }

  stream(path: string): Readable {
    const m = this.member(path);
    // An empty range still needs a stream; start > end reads nothing.
    return createReadStream(this.file, { start: m.offset, end: m.offset + m.size - 1 });
  }
}

// ---------------------------------------------------------------------------------------
// The tar format: ustar with GNU and pax extensions, as image builders write it.

const BLOCK = 512;

interface TarHeader {
  name: string;
  mode: number;
  uid: number;
  gid: number;
  size: number;
  mtime: number;
  type: string;
  linkname: string;
  devmajor: number;
  devminor: number;
}

function cString(buf: Buffer): string {
  const end = buf.indexOf(0);
  const text = buf.subarray(0, end < 0 ? buf.length : end).toString('utf8');
  if (text.includes('\uFFFD')) throw new OciImageError(`a tar entry name is not UTF-8: ${JSON.stringify(text)}`);
  return text;
}

function tarNumber(field: Buffer): number {
  if ((field[0] ?? 0) & 0x80) {
    // GNU base-256 for values that do not fit in octal; negative values are refused.
    if (field[0] === 0xff) throw new OciImageError('a tar header has a negative number');
    let n = (field[0] ?? 0) & 0x7f;
    for (const b of field.subarray(1)) n = n * 256 + b;
    return n;
  }
  const text = field.toString('latin1').replace(/[\0 ]+$/g, '').replace(/^[\0 ]+/, '');
  if (text === '') return 0;
  if (!/^[0-7]+$/.test(text)) throw new OciImageError(`a tar header field is not a number: ${JSON.stringify(text)}`);
  return parseInt(text, 8);
}

function decodeHeader(block: Buffer, what: string): TarHeader {
  const stored = tarNumber(block.subarray(148, 156));
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 32 : (block[i] ?? 0);
  if (stored !== sum) throw new OciImageError(`${what}: a tar header's checksum is wrong; the data is not a tar archive or is damaged`);
  const magic = block.subarray(257, 263).toString('latin1');
  let name = cString(block.subarray(0, 100));
  // POSIX ustar keeps the start of long names in a prefix; GNU uses that space otherwise.
  if (magic === 'ustar\0') {
    const prefix = cString(block.subarray(345, 500));
    if (prefix) name = `${prefix}/${name}`;
  }
  return {
    name,
    mode: tarNumber(block.subarray(100, 108)),
    uid: tarNumber(block.subarray(108, 116)),
    gid: tarNumber(block.subarray(116, 124)),
    size: tarNumber(block.subarray(124, 136)),
    mtime: tarNumber(block.subarray(136, 148)),
    type: String.fromCharCode(block[156] ?? 0),
    linkname: cString(block.subarray(157, 257)),
    devmajor: tarNumber(block.subarray(329, 337)),
    devminor: tarNumber(block.subarray(337, 345)),
  };
}

/** Pax extended header records: `<length> <key>=<value>\n`. */
function parsePax(data: Buffer, what: string): Map<string, string> {
  const records = new Map<string, string>();
  let at = 0;
  while (at < data.length) {
    const space = data.indexOf(0x20, at);
    const length = Number(data.subarray(at, space).toString('latin1'));
    if (space < 0 || !Number.isSafeInteger(length) || length <= 0 || at + length > data.length) {
      throw new OciImageError(`${what}: a pax header is malformed`);
    }
    const record = data.subarray(space + 1, at + length - 1).toString('utf8');
    const eq = record.indexOf('=');
    if (eq > 0) records.set(record.slice(0, eq), record.slice(eq + 1));
    at += length;
  }
  return records;
}

/** Reads exact byte counts from a stream of chunks. */
class ChunkReader {
  private readonly source: AsyncIterator<Buffer>;
  private chunks: Buffer[] = [];
  private length = 0;
  private ended = false;

  constructor(source: AsyncIterable<Buffer>) {
    this.source = source[Symbol.asyncIterator]();
  }

  private async fill(n: number): Promise<void> {
    while (this.length < n && !this.ended) {
      const next = await this.source.next();
      if (next.done) this.ended = true;
      else {
        this.chunks.push(next.value);
        this.length += next.value.length;
      }
    }
  }

  private take(n: number): Buffer {
    const all = this.chunks.length === 1 ? this.chunks[0] ?? Buffer.alloc(0) : Buffer.concat(this.chunks);
    const out = all.subarray(0, n);
    const rest = all.subarray(n);
    this.chunks = rest.length ? [rest] : [];
    this.length = rest.length;
    return out;
  }

  /** Exactly n bytes, or undefined at the end of the stream; a partial read is an error. */
  async read(n: number): Promise<Buffer | undefined> {
    await this.fill(n);
    if (this.length === 0) return undefined;
    if (this.length < n) throw new OciImageError('a layer ends in the middle of a tar entry; it is truncated');
    return this.take(n);
  }

  /** n bytes as they come, chunk by chunk. */
  async *stream(n: number): AsyncGenerator<Buffer> {
    let left = n;
    while (left > 0) {
      if (this.length === 0) await this.fill(1);
      if (this.length === 0) throw new OciImageError('a layer ends in the middle of a file; it is truncated');
      const chunk = this.take(Math.min(left, this.length, 1024 * 1024));
      left -= chunk.length;
      yield chunk;
    }
  }

  async drain(): Promise<void> {
    for (;;) {
      this.chunks = [];
      this.length = 0;
      const next = await this.source.next();
      if (next.done) return;
    }
  }
}

interface TarEntry extends TarHeader {
  xattrs: number;
}

/** The entries of a tar stream, each to be consumed through `body` before the next. */
async function* tarEntries(reader: ChunkReader): AsyncGenerator<{ entry: TarEntry; body: () => AsyncGenerator<Buffer> }> {
  let pax = new Map<string, string>();
  let longName: string | undefined;
  let longLink: string | undefined;
  for (;;) {
    const block = await reader.read(BLOCK);
    if (!block || block.every((b) => b === 0)) return;
    const header = decodeHeader(block, 'a layer');
    const padding = (BLOCK - (header.size % BLOCK)) % BLOCK;
    const readAll = async () => {
      const data = await reader.read(header.size + padding);
      return (data ?? Buffer.alloc(0)).subarray(0, header.size);
    };
    if (header.type === 'x' || header.type === 'L' || header.type === 'K' || header.type === 'g') {
      if (header.size > MAX_JSON_BYTES) throw new OciImageError('a layer has an oversized tar header');
      const data = await readAll();
      if (header.type === 'x') pax = parsePax(data, 'a layer');
      else if (header.type === 'L') longName = cString(data);
      else if (header.type === 'K') longLink = cString(data);
      continue;
    }
    const num = (key: string, fallback: number) => {
      const value = pax.get(key);
      if (value === undefined) return fallback;
      const n = Number(value);
      if (!Number.isFinite(n)) throw new OciImageError(`a layer has a bad pax ${key}: ${value}`);
      return n;
    };
    const entry: TarEntry = {
      ...header,
      name: pax.get('path') ?? longName ?? header.name,
      linkname: pax.get('linkpath') ?? longLink ?? header.linkname,
      size: num('size', header.size),
      uid: num('uid', header.uid),
      gid: num('gid', header.gid),
      mtime: Math.floor(num('mtime', header.mtime)),
      xattrs: [...pax.keys()].filter((k) => k.startsWith('SCHILY.xattr.')).length,
    };
    pax = new Map();
    longName = undefined;
    longLink = undefined;
    const dataSize = entry.type === '0' || entry.type === '\0' || entry.type === '7' ? entry.size : 0;
    let consumed = false;
    const body = async function* () {
      consumed = true;
      yield* reader.stream(dataSize);
    };
    yield { entry, body };
    if (!consumed) for await (const _ of reader.stream(dataSize)) void _;
    // Non-file entries may still carry data (a size on a link); skip it with the padding.
    const extra = entry.size - dataSize;
    const pad = (BLOCK - (entry.size % BLOCK)) % BLOCK;
    if (extra + pad > 0) await reader.read(extra + pad);
  }
}

// ---------------------------------------------------------------------------------------
// Applying layers.

export interface BuildOptions {
  user: string;
  home: string;
  uid: number;
  signal?: AbortSignal;
  onProgress: (line: string) => void;
  /** Where a static tini is taken from when the image has none; tests point it elsewhere. */
  hostTini?: string;
}

/** Makes `rootfs` (which must not exist) the image's root filesystem plus what instances need. */
export async function buildOciRootfs(image: OciImage, rootfs: string, options: BuildOptions): Promise<void> {
  try {
    await buildRootfs(image, rootfs, options);
  } catch (err) {
    if (err instanceof OciImageError || options.signal?.aborted) throw err;
    // A host failure (a full disk, say) still says which image and why, not a stack.
    throw new OciImageError(`${image.image}: the build failed: ${(err as Error).message}`);
  }
}

async function buildRootfs(image: OciImage, rootfs: string, options: BuildOptions): Promise<void> {
  mkdirSync(rootfs, { mode: 0o755 });
  const count = image.layers.length;
  // Every blob is checked before anything is written, so a damaged layout fails fast.
  for (const [i, layer] of image.layers.entries()) {
    options.signal?.throwIfAborted();
    options.onProgress(`verifying layer ${i + 1}/${count} (${formatSize(layer.size)})`);
    await verifyBlob(image, layer);
  }
  for (const [i, layer] of image.layers.entries()) {
    options.signal?.throwIfAborted();
    options.onProgress(`applying layer ${i + 1}/${count}`);
    const stats = await applyLayer(image, layer, image.diffIds[i] ?? '', rootfs, `layer ${i + 1}/${count}`, options.signal);
    if (stats.xattrs > 0) options.onProgress(`layer ${i + 1}/${count}: left out ${stats.xattrs} extended attributes (such as file capabilities)`);
  }
  options.onProgress('adding the VM user');
  customize(rootfs, image.image, options);
}

function formatSize(bytes: number): string {
  return bytes >= 1024 * 1024 ? `${(bytes / 1024 / 1024).toFixed(1)} MiB` : `${Math.ceil(bytes / 1024)} KiB`;
}

async function verifyBlob(image: OciImage, layer: Descriptor): Promise<void> {
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

interface LayerStats {
  entries: number;
  xattrs: number;
}

async function applyLayer(image: OciImage, layer: Descriptor, diffId: string, rootfs: string, what: string, signal?: AbortSignal): Promise<LayerStats> {
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

// ---------------------------------------------------------------------------------------
// What instances need on top of the image.

/**
 * Looks a path up the way the sandbox will: links are followed, but inside the root
 * (an absolute target starts again at the root, `..` stops at it).
 */
export function guestLookup(rootfs: string, path: string): Stats | undefined {
  const done: string[] = [];
  const todo = path.split('/').filter(Boolean);
  for (let links = 0; todo.length > 0; ) {
    const part = todo.shift() ?? '';
    if (part === '.') continue;
    if (part === '..') {
      done.pop();
      continue;
    }
    const here = join(rootfs, ...done, part);
    const stat = lstatSync(here, { throwIfNoEntry: false });
    if (!stat) return undefined;
    if (stat.isSymbolicLink()) {
      if (++links > 40) return undefined;
      const target = readlinkSync(here);
      if (target.startsWith('/')) done.length = 0;
      todo.unshift(...target.split('/').filter(Boolean));
      continue;
    }
    if (todo.length > 0 && !stat.isDirectory()) return undefined;
    done.push(part);
    if (todo.length === 0) return stat;
  }
  return lstatSync(join(rootfs, ...done), { throwIfNoEntry: false });
}

/** A real directory of the guest, made if missing; never through a link. */
function guestDir(rootfs: string, path: string, what: string): string {
  let current = rootfs;
  for (const part of path.split('/').filter(Boolean)) {
    current = join(current, part);
    const stat = lstatSync(current, { throwIfNoEntry: false });
    if (!stat) mkdirSync(current, { mode: 0o755 });
    else if (!stat.isDirectory()) throw new OciImageError(`${what}: the image's ${path} is not a plain directory (at ${current.slice(rootfs.length)}); refused`);
  }
  return current;
}

function readGuestFile(rootfs: string, path: string, what: string): { text: string; stat: Stats } | undefined {
  const file = join(guestDir(rootfs, path.slice(0, path.lastIndexOf('/')), what), path.slice(path.lastIndexOf('/') + 1));
  const stat = lstatSync(file, { throwIfNoEntry: false });
  if (!stat) return undefined;
  if (!stat.isFile()) throw new OciImageError(`${what}: the image's ${path} is not a regular file; refused`);
  return { text: readFileSync(file, 'utf8'), stat };
}

/** Replaces a guest file (never writing through a link), keeping the old one's owner and mode. */
function writeGuestFile(rootfs: string, path: string, text: string | Buffer, like: { uid: number; gid: number; mode: number }, what: string): void {
  const file = join(guestDir(rootfs, path.slice(0, path.lastIndexOf('/')), what), path.slice(path.lastIndexOf('/') + 1));
  rmSync(file, { force: true, recursive: true });
  const fd = openSync(file, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  try {
    writeSync(fd, typeof text === 'string' ? Buffer.from(text) : text);
    fchownSync(fd, like.uid, like.gid);
    fchmodSync(fd, like.mode & 0o7777);
  } finally {
    closeSync(fd);
  }
}

/** Replaces the lines of a colon-separated database whose entry `drop` matches, then appends `add`. */
function editDb(rootfs: string, path: string, drop: (fields: string[]) => boolean, add: string, what: string, create: boolean): string[] {
  const current = readGuestFile(rootfs, path, what);
  if (!current && !create) return [];
  const dropped: string[] = [];
  const lines = (current?.text ?? '').split('\n').filter((line) => {
    if (line === '') return false;
    const fields = line.split(':');
    if (!drop(fields)) return true;
    dropped.push(fields[0] ?? '');
    return false;
  });
  lines.push(add);
  const like = current ? { uid: current.stat.uid, gid: current.stat.gid, mode: current.stat.mode } : { uid: 0, gid: 0, mode: 0o644 };
  writeGuestFile(rootfs, path, `${lines.join('\n')}\n`, like, what);
  return dropped;
}

function customize(rootfs: string, image: string, options: BuildOptions): void {
  const { user, home, uid } = options;
  const what = image;
  // /etc and /tmp are written from the host when an instance starts (its resolv.conf,
  // hostname, hosts; /tmp is bind-mounted), so they must be real directories.
  guestDir(rootfs, '/etc', what);
  for (const name of ['resolv.conf', 'hostname']) rmSync(join(rootfs, 'etc', name), { force: true, recursive: true });
  const hosts = lstatSync(join(rootfs, 'etc', 'hosts'), { throwIfNoEntry: false });
  if (hosts && !hosts.isFile()) rmSync(join(rootfs, 'etc', 'hosts'), { force: true, recursive: true });
  const tmp = lstatSync(join(rootfs, 'tmp'), { throwIfNoEntry: false });
  if (tmp && !tmp.isDirectory()) rmSync(join(rootfs, 'tmp'), { force: true, recursive: true });
  chmodSync(guestDir(rootfs, '/tmp', what), 0o1777);

  if (!guestLookup(rootfs, '/bin/sh')?.isFile()) {
    throw new OciImageError(`${image} has no /bin/sh; instances run commands with sh, so the image needs a shell`);
  }
  if (!guestLookup(rootfs, '/usr/bin/tini')?.isFile()) {
    const hostTini = options.hostTini ?? HOST_STATIC_TINI;
    if (!lstatSync(hostTini, { throwIfNoEntry: false })?.isFile()) {
      throw new OciImageError(
        `${image} has no /usr/bin/tini, which every instance runs as its init: add tini to the image, ` +
          'or install tini on this host (apt-get install tini), whose static build is then copied into images that lack it',
      );
    }
    options.onProgress('the image has no /usr/bin/tini: adding the host\'s static tini');
    writeGuestFile(rootfs, '/usr/bin/tini', readFileSync(hostTini), { uid: 0, gid: 0, mode: 0o755 }, what);
  }

  const shell = guestLookup(rootfs, '/bin/bash')?.isFile() ? '/bin/bash' : '/bin/sh';
  const hasShadow = readGuestFile(rootfs, '/etc/shadow', what) !== undefined;
  // uid 1000 is the VM user's: an image's own user with that uid (or the VM user's name)
  // gives way to it.
  const replaced = editDb(rootfs, '/etc/passwd', (f) => f[0] === user || f[2] === String(uid), `${user}:${hasShadow ? 'x' : '!'}:${uid}:${uid}::${home}:${shell}`, what, true);
  const others = replaced.filter((name) => name !== user);
  if (others.length > 0) options.onProgress(`the image's user ${others.join(', ')} (uid ${uid}) gives way to ${user}`);
  editDb(rootfs, '/etc/group', (f) => f[0] === user || f[2] === String(uid), `${user}:x:${uid}:`, what, true);
  const days = Math.floor(Date.now() / 86_400_000);
  editDb(rootfs, '/etc/shadow', (f) => f[0] === user || replaced.includes(f[0] ?? ''), `${user}:!:${days}:0:99999:7:::`, what, false);
  editDb(rootfs, '/etc/gshadow', (f) => f[0] === user, `${user}:!::`, what, false);

  const parent = home.slice(0, home.lastIndexOf('/')) || '/';
  const homeDir = join(guestDir(rootfs, parent, what), home.slice(home.lastIndexOf('/') + 1));
  const existing = lstatSync(homeDir, { throwIfNoEntry: false });
  if (existing && !existing.isDirectory()) rmSync(homeDir, { force: true, recursive: true });
  if (!existing?.isDirectory()) {
    mkdirSync(homeDir, { mode: 0o755 });
    const skel = lstatSync(join(rootfs, 'etc', 'skel'), { throwIfNoEntry: false });
    if (skel?.isDirectory()) copySkel(join(rootfs, 'etc', 'skel'), homeDir, uid);
  }
  lchownSync(homeDir, uid, uid);
}

/** Copies /etc/skel into a new home, as useradd does, owned by the user. */
function copySkel(from: string, to: string, uid: number): void {
  for (const name of readdirSync(from)) {
    const source = join(from, name);
    const target = join(to, name);
    const stat = lstatSync(source);
    if (stat.isDirectory()) {
      mkdirSync(target, { mode: stat.mode & 0o777 });
      copySkel(source, target, uid);
    } else if (stat.isSymbolicLink()) {
      symlinkSync(readlinkSync(source), target);
    } else if (stat.isFile()) {
      copyFileSync(source, target, constants.COPYFILE_EXCL);
      chmodSync(target, stat.mode & 0o777);
    } else {
      continue;
    }
    lchownSync(target, uid, uid);
  }
}
