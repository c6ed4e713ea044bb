// A running command's output as a stream of bytes with absolute offsets: the latest
// `maxBytes` of it kept in memory, so a client can read what it has not seen yet (from
// an offset), and listeners that receive each piece as it comes, cut at UTF-8 character
// boundaries so a piece always decodes to whole characters.

import { retainedBytes } from '../host/output.ts';

export interface OutputPiece {
  /** The text, whole UTF-8 characters (invalid bytes replaced). */
  data: string;
  /** Byte offset of the piece's first byte in the command's output. */
  offset: number;
  /** Byte offset just past its last byte: where to resume reading. */
  end: number;
}

export interface OutputRead {
  data: string;
  /** Byte offset where `data` starts; more than was asked for when older output was dropped. */
  offset: number;
  /** Byte offset just past `data`. */
  end: number;
}

export class OutputLog {
  private readonly maxBytes: number;
  private chunks: Buffer[] = [];
  private kept = 0;
  /** Absolute offset of the first byte kept. */
  private start = 0;
  /** Bytes of an unfinished UTF-8 character held back from listeners. */
  private pending: Buffer = Buffer.alloc(0);
  private readonly listeners = new Set<(piece: OutputPiece) => void>();
  /** Every byte ever appended. */
  total = 0;

  constructor(maxBytes: number) {
    this.maxBytes = maxBytes;
  }

  append(chunk: Buffer): void {
    if (chunk.length === 0) return;
    const pieceStart = this.total - this.pending.length;
    this.total += chunk.length;
    this.keep(chunk);
    if (this.listeners.size === 0) {
      this.pending = Buffer.alloc(0);
      return;
    }
    const joined = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk]);
    const cut = completeUtf8Length(joined);
    this.pending = Buffer.from(joined.subarray(cut));
    if (cut === 0) return;
    const piece = { data: joined.toString('utf8', 0, cut), offset: pieceStart, end: pieceStart + cut };
    for (const listener of this.listeners) listener(piece);
  }

  /** Sends what is held of an unfinished character (the output ended). */
  flush(): void {
    if (this.pending.length === 0) return;
    const piece = { data: this.pending.toString('utf8'), offset: this.total - this.pending.length, end: this.total };
    this.pending = Buffer.alloc(0);
    for (const listener of this.listeners) listener(piece);
  }

  /** Calls `listener` with every piece from now on; returns the function that stops it. */
  subscribe(listener: (piece: OutputPiece) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** What is kept from `offset` on, at most `maxBytes` of it. */
  read(offset: number, maxBytes: number): OutputRead {
    const from = Math.min(Math.max(offset, this.start), this.total);
    const to = Math.min(this.total, from + maxBytes);
    if (to <= from) return { data: '', offset: from, end: from };
    const all = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks);
    this.chunks = [all];
    const slice = all.subarray(from - this.start, to - this.start);
    // Stop before a character cut in two by the limit, unless nothing else would fit.
    const cut = to === this.total ? slice.length : completeUtf8Length(slice) || slice.length;
    return { data: slice.toString('utf8', 0, cut), offset: from, end: from + cut };
  }

  /** Bytes of output kept. */
  get size(): number {
    return this.kept;
  }

  /** Memory the kept chunks hold, counting whole underlying buffers (a slice keeps its parent alive). */
  get retainedBytes(): number {
    return retainedBytes(this.chunks);
  }

  private keep(chunk: Buffer): void {
    if (chunk.length >= this.maxBytes) {
      this.chunks = [Buffer.from(chunk.subarray(chunk.length - this.maxBytes))];
      this.kept = this.chunks[0]!.length;
      this.start = this.total - this.kept;
      return;
    }
    this.chunks.push(chunk);
    this.kept += chunk.length;
    while (this.kept > this.maxBytes) {
      const first = this.chunks[0]!;
      const excess = this.kept - this.maxBytes;
      if (first.length <= excess) {
        this.chunks.shift();
        this.kept -= first.length;
      } else {
        this.chunks[0] = first.subarray(excess);
        this.kept -= excess;
      }
    }
    this.start = this.total - this.kept;
  }
}

/**
 * How many leading bytes of `buf` end on a character boundary: the length without a
 * trailing UTF-8 sequence that is not finished yet (invalid bytes count as whole).
 */
export function completeUtf8Length(buf: Buffer): number {
  const n = buf.length;
  // A sequence is at most 4 bytes: look back at most 3 for its lead byte.
  for (let back = 1; back <= Math.min(3, n); back++) {
    const byte = buf[n - back]!;
    if ((byte & 0xc0) === 0x80) continue; // continuation byte: keep looking for the lead
    const need = byte < 0xc0 ? 1 : byte < 0xe0 ? 2 : byte < 0xf0 ? 3 : byte < 0xf8 ? 4 : 1;
    return need > back ? n - back : n;
  }
  return n;
}
