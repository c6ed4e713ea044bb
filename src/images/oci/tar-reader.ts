// Reading tar archives: ustar with GNU and pax extensions, as image builders write them.
// It decodes headers for the index of a `.tar` layout (layout.ts) and streams a layer's
// entries, each body as it comes, to the layer applier (layer-applier.ts).
//
// Layers are untrusted input, and they are applied by root on the host, so the tar
// reader is our own rather than GNU tar: GNU tar follows a symbolic link that an
// earlier layer left in the tree when it writes a later entry below it (`a -> /etc`,
// then `a/passwd`), and making it safe would take a chroot holding a tar binary, or
// parsing `tar -tv` listings, whose names are ambiguous. What this reader yields only
// describes each entry; the layer applier decides what of it is written, and how.
import { OciImageError } from './errors.ts';

export const BLOCK = 512;
/** Extended headers (pax records, GNU long names) are small; a larger one is refused rather than read. */
export const MAX_EXTENDED_HEADER_BYTES = 4 * 1024 * 1024;

export interface TarHeader {
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

export function cString(buf: Buffer): string {
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

export function decodeHeader(block: Buffer, what: string): TarHeader {
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
export function parsePax(data: Buffer, what: string): Map<string, string> {
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

export interface TarEntry extends TarHeader {
  xattrs: number;
}

/** The entries of a tar stream, each to be consumed through `body` before the next. */
export async function* tarEntries(reader: ChunkReader): AsyncGenerator<{ entry: TarEntry; body: () => AsyncGenerator<Buffer> }> {
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
      if (header.size > MAX_EXTENDED_HEADER_BYTES) throw new OciImageError('a layer has an oversized tar header');
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
