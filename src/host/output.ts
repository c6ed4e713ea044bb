// Keeps a program's output within a fixed budget however much it prints: the first
// half of the budget and the latest half, with a marker saying how much was dropped
// between them. Memory stays at most `maxBytes` whatever the output's size.

export class HeadTailBuffer {
  private readonly headMax: number;
  private readonly tailMax: number;
  private readonly head: Buffer[] = [];
  private headLen = 0;
  /** The tail as a ring of chunks, trimmed from the front when it grows past tailMax. */
  private tail: Buffer[] = [];
  private tailLen = 0;
  total = 0;

  constructor(maxBytes: number) {
    this.headMax = Math.ceil(maxBytes / 2);
    this.tailMax = Math.floor(maxBytes / 2);
  }

  push(chunk: Buffer): void {
    this.total += chunk.length;
    if (this.headLen < this.headMax) {
      const take = Math.min(chunk.length, this.headMax - this.headLen);
      this.head.push(chunk.subarray(0, take));
      this.headLen += take;
      chunk = chunk.subarray(take);
    }
    if (chunk.length === 0 || this.tailMax === 0) return;
    // Chunks are kept as they came (a pipe hands out a fresh buffer each time); the
    // ones that fall out of the tail's window become garbage at once.
    if (chunk.length >= this.tailMax) {
      this.tail = [chunk.subarray(chunk.length - this.tailMax)];
      this.tailLen = this.tailMax;
      return;
    }
    this.tail.push(chunk);
    this.tailLen += chunk.length;
    while (this.tailLen - (this.tail[0]?.length ?? 0) >= this.tailMax) {
      this.tailLen -= this.tail.shift()?.length ?? 0;
    }
  }

  /** Memory the kept chunks hold, counting whole underlying buffers (a slice keeps its parent alive). */
  get retainedBytes(): number {
    return retainedBytes([...this.head, ...this.tail]);
  }

  get truncated(): boolean {
    return this.total > this.headLen + this.tailLen;
  }

  /** The output as text (invalid UTF-8 replaced), with the omission marked. */
  text(): string {
    let tail = Buffer.concat(this.tail);
    if (tail.length > this.tailMax) tail = tail.subarray(tail.length - this.tailMax);
    const head = Buffer.concat(this.head).toString('utf8');
    if (!this.truncated) return head + tail.toString('utf8');
    const omitted = this.total - this.headLen - tail.length;
    return `${head}\n[... ${omitted} bytes of output omitted ...]\n${tail.toString('utf8')}`;
  }
}

/** Bytes of the distinct memory blocks behind `buffers`. */
export function retainedBytes(buffers: readonly Buffer[]): number {
  const blocks = new Set<ArrayBufferLike>(buffers.map((b) => b.buffer));
  let total = 0;
  for (const block of blocks) total += block.byteLength;
  return total;
}
