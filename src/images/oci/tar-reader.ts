// Reading tar archives: ustar with GNU and pax extensions, as image builders write them.
// One header decoder serves two walkers: tarIndex() reads only the headers of an archive
// file, by offset, so that a `.tar` layout (layout.ts) is read in place, each blob from
// where its data starts; tarEntries() streams a layer's entries, each body as it comes,
// to the layer applier (layer-applier.ts).
//
// Layers are untrusted input, and they are applied by root on the host, so the tar
// reader is our own rather than GNU tar: GNU tar follows a symbolic link that an
// earlier layer left in the tree when it writes a later entry below it (`a -> /etc`,
// then `a/passwd`), and making it safe would take a chroot holding a tar binary, or
// parsing `tar -tv` listings, whose names are ambiguous. What this reader yields only
// describes each entry; the layer applier decides what of it is written, and how.
//
// It is also our own rather than an npm parser such as tar-stream (which writes nothing,
// and would do for the layers). The layout index is the reason: a streaming parser has
// to be fed the whole archive, every blob included, to reach the next header, where
// tarIndex() reads 512 bytes a member and skips the data; so we would keep a decoder of
// our own for the index anyway and have two parsers of one format instead of one. The
// format as image tools write it (ustar names with their prefix, pax path, linkpath,
// size, owner and time records, GNU long names and base-256 numbers) fits in this file,
// while tar-stream would bring its own dependencies (streamx, fast-fifo, b4a, and an fs
// for the Bare runtime) into a service that runs as root, to parse the same headers.
import { fstatSync, readSync } from 'node:fs';
import { OciImageError } from './errors.ts';

const BLOCK = 512;
/** Extended headers (pax records, GNU long names) are small; a larger one is refused rather than read. */
const MAX_EXTENDED_HEADER_BYTES = 4 * 1024 * 1024;

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

/** An entry as the archive describes it, its extended headers applied. */
export interface TarEntry extends TarHeader {
  /** How many extended attributes its pax records carried (they are not applied). */
  xattrs: number;
}

/** Regular files (and contiguous files, type 7) are the entries whose data is their content. */
export function isFileEntry(entry: TarEntry): boolean {
  return entry.type === '0' || entry.type === '\0' || entry.type === '7';
}

/** A size rounded up to whole blocks, as data is stored. */
function padded(size: number): number {
  return Math.ceil(size / BLOCK) * BLOCK;
}

/** What a header block holds: the end of the archive, an extended header, or an entry. */
type TarRecord =
  | { kind: 'end' }
  /** Its data (`size` bytes, then padding) describes the next entry: pass it to extension(). */
  | { kind: 'extension'; size: number }
  | { kind: 'entry'; entry: TarEntry };

/**
 * Decodes an archive's header blocks in order, fed by a walker that reads the bytes its
 * own way. Pax records and GNU long names and link names describe the entry after them,
 * so they are kept until that entry's header comes; pax global headers are read and
 * ignored.
 */
class HeaderDecoder {
  private readonly what: string;
  private pax = new Map<string, string>();
  private longName: string | undefined;
  private longLink: string | undefined;
  /** The type of the extended header whose data extension() is given next. */
  private pending: string | undefined;

  constructor(what: string) {
    this.what = what;
  }

  next(block: Buffer): TarRecord {
    if (block.every((b) => b === 0)) return { kind: 'end' };
    const header = decodeHeader(block, this.what);
    if (header.type === 'x' || header.type === 'L' || header.type === 'K' || header.type === 'g') {
      if (header.size > MAX_EXTENDED_HEADER_BYTES) throw new OciImageError(`${this.what} has an oversized tar header`);
      this.pending = header.type;
      return { kind: 'extension', size: header.size };
    }
    const pax = this.pax;
    const num = (key: string, fallback: number) => {
      const value = pax.get(key);
      if (value === undefined) return fallback;
      const n = Number(value);
      if (!Number.isFinite(n)) throw new OciImageError(`${this.what} has a bad pax ${key}: ${value}`);
      return n;
    };
    const entry: TarEntry = {
      ...header,
      name: pax.get('path') ?? this.longName ?? header.name,
      linkname: pax.get('linkpath') ?? this.longLink ?? header.linkname,
      size: num('size', header.size),
      uid: num('uid', header.uid),
      gid: num('gid', header.gid),
      mtime: Math.floor(num('mtime', header.mtime)),
      xattrs: [...pax.keys()].filter((k) => k.startsWith('SCHILY.xattr.')).length,
    };
    this.pax = new Map();
    this.longName = undefined;
    this.longLink = undefined;
    return { kind: 'entry', entry };
  }

  /** The data of the extended header next() has just announced. */
  extension(data: Buffer): void {
    if (this.pending === 'x') this.pax = parsePax(data, this.what);
    else if (this.pending === 'L') this.longName = cString(data);
    else if (this.pending === 'K') this.longLink = cString(data);
    this.pending = undefined;
  }
}

/**
 * The entries of an archive file, each with the offset where its data starts, reading
 * only the headers: the data is skipped, not read.
 */
export function* tarIndex(fd: number, what: string): Generator<{ entry: TarEntry; offset: number }> {
  const total = fstatSync(fd).size;
  const decoder = new HeaderDecoder(what);
  const block = Buffer.alloc(BLOCK);
  let offset = 0;
  while (offset + BLOCK <= total) {
    if (readSync(fd, block, 0, BLOCK, offset) !== BLOCK) break;
    offset += BLOCK;
    const record = decoder.next(block);
    if (record.kind === 'end') break;
    if (record.kind === 'extension') {
      const data = Buffer.alloc(record.size);
      readSync(fd, data, 0, record.size, offset);
      decoder.extension(data);
      offset += padded(record.size);
      continue;
    }
    yield { entry: record.entry, offset };
    offset += padded(record.entry.size);
  }
}

/** Reads exact byte counts from a stream of chunks. */
export class ChunkReader {
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

/** The entries of a tar stream, each to be consumed through `body` before the next. */
export async function* tarEntries(reader: ChunkReader): AsyncGenerator<{ entry: TarEntry; body: () => AsyncGenerator<Buffer> }> {
  const decoder = new HeaderDecoder('a layer');
  for (;;) {
    const block = await reader.read(BLOCK);
    if (!block) return;
    const record = decoder.next(block);
    if (record.kind === 'end') return;
    if (record.kind === 'extension') {
      const data = await reader.read(padded(record.size));
      decoder.extension((data ?? Buffer.alloc(0)).subarray(0, record.size));
      continue;
    }
    const { entry } = record;
    const dataSize = isFileEntry(entry) ? entry.size : 0;
    let consumed = false;
    const body = async function* () {
      consumed = true;
      yield* reader.stream(dataSize);
    };
    yield { entry, body };
    if (!consumed) for await (const _ of reader.stream(dataSize)) void _;
    // Non-file entries may still carry data (a size on a link); skip it with the padding.
    const rest = padded(entry.size) - dataSize;
    if (rest > 0) await reader.read(rest);
  }
}
