// Files of a room's instance: read (as JSON, or as a raw stream for the unauthenticated
// endpoint), write, list, delete, and the tree's shape (make a directory, rename, remove
// a directory). Every operation runs inside the instance as its VM user, so a file is
// reachable exactly when that user could reach it there; an adapter whose protocol names
// root (E2B's `user: "root"`) asks for root's rights, which the VM user has through sudo.
import { posix } from 'node:path';
import type { Readable } from 'node:stream';
import type { Config } from '../config.ts';
import { AppError, type ErrorCode } from '../errors.ts';
import type { DirectoryListing, FileContent, FileDeleted, FileWritten } from './file-schema.ts';
import { type FileAccess, GuestFileError, type GuestFileInfo, type Runtime } from '../runtimes/types.ts';
import type { Instances } from './instances.ts';
import { isText, mimeTypeOf } from '../lib/mime.ts';
import { apiPath, encodeName } from '../lib/guest-names.ts';
import type { ProfileSpec } from './profile-schema.ts';
import type { Profiles } from './profiles.ts';
import type { ServedFiles } from './served-files.ts';
import type { InstanceRecord } from './stored-json.ts';
import { noteFacts, noteOperation } from './operations.ts';
import { addressFacts, type InstanceAddress, roomRef } from './instance-address.ts';

/** Longest path accepted, in bytes (Linux's PATH_MAX). */
export const MAX_PATH_BYTES = 4096;
/** Entries returned by one directory listing. */
export const MAX_LIST_ENTRIES = 10_000;
/** Bytes read ahead of a raw response to pick its MIME type. */
const SNIFF_BYTES = 4096;

/** Whose rights a file operation runs with: the instance's VM user, or root (`asRoot`). */
export interface FileCaller {
  asRoot?: boolean;
}

export interface RawFile {
  info: GuestFileInfo;
  mimeType: string;
  /** The first bytes of the body (already read to sniff the type), then the rest. */
  head: Buffer;
  rest: NodeJS.ReadableStream;
  /** The byte range served, when one was asked for. */
  range?: { start: number; end: number };
}

const ERROR_CODES: Record<GuestFileError['kind'], ErrorCode> = {
  not_found: 'file_not_found',
  permission_denied: 'permission_denied',
  is_a_directory: 'is_a_directory',
  not_a_directory: 'not_a_directory',
  too_large: 'file_too_large',
  invalid_path: 'invalid_path',
  no_space: 'no_space',
  changed: 'file_changed',
};

/** Turns a runtime's file error into the API's. */
function appErrorOf(err: unknown): unknown {
  return err instanceof GuestFileError ? new AppError(ERROR_CODES[err.kind], err.message) : err;
}

export function validatePath(path: string): string {
  if (path === '') throw new AppError('invalid_path', 'the file path is empty; give an absolute path or one relative to the home directory');
  if (path.includes('\0')) throw new AppError('invalid_path', 'the file path contains a NUL character');
  if (encodeName(path).length > MAX_PATH_BYTES) throw new AppError('invalid_path', `the file path is longer than ${MAX_PATH_BYTES} bytes`);
  return path;
}

export class Files {
  private readonly instances: Instances;
  private readonly profiles: Profiles;
  private readonly servedFiles: ServedFiles;
  private readonly config: Config;
  /** Per instance: unauthenticated raw reads streaming now. */
  private readonly rawReads = new Map<string, number>();

  constructor(deps: { instances: Instances; profiles: Profiles; servedFiles: ServedFiles; config: Config }) {
    this.instances = deps.instances;
    this.profiles = deps.profiles;
    this.servedFiles = deps.servedFiles;
    this.config = deps.config;
  }

  private async target(address: InstanceAddress) {
    const { row, spec } = await this.instances.requireReadyAt(address);
    return { instanceId: row.id, home: spec.home, runtime: this.instances.activeRuntime() };
  }

  /** The spec's FileContent: text when the bytes are valid UTF-8 without NUL, else base64. */
  async read(organizationId: string, profileId: string, roomId: string, path: string): Promise<FileContent> {
    return this.readAt(roomRef(organizationId, profileId, roomId), path);
  }

