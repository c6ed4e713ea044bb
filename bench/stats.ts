// Percentiles and one-line summaries shared by the benchmark scripts.

export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN;
}

export function summary(values: number[]): string {
  const ms = (v: number) => (v < 10 ? v.toFixed(1) : v.toFixed(0)).padStart(5);
  return `p50 ${ms(percentile(values, 50))} ms   p95 ${ms(percentile(values, 95))} ms   (n=${values.length})`;
}

/** Runs `fn` `runs` times, one after another, and returns each run's milliseconds. */
export async function timed(runs: number, fn: (i: number) => Promise<void>): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const started = performance.now();
    await fn(i);
    times.push(performance.now() - started);
  }
  return times;
}
