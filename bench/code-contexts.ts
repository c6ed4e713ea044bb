// Code contexts through the HTTP API, beside their floor in the same instance: a
// context's `run` of `1+1` (p50) against a REST command `python3 -c 'print(1+1)'` (a new
// Python each time, the way an agent without contexts runs code), the first run in a
// new context (its create and first answer), and a matplotlib chart returned as PNG end
// to end (its image written into the instance and listed in files_changed). Target
// (issue 24): a run of `1+1` at most 30 ms at p50.
//
//   node bench/code-contexts.ts   (as root; ROOMKIT_BENCH_RUNS=30 by default;
//   ROOMKIT_IMAGES_DIR to reuse built images: the chart's image has matplotlib)
import { startBenchService } from './setup.ts';
import { percentile, summary } from './stats.ts';

const RUNS = Number(process.env.ROOMKIT_BENCH_RUNS ?? 30);
// Room for the chart's image as the input of the command that writes it.
const bench = await startBenchService('10.246.0.0/25', {
  maxStdinBytes: 8 * 1024 * 1024,
  ...(process.env.ROOMKIT_IMAGES_DIR ? { imagesDir: process.env.ROOMKIT_IMAGES_DIR } : {}),
});
const { base, headers } = bench;

async function call(method: string, url: string, body?: unknown, expect = 200): Promise<any> {
  const res = await fetch(`${base}${url}`, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  const text = await res.text();
  if (res.status !== expect) throw new Error(`${method} ${url} answered ${res.status}: ${text}`);
  return text === '' ? undefined : JSON.parse(text);
}

async function timed<T>(fn: () => Promise<T>): Promise<[number, T]> {
  const started = performance.now();
  const value = await fn();
  return [performance.now() - started, value];
}

try {
  // The packages of test/host/code-contexts.test.ts, so that a built image is shared through ROOMKIT_IMAGES_DIR.
  const profile = await call('POST', '/api/profiles', { name: 'code', packages: ['python3-matplotlib', 'python3-pandas', 'nodejs'], network: { egress: 'none' } }, 201);
  const room = `/api/profile/${profile.profile_id}/room/bench`;
  const [createMs] = await timed(() => call('POST', room, undefined, 201));
  console.log(`instance created in ${(createMs / 1000).toFixed(1)} s (minutes when its image had to be built)`);

  const firstRuns: number[] = [];
  const creates: number[] = [];
  for (let i = 0; i < 5; i++) {
    const [made, context] = await timed(() => call('POST', `${room}/contexts`, {}, 201));
    const [ran] = await timed(() => call('POST', `${room}/contexts/${context.context_id}/run`, { code: '1+1' }));
    creates.push(made);
    firstRuns.push(made + ran);
    await call('DELETE', `${room}/contexts/${context.context_id}`, undefined, 204);
  }

  const context = await call('POST', `${room}/contexts`, {}, 201);
  const runUrl = `${room}/contexts/${context.context_id}/run`;
  const runs: number[] = [];
  const execs: number[] = [];
  // Warm both paths, then alternate them so load on the host weighs on each alike.
  await call('POST', runUrl, { code: '1+1' });
  await call('POST', `${room}/command`, { command: "python3 -c 'print(1+1)'" });
  for (let i = 0; i < RUNS; i++) {
    const [ran, result] = await timed(() => call('POST', runUrl, { code: '1+1' }));
    if (result.results[0]?.text !== '2') throw new Error(`1+1 answered ${JSON.stringify(result)}`);
    runs.push(ran);
    const [exec, outcome] = await timed(() => call('POST', `${room}/command`, { command: "python3 -c 'print(1+1)'" }));
    if (outcome.result.output !== '2\n') throw new Error(`the command answered ${JSON.stringify(outcome)}`);
    execs.push(exec);
  }

  const charts: number[] = [];
  let chartBytes = 0;
  const chart = 'import matplotlib.pyplot as plt, numpy as np\nplt.figure(figsize=(8, 8), dpi=100)\nplt.imshow(np.random.rand(400, 400), interpolation=\"nearest\")\nplt.show()';
  for (let i = 0; i < 5; i++) {
    const [ms, result] = await timed(() => call('POST', runUrl, { code: chart }));
    if (result.error || result.files_changed.length !== 1) throw new Error(`the chart answered ${JSON.stringify(result).slice(0, 500)}`);
    chartBytes = Buffer.from(result.results[0].png, 'base64').length;
    charts.push(ms);
  }

  console.log(`context run of 1+1 (${RUNS} runs): ${summary(runs)}   p50 ${percentile(runs, 50).toFixed(1)} ms (target: at most 30 ms)`);
  console.log(`floor, command python3 -c 'print(1+1)' in the same instance: ${summary(execs)}`);
  console.log(`context create (5): ${summary(creates)}`);
  console.log(`first run in a new context, create + 1+1 (5): ${summary(firstRuns)}`);
  console.log(`chart of ${(chartBytes / 1048576).toFixed(2)} MiB PNG, end to end with its file (5): ${summary(charts)}`);
} finally {
  await bench.close();
}
