// Code contexts through the HTTP API, beside their floor in the same instance: a
// context's `run` of `1+1` (p50) against a REST command `python3 -c 'print(1+1)'` (a new
// Python each time, the way an agent without contexts runs code), the first run in a
// new context (its create and first answer), a matplotlib chart returned as PNG end to
// end (its image written into the instance and listed in files_changed), and the first
// run in a new instance: a create answered by the profile's warm pool beside a
// cold create of the same image (each: the instance, a context and its `1+1`), with the
// memory such an instance holds (its memory cgroup with its first context, then once
// that context imported pandas and matplotlib). Target (issue 24): a run of `1+1` at
// most 30 ms at p50.
//
//   node bench/code-contexts.ts   (as root; ROOMKIT_BENCH_RUNS=30 by default;
//   ROOMKIT_IMAGES_DIR to reuse built images: the chart's image has matplotlib)
import { setTimeout as sleep } from 'node:timers/promises';
import { cgroupView } from './memory-sampler.ts';
import { startBenchService } from './setup.ts';
import { percentile, summary } from './stats.ts';

const RUNS = Number(process.env.ROOMKIT_BENCH_RUNS ?? 30);
/** New instances measured each way (a cold create, a claim from the warm pool). */
const NEW_INSTANCES = 3;
const MiB = 1024 * 1024;
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
  const packages = ['python3-matplotlib', 'python3-pandas', 'nodejs'];
  const profile = await call('POST', '/api/profiles', { name: 'code', packages, network: { egress: 'none' } }, 201);
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

  // New instances: the same image cold and from a pool of one (refilled between claims).
  const pooled = await call('POST', '/api/profiles', { name: 'pooled', packages, network: { egress: 'none' }, warm_pool: 1 }, 201);
  const firstRun = async (profileId: string, roomId: string) => {
    const url = `/api/profile/${profileId}/room/${roomId}`;
    const started = performance.now();
    const instance = await call('POST', url, undefined, 201);
    const created = performance.now() - started;
    const context = await call('POST', `${url}/contexts`, {}, 201);
    const result = await call('POST', `${url}/contexts/${context.context_id}/run`, { code: '1+1' });
    if (result.results[0]?.text !== '2') throw new Error(`1+1 answered ${JSON.stringify(result)}`);
    return { url, instanceId: instance.instance_id as string, claimed: instance.claimed_at !== null, created, total: performance.now() - started };
  };
  const poolReady = async () => {
    for (let waited = 0; waited < 120_000; waited += 200) {
      const current = await call('GET', `/api/profiles/${pooled.profile_id}`);
      if (current.warm_pool_instances.ready >= 1) return;
      await sleep(200);
    }
    throw new Error('the warm pool did not fill in 2 minutes');
  };
  const cold: number[] = [];
  const coldCreates: number[] = [];
  const warm: number[] = [];
  const warmCreates: number[] = [];
  const idleMemory: number[] = [];
  const contextMemory: number[] = [];
  for (let i = 0; i < NEW_INSTANCES; i++) {
    const c = await firstRun(profile.profile_id, `cold-${i}`);
    cold.push(c.total);
    coldCreates.push(c.created);
    await call('DELETE', c.url);
    await poolReady();
    // Settle as an idle pooled instance does between its boot and a claim.
    await sleep(2_000);
    const w = await firstRun(pooled.profile_id, `warm-${i}`);
    if (!w.claimed || c.claimed) throw new Error('a create was not answered as this measure needs (a claim from the pool, a cold start)');
    warm.push(w.total);
    warmCreates.push(w.created);
    const idle = cgroupView(w.instanceId);
    if (idle) idleMemory.push(idle.usage);
    await call('POST', `${w.url}/contexts/${(await call('GET', `${w.url}/contexts`)).contexts[0].context_id}/run`, { code: 'import pandas, matplotlib.pyplot' });
    const busy = cgroupView(w.instanceId);
    if (busy) contextMemory.push(busy.usage);
    await call('DELETE', w.url);
  }
  await call('PATCH', `/api/profiles/${pooled.profile_id}`, { warm_pool: 0 });

  console.log(`context run of 1+1 (${RUNS} runs): ${summary(runs)}   p50 ${percentile(runs, 50).toFixed(1)} ms (target: at most 30 ms)`);
  console.log(`floor, command python3 -c 'print(1+1)' in the same instance: ${summary(execs)}`);
  console.log(`context create (5): ${summary(creates)}`);
  console.log(`first run in a new context, create + 1+1 (5): ${summary(firstRuns)}`);
  console.log(`first run in a new instance, cold: create + context + 1+1 (${NEW_INSTANCES}): ${summary(cold)}   (its create: ${summary(coldCreates)})`);
  console.log(`first run in a new instance from the warm pool (${NEW_INSTANCES}): ${summary(warm)}   (its create: ${summary(warmCreates)})`);
  const mib = (values: number[]) => (values.length === 0 ? 'not measured (no memory cgroup)' : values.map((v) => `${(v / MiB).toFixed(0)}`).join(', ') + ' MiB');
  console.log(`memory cgroup of an instance from the pool, with its first context (Python, 1+1): ${mib(idleMemory)}; once that context imported pandas and matplotlib: ${mib(contextMemory)}`);
  console.log(`chart of ${(chartBytes / 1048576).toFixed(2)} MiB PNG, end to end with its file (5): ${summary(charts)}`);
} finally {
  await bench.close();
}