  async readAt(address: InstanceAddress, path: string): Promise<FileContent> {
    validatePath(path);
    const { instanceId, home, runtime } = await this.target(address);
    try {
      const { info, body } = await runtime.openFile(instanceId, path, { home, maxBytes: this.config.maxFileReadBytes });
      const bytes = await readAll(body, this.config.maxFileReadBytes);
      const text = isText(bytes);
      return {
        ...shownPath('file_path', info.path),
        content: text ? bytes.toString('utf8') : bytes.toString('base64'),
        instance_id: instanceId,
        encoding: text ? 'utf-8' : 'base64',
        size: bytes.length,
        mime_type: mimeTypeOf(info.path, bytes.subarray(0, SNIFF_BYTES), bytes.length <= SNIFF_BYTES),
      };
    } catch (err) {
      if (err instanceof GuestFileError && err.kind === 'too_large') {
        throw new AppError(
          'file_too_large',
          `${apiPath(absolute(path, home)).path} is ${err.size} bytes, more than the ${this.config.maxFileReadBytes} this endpoint returns`,
          undefined,
          { code: 'fetch_raw_file', instance_id: instanceId, path: absolute(path, home) },
        );
      }
      throw appErrorOf(err);
    }
  }

  /**
   * Opens a file of a ready instance for the raw endpoint, by instance id alone: the
   * id is the capability. An unknown or not-ready instance is instance_not_found; what
   * is served follows the profile's `raw_files`.
   */
  async openRaw(instanceId: string, path: string, rangeHeader: string | undefined): Promise<RawFile> {
    validatePath(path);
    const found = await this.instances.readyById(instanceId);
    if (!found) throw new AppError('instance_not_found', `no running instance ${instanceId}`);
    await this.checkServed(found.row, found.spec, path);
    const release = this.claimRawRead(instanceId);
    return this.stream(instanceId, { home: found.spec.home }, path, rangeHeader, release);
  }

  /** The raw bytes of a file for its organization (`?raw=1`): whatever the profile's raw_files says. */
  async download(organizationId: string, profileId: string, roomId: string, path: string, rangeHeader: string | undefined): Promise<RawFile> {
    return this.downloadAt(roomRef(organizationId, profileId, roomId), path, rangeHeader);
  }

  async downloadAt(address: InstanceAddress, path: string, rangeHeader: string | undefined, caller: FileCaller = {}): Promise<RawFile> {
    validatePath(path);
    const { instanceId, home } = await this.target(address);
    return this.stream(instanceId, { home, ...rootOf(caller) }, path, rangeHeader, () => {});
  }

  /** Refuses a public read that the profile's `raw_files` does not allow. */
  private async checkServed(row: InstanceRecord, spec: ProfileSpec, path: string): Promise<void> {
    // The profile as it is now, so that narrowing it applies to live instances at once.
    const policy = (await this.profiles.find(row.organization_id, row.profile_id))?.raw_files ?? spec.raw_files ?? 'all';
    if (policy === 'all') return;
    const how = { code: 'read_with_key' } as const;
    if (policy === 'off') {
      throw new AppError('raw_file_not_served', 'this instance\'s profile serves no files at public URLs (raw_files: off)', undefined, how);
    }
    if (!(await this.servedFiles.listed(row.id, path))) {
      throw new AppError(
        'raw_file_not_served',
        `this instance's profile serves only files that a command listed as created or modified (raw_files: changed), and no command listed ${apiPath(posix.normalize(path)).path}`,
        undefined,
        how,
      );
    }
  }

  private async stream(instanceId: string, access: FileAccess, path: string, rangeHeader: string | undefined, release: () => void): Promise<RawFile> {
    const runtime: Runtime = this.instances.activeRuntime();
    try {
      let range: { start: number; end: number } | undefined;
      if (rangeHeader !== undefined) {
        const info = await runtime.statFile(instanceId, path, access);
        range = parseRange(rangeHeader, info.size);
      }
      const { info, body } = await runtime.openFile(instanceId, path, {
        ...access,
        maxBytes: Number.MAX_SAFE_INTEGER,
        ...(range ? { range } : {}),
      });
      // A public read holds its slot for as long as its process streams: until the
      // body ends or the client goes away.
      (body as unknown as Readable).once('close', release);
      const head = await readUpTo(body, SNIFF_BYTES);
      const mimeType = mimeTypeOf(info.path, head, head.length < SNIFF_BYTES || info.size <= SNIFF_BYTES);
      return { info, mimeType, head, rest: body, ...(range ? { range } : {}) };
    } catch (err) {
      release();
      throw appErrorOf(err);
    }
  }

