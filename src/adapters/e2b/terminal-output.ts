// A pseudo-terminal's output for E2B's streams: a terminal of core has one reader, and
// E2B lets a client reconnect to a PTY (pty.connect), so its output is kept here (the
// latest KEPT_BYTES, with absolute offsets) for every stream that follows it: the one
// that started it, and any that reconnect later, each from where it starts reading.
import type { Terminal, TerminalEnd } from '../../core/terminals.ts';

/** Output kept for a stream that reconnects: about a screenful's history several times over. */
const KEPT_BYTES = 64 * 1024;

export class TerminalOutput {
  private chunks: { offset: number; data: Buffer }[] = [];
  private total = 0;
  private readonly waiting = new Set<() => void>();
  end: TerminalEnd | undefined;

  constructor(terminal: Terminal) {
    terminal.onOutput((data) => {
      this.chunks.push({ offset: this.total, data });
      this.total += data.length;
      while (this.chunks.length > 1 && this.total - this.chunks[0]!.offset > KEPT_BYTES) this.chunks.shift();
      this.wake();
    });
    void terminal.ended.then((end) => {
      this.end = end;
      this.wake();
    });
  }

  /** Where the kept output starts: a reconnecting stream replays from here. */
  get oldest(): number {
    return this.chunks[0]?.offset ?? this.total;
  }

  /** The kept chunks past `offset`, and the offset after them. */
  since(offset: number): { chunks: Buffer[]; next: number } {
    const chunks = this.chunks.filter((c) => c.offset + c.data.length > offset).map((c) => (c.offset < offset ? c.data.subarray(offset - c.offset) : c.data));
    return { chunks, next: this.total };
  }

  /** Resolves when there is output past `offset` or the terminal ended (false), or after `ms` (true), or on abort. */
  wait(offset: number, ms: number, signal: AbortSignal): Promise<boolean> {
    if (this.total > offset || this.end || signal.aborted) return Promise.resolve(false);
    return new Promise((resolve) => {
      const done = (quiet: boolean) => {
        clearTimeout(timer);
        this.waiting.delete(wake);
        signal.removeEventListener('abort', wake);
        resolve(quiet);
      };
      const wake = () => done(false);
      const timer = setTimeout(() => done(true), ms);
      this.waiting.add(wake);
      signal.addEventListener('abort', wake, { once: true });
    });
  }

  private wake(): void {
    for (const wake of [...this.waiting]) wake();
  }
}
