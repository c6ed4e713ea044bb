// Polling in tests: wait for something the code under test does in the background (a
// state reached, a process gone, a pool filled) without a fixed sleep, and fail with
// what was awaited when it does not come.

export interface UntilOptions {
  /** How long to wait at most; 5 s unless given. */
  timeoutMs?: number;
  /** How long to sleep between two looks; 10 ms unless given. */
  everyMs?: number;
  /** More to say when it times out (e.g. the last log lines of a server). */
  detail?: () => string;
}

/** Polls `probe` until it gives a value other than undefined, and answers that value. */
export async function until<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, options: UntilOptions = {}): Promise<T> {
  const timeoutMs = options.timeoutMs ?? 5000;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) {
      const detail = options.detail?.();
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${detail ? `\n${detail}` : ''}`);
    }
    await new Promise((resolve) => setTimeout(resolve, options.everyMs ?? 10));
  }
}

/** Polls `check` until it holds. */
export async function untilTrue(what: string, check: () => Promise<boolean> | boolean, options: UntilOptions = {}): Promise<void> {
  await until(what, async () => ((await check()) ? true : undefined), options);
}
