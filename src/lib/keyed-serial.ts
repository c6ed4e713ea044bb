// Work run one at a time per key, in the order it was asked for. A failure ends only
// the work that failed: the next one for the key runs all the same. A key is forgotten
// once nothing is queued under it, so keys that come and go (instances, open stdins)
// do not pile up.
export class KeyedSerial<K> {
  /** Per key: settles (never rejects) when the last work queued under it has ended. */
  private readonly tails = new Map<K, Promise<void>>();

  /** Runs `work` after every work queued under `key` before it has ended; resolves or rejects as `work` does. */
  run<T>(key: K, work: () => Promise<T>): Promise<T> {
    const before = this.tails.get(key) ?? Promise.resolve();
    const mine = before.then(work);
    const tail = mine.then(
      () => {},
      () => {},
    );
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return mine;
  }

  /** Settles once the work queued under `key` so far has ended, however it ended. */
  idle(key: K): Promise<void> {
    return this.tails.get(key) ?? Promise.resolve();
  }

  /** Whether work is queued or running under `key`. */
  busy(key: K): boolean {
    return this.tails.has(key);
  }
}

/** Work run one at a time in the order it was asked for: a KeyedSerial with one key. */
export class Serial {
  private readonly serial = new KeyedSerial<true>();

  run<T>(work: () => Promise<T>): Promise<T> {
    return this.serial.run(true, work);
  }
}