  /**
   * Takes one of the instance's slots for unauthenticated reads, or refuses with 429:
   * each read holds a process of the VM user while it streams, and anyone who knows the
   * instance id may ask, so they must not add up to the tenant's process limit.
   * The returned function gives the slot back; calling it again does nothing.
   */
  private claimRawRead(instanceId: string): () => void {
    const limit = this.config.maxRawReadsPerInstance;
    const streaming = this.rawReads.get(instanceId) ?? 0;
    if (streaming >= limit) {
      throw new AppError(
        'too_many_file_reads',
        `instance ${instanceId} already streams ${limit} raw file reads, the most at once (ROOMKIT_MAX_RAW_READS_PER_INSTANCE); retry in a moment`,
        { retry_after_s: 1, limit },
      );
    }
    this.rawReads.set(instanceId, streaming + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.rawReads.get(instanceId) ?? 1) - 1;
      if (left > 0) this.rawReads.set(instanceId, left);
      else this.rawReads.delete(instanceId);
    };
  }

  async write(organizationId: string, profileId: string, roomId: string, path: string, data: Buffer): Promise<FileWritten> {
    return this.writeAt(roomRef(organizationId, profileId, roomId), path, data);
  }

  async writeAt(address: InstanceAddress, path: string, data: Buffer, caller: FileCaller = {}): Promise<FileWritten> {
    noteOperation('file.write', addressFacts(address));
    validatePath(path);
    if (data.length > this.config.maxUploadBytes) {
      throw new AppError('body_too_large', `the file is ${data.length} bytes, more than the ${this.config.maxUploadBytes} accepted`);
    }
    const { instanceId, home, runtime } = await this.target(address);
    try {
      const { info, created } = await runtime.writeFile(instanceId, path, data, { home, ...rootOf(caller) });
      const shown = shownPath('file_path', info.path);
      noteFacts({ instanceId, filePath: shown.file_path });
      return { ...shown, instance_id: instanceId, status: created ? 'created' : 'modified', size: info.size };
    } catch (err) {
      throw appErrorOf(err);
    }
  }

  async list(organizationId: string, profileId: string, roomId: string, path: string): Promise<DirectoryListing> {
    return this.listAt(roomRef(organizationId, profileId, roomId), path);
  }

  async listAt(address: InstanceAddress, path: string, caller: FileCaller = {}): Promise<DirectoryListing> {
    validatePath(path);
    const { instanceId, home, runtime } = await this.target(address);
    try {
      const listing = await runtime.listDirectory(instanceId, path, { home, ...rootOf(caller), limit: MAX_LIST_ENTRIES });
      const entries = listing.entries.map(({ name, ...rest }) => {
        const shown = apiPath(name);
        return shown.percentEncoded ? { name: shown.path, name_encoding: 'percent' as const, ...rest } : { name, ...rest };
      });
      return { ...shownPath('path', listing.path), instance_id: instanceId, entries, truncated: listing.truncated };
    } catch (err) {
      throw appErrorOf(err);
    }
  }

  async delete(organizationId: string, profileId: string, roomId: string, path: string): Promise<FileDeleted> {
    return this.deleteAt(roomRef(organizationId, profileId, roomId), path);
  }

  async deleteAt(address: InstanceAddress, path: string, caller: FileCaller = {}): Promise<FileDeleted> {
    noteOperation('file.delete', addressFacts(address));
    validatePath(path);
    const { instanceId, home, runtime } = await this.target(address);
    try {
      const { path: deleted } = await runtime.deleteFile(instanceId, path, { home, ...rootOf(caller) });
      const shown = shownPath('file_path', deleted);
      noteFacts({ instanceId, filePath: shown.file_path });
      return { ...shown, instance_id: instanceId, status: 'deleted' };
    } catch (err) {
      throw appErrorOf(err);
    }
  }

  /** Makes a directory and its missing parents (recorded as a file write); `created` is false when one was there. */
  async makeDirectoryAt(address: InstanceAddress, path: string, caller: FileCaller = {}): Promise<{ path: string; created: boolean }> {
    noteOperation('file.write', addressFacts(address));
    validatePath(path);
    const { instanceId, home, runtime } = await this.target(address);
    try {
      const made = await runtime.makeDirectory(instanceId, path, { home, ...rootOf(caller) });
      noteFacts({ instanceId, filePath: apiPath(made.path).path });
      return made;
    } catch (err) {
      throw appErrorOf(err);
    }
  }

  /** Renames a file or directory, making the target's parents (recorded as a write of the target). */
  async renameAt(address: InstanceAddress, path: string, target: string, caller: FileCaller = {}): Promise<{ path: string; target: string }> {
    noteOperation('file.write', addressFacts(address));
    validatePath(path);
    validatePath(target);
    const { instanceId, home, runtime } = await this.target(address);
    try {
      const renamed = await runtime.renamePath(instanceId, path, target, { home, ...rootOf(caller) });
      noteFacts({ instanceId, filePath: apiPath(renamed.target).path });
      return renamed;
    } catch (err) {
      throw appErrorOf(err);
    }
  }

  /** Removes a file, or a directory with everything under it (recorded as a file delete). */
  async removeTreeAt(address: InstanceAddress, path: string, caller: FileCaller = {}): Promise<{ path: string }> {
    noteOperation('file.delete', addressFacts(address));
    validatePath(path);
    const { instanceId, home, runtime } = await this.target(address);
    try {
      const removed = await runtime.removeTree(instanceId, path, { home, ...rootOf(caller) });
      noteFacts({ instanceId, filePath: apiPath(removed.path).path });
      return removed;
    } catch (err) {
      throw appErrorOf(err);
    }
  }
}

