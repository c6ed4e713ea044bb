// OCI image layouts: which image manifest a profile's `oci:` image means, and the blobs
// it leads to. The builder resolves the reference to one image manifest, whose digest
// goes into the cache key, verifying manifest and config against their digests; the
// layers are checked and read only by a build (layer-applier.ts). A layout is a
// directory, or an uncompressed `.tar` of one read in place by offset, never unpacked;
// nothing is followed out of it, so a layout cannot make the builder read other files
// of the host.
import { createHash } from 'node:crypto';
import { closeSync, constants, createReadStream, fstatSync, lstatSync, openSync, readFileSync, readSync, type Stats } from 'node:fs';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { OciImageError } from './errors.ts';
import { parseOciImage } from './reference.ts';
import { isFileEntry, tarIndex } from './tar-reader.ts';

/** Manifests, indexes and configs are small; a larger one is refused rather than read. */
const MAX_JSON_BYTES = 4 * 1024 * 1024;

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

export interface Descriptor {
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

export function resolveLayout(ociDir: string, image: string, arch: string): OciImage {
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

export function blobPath(d: Descriptor, image: string): string {
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
      for (const { entry, offset } of tarIndex(fd, `${this.image} (archive)`)) {
        if (!isFileEntry(entry)) continue;
        const path = entry.name.split('/').filter((p) => p !== '' && p !== '.').join('/');
        this.members.set(path, { offset, size: entry.size });
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
