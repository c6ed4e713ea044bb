// A running command's output as a stream of bytes with absolute offsets: the latest
// `maxBytes` of it kept in memory, so a client can read what it has not seen yet (from
// an offset), and listeners that receive each piece as it comes, cut at UTF-8 character
// boundaries so a piece always decodes to whole characters. Each byte keeps the stream
// it came from (stdout, stderr, or `output` when the runtime could not tell them apart),
// so a piece never mixes two streams.

import { HeadTailBuffer, retainedBytes } from '../host/output.ts';
import type { OutputStream, StreamText } from '../runtimes/types.ts';
import type { StreamFields } from './command-schema.ts';

export interface OutputPiece {
  /** The text, whole UTF-8 characters (invalid bytes replaced). */
  data: string;
  /** Byte offset of the piece's first byte in the command's output. */
  offset: number;
  /** Byte offset just past its last byte: where to resume reading. */
  end: number;
  stream: OutputStream;
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
  /** Bytes of an unfinished UTF-8 character held back from listeners, and their stream. */
  private pending: Buffer = Buffer.alloc(0);
  private pendingStream: OutputStream = 'output';
  /**
   * Where each run of one stream starts (absolute offsets, ascending) and its stream:
   * the first run kept may start before `start`.
   */
  private runStarts: number[] = [];
  private runStreams: OutputStream[] = [];
  private readonly listeners = new Set<(piece: OutputPiece) => void>();
  /** Every byte ever appended. */
  total = 0;

  constructor(maxBytes: number) {
    this.maxBytes = maxBytes;
  }

  append(chunk: Buffer, stream: OutputStream = 'output'): void {
    if (chunk.length === 0) return;
    // A character cut in two where the stream changes cannot be finished: what is held goes out as it is.
    if (this.pending.length > 0 && stream !== this.pendingStream) this.flush();
    const pieceStart = this.total - this.pending.length;
    if (this.runStreams.at(-1) !== stream) {
      this.runStarts.push(this.total);
      this.runStreams.push(stream);
    }
    this.total += chunk.length;
    this.keep(chunk);
    if (this.listeners.size === 0) {
      this.pending = Buffer.alloc(0);
      return;
    }
    const joined = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk]);
    const cut = completeUtf8Length(joined);
    this.pending = Buffer.from(joined.subarray(cut));
    this.pendingStream = stream;
    if (cut === 0) return;
    const piece = { data: joined.toString('utf8', 0, cut), offset: pieceStart, end: pieceStart + cut, stream };
    for (const listener of this.listeners) listener(piece);
  }

  /** Sends what is held of an unfinished character (the output ended). */
  flush(): void {
    if (this.pending.length === 0) return;
    const piece = { data: this.pending.toString('utf8'), offset: this.total - this.pending.length, end: this.total, stream: this.pendingStream };
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
    const read = this.readBytes(offset, maxBytes);
    if (!read) {
      const from = Math.min(Math.max(offset, this.start), this.total);
      return { data: '', offset: from, end: from };
    }
    // Stop before a character cut in two by the limit, unless nothing else would fit.
    const cut = read.to === this.total ? read.slice.length : completeUtf8Length(read.slice) || read.slice.length;
    return { data: read.slice.toString('utf8', 0, cut), offset: read.from, end: read.from + cut };
  }

  /** The kept bytes from `offset` on (at most `maxBytes`), with their absolute range; undefined when there are none. */
  private readBytes(offset: number, maxBytes: number): { slice: Buffer; from: number; to: number } | undefined {
    const from = Math.min(Math.max(offset, this.start), this.total);
    const to = Math.min(this.total, from + maxBytes);
    if (to <= from) return undefined;
    const all = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks);
    this.chunks = [all];
    return { slice: all.subarray(from - this.start, to - this.start), from, to };
  }

  /** Index of the run that holds the byte at `offset` (a kept byte). */
  private runAt(offset: number): number {
    let lo = 0;
    let hi = this.runStarts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.runStarts[mid]! <= offset) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  }

  /**
   * What is kept from `offset` on, at most `maxBytes` of it, as pieces of one stream
   * each, in order (as listeners get them).
   */
  readPieces(offset: number, maxBytes: number): OutputPiece[] {
    const read = this.readBytes(offset, maxBytes);
    if (!read) return [];
    const pieces: OutputPiece[] = [];
    let run = this.runAt(read.from);
    let at = read.from;
    while (at < read.to) {
      const runEnd = Math.min(this.runStarts[run + 1] ?? Infinity, read.to);
      const bytes = read.slice.subarray(at - read.from, runEnd - read.from);
      // Stop before a character cut in two by the limit, unless nothing else would fit.
      const cut = runEnd === read.to && read.to !== this.total ? completeUtf8Length(bytes) || (pieces.length === 0 ? bytes.length : 0) : bytes.length;
      if (cut === 0) break;
      pieces.push({ data: bytes.toString('utf8', 0, cut), offset: at, end: at + cut, stream: this.runStreams[run]! });
      at += cut;
      run++;
    }
    return pieces;
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
    this.forgetRuns();
  }

  /** Drops the runs wholly before the first byte kept. */
  private forgetRuns(): void {
    let drop = 0;
    while (drop + 1 < this.runStarts.length && this.runStarts[drop + 1]! <= this.start) drop++;
    // Dropped in batches, so that trimming a long list does not cost its length each time.
    if (drop > 0 && (drop >= 1024 || drop * 2 >= this.runStarts.length)) {
      this.runStarts = this.runStarts.slice(drop);
      this.runStreams = this.runStreams.slice(drop);
    }
  }
}

/**
 * A running command's stdout and stderr apart, each kept as its result will keep it
 * (the first and the last half of the output limit), for its status while it runs.
 */
export class StreamTexts {
  private readonly stdout: HeadTailBuffer;
  private readonly stderr: HeadTailBuffer;

  constructor(maxBytes: number) {
    this.stdout = new HeadTailBuffer(maxBytes);
    this.stderr = new HeadTailBuffer(maxBytes);
  }

  push(chunk: Buffer, stream: 'stdout' | 'stderr'): void {
    (stream === 'stdout' ? this.stdout : this.stderr).push(chunk);
  }

  fields(): StreamFields {
    return streamFields({ stdout: text(this.stdout), stderr: text(this.stderr) });
  }

  /** Memory the kept chunks hold (mostly shared with the command's OutputLog). */
  get retainedBytes(): number {
    return this.stdout.retainedBytes + this.stderr.retainedBytes;
  }
}

const text = (buffer: HeadTailBuffer): StreamText => ({ text: buffer.text(), bytes: buffer.total, truncated: buffer.truncated });

/** The API's stream fields of a runtime's two streams. */
export function streamFields(streams: { stdout: StreamText; stderr: StreamText }): StreamFields {
  return {
    stdout: streams.stdout.text,
    stderr: streams.stderr.text,
    stdout_bytes: streams.stdout.bytes,
    stderr_bytes: streams.stderr.bytes,
    stdout_truncated: streams.stdout.truncated,
    stderr_truncated: streams.stderr.truncated,
  };
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
