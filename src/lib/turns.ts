// Work run a few at a time, in the order it was asked for: at most `atOnce` run, the
// rest wait, and each that ends hands its turn to the next in line. For bursts of work
// that only slow one another when more of them run than the host has cores.
export class Turns {
  /** How many run at once. */
  readonly atOnce: number;
  private running = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(atOnce: number) {
    this.atOnce = Math.max(1, Math.floor(atOnce));
  }

  /** Runs `work` once a turn is free; resolves or rejects as `work` does. */
  async run<T>(work: () => Promise<T>): Promise<T> {
    if (this.running >= this.atOnce) await new Promise<void>((resolve) => this.waiting.push(resolve));
    else this.running++;
    try {
      return await work();
    } finally {
      // The turn passes straight to the next in line, or is freed.
      const next = this.waiting.shift();
      if (next) next();
      else this.running--;
    }
  }
}