/** The runtime's side of a caller: root's rights only when asked for. */
function rootOf(caller: FileCaller): { asRoot?: true } {
  return caller.asRoot === true ? { asRoot: true } : {};
}

/** `{[key]: path}` as the API shows it, with `path_encoding` when the path is percent-escaped. */
function shownPath<K extends string>(key: K, path: string): { [P in K]: string } & { path_encoding?: 'percent' } {
  const shown = apiPath(path);
  return { [key]: shown.path, ...(shown.percentEncoded ? { path_encoding: 'percent' as const } : {}) } as { [P in K]: string } & {
    path_encoding?: 'percent';
  };
}

function absolute(path: string, home: string): string {
  return path.startsWith('/') ? path : `${home}/${path}`;
}

/** A single `bytes=` range of a file of `size` bytes (RFC 9110); several ranges are not served. */
export function parseRange(header: string, size: number): { start: number; end: number } {
  const match = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  const unsatisfiable = () =>
    new AppError('range_not_satisfiable', `range "${header}" does not fit the file's ${size} bytes (one range, e.g. bytes=0-1023)`, { size });
  if (!match || (match[1] === '' && match[2] === '')) throw unsatisfiable();
  let start: number;
  let end: number;
  if (match[1] === '') {
    const suffix = Number(match[2]);
    if (suffix === 0) throw unsatisfiable();
    start = Math.max(0, size - suffix);
    end = size - 1;
  } else {
    start = Number(match[1]);
    end = match[2] === '' ? size - 1 : Math.min(Number(match[2]), size - 1);
  }
  if (start >= size || start > end) throw unsatisfiable();
  return { start, end };
}

async function readAll(stream: NodeJS.ReadableStream, maxBytes: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of stream as AsyncIterable<Buffer>) {
    total += chunk.length;
    if (total > maxBytes) throw new GuestFileError('too_large', 'the file grew while it was read', total);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

/** Reads the first `n` bytes of a stream (fewer at its end), leaving the rest unread. */
function readUpTo(stream: NodeJS.ReadableStream, n: number): Promise<Buffer> {
  const readable = stream as unknown as Readable;
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let total = 0;
    const done = () => {
      readable.off('readable', onReadable);
      readable.off('end', onEnd);
      readable.off('error', onError);
      const all = Buffer.concat(chunks);
      if (all.length > n) readable.unshift(all.subarray(n));
      resolve(all.subarray(0, n));
    };
    const onReadable = () => {
      let chunk: Buffer | null;
      while (total < n && (chunk = readable.read() as Buffer | null) !== null) {
        chunks.push(chunk);
        total += chunk.length;
      }
      if (total >= n) done();
    };
    const onEnd = () => done();
    const onError = (err: Error) => reject(err);
    readable.on('readable', onReadable);
    readable.on('end', onEnd);
    readable.on('error', onError);
  });
}
