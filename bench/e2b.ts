// E2B's own SDK (the `e2b` package) against roomkit, next to roomkit's own REST API and
// the floors measured in the same run without the service:
// - the SDK's `commands.run('true')` round trip vs REST's POST …/command of `true` (and
//   of what the SDK runs for it, `bash -l -c true`) vs `runsc exec … true`, on one
//   instance (the SDK connects to the REST instance by its id, so all run in the same
//   sandbox); issue 22's target: the SDK within 1.2 times REST at p50;
// - `Sandbox.create()` until its first command's output vs REST's create and first
//   command, cold, and claiming an instance a profile's warm pool booted.
// The exec forms take their runs in turn, run by run, so that they see the same host.
//
//   npm run bench:e2b        (as root; ROOMKIT_BENCH_RUNS=20 by default)
import { join } from 'node:path';
import { Sandbox } from 'e2b';
import { run } from '../src/host/run.ts';
import { Runsc } from '../src/runtimes/gvisor/runsc.ts';
import { benchInstance, startBenchService } from './setup.ts';
import { percentile, summary } from './stats.ts';

const RUNS = Number(process.env.ROOMKIT_BENCH_RUNS ?? 20);
/**
 * What the SDK's run('true') asks the sandbox to run (E2B runs every command in a login
 * shell), through REST as closely as REST can (its sh becomes bash; the adapter starts
 * bash directly): the part of the SDK's round trip that is the command's own.
 */
const E2B_TRUE = 'exec /bin/bash -l -c true';

// Rate limits off: the benchmark times the service, not its limiter (the warm pool's
// polls alone would pass a key's 600 requests a minute).
const bench = await startBenchService('10.217.2.0/24', { rateLimitKeyRequests: 0, rateLimitOrgRequests: 0 });
const { base, headers, dataDir } = bench;
const e2b = { apiKey: headers.authorization!.slice('Bearer '.length), apiUrl: `${base}/e2b`, sandboxUrl: `${base}/e2b/envd` };
const p50 = (values: number[]) => percentile(values, 50);

try {
  const { roomUrl, id, netns } = await benchInstance(bench, 'bench-e2b');
  const restExec = async (command: string) => {
    const res = await fetch(`${roomUrl}/command`, { method: 'POST', headers, body: JSON.stringify({ command }) });
    const body = (await res.json()) as { result?: { exit_code: number } };
    if (res.status !== 200 || body.result?.exit_code !== 0) throw new Error(`${command} answered ${res.status}: ${JSON.stringify(body)}`);
  };
  const rawExec = async () => {
    const result = await run('nsenter', new Runsc({ root: join(dataDir, 'runsc') }).argv(netns, ['exec', '--user=1000:1000', id, 'true']).slice(1), { timeoutMs: 60_000 });
    if (result.code !== 0) throw new Error(`runsc exec true: ${result.stderr}`);
  };
  const sandbox = await Sandbox.connect(id, e2b);
  const sdkExec = async () => {
    const result = await sandbox.commands.run('true');
    if (result.exitCode !== 0) throw new Error(`the SDK's true exited ${result.exitCode}`);
  };

  console.log(`E2B SDK benchmark, ${RUNS} runs each\n`);
  await restExec('true');
  await sdkExec();
  const floor: number[] = [];
  const rest: number[] = [];
  const sdk: number[] = [];
  const restLogin: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    for (const [times, fn] of [[floor, rawExec], [rest, () => restExec('true')], [restLogin, () => restExec(E2B_TRUE)], [sdk, sdkExec]] as const) {
      const started = performance.now();
      await fn();
      times.push(performance.now() - started);
    }
  }
  console.log(`floor   runsc exec true (same instance, no service)        ${summary(floor)}`);
  console.log(`roomkit REST POST .../command {"command":"true"}           ${summary(rest)}`);
  console.log(`roomkit REST POST .../command, E2B's form: ${E2B_TRUE}    ${summary(restLogin)}`);
  console.log(`roomkit E2B SDK sandbox.commands.run('true')               ${summary(sdk)}`);
  console.log(`        at p50: ${(p50(sdk) / p50(rest)).toFixed(2)}x REST of true (target <= 1.2), ${(p50(sdk) / p50(restLogin)).toFixed(2)}x REST of E2B's form, ${(p50(sdk) - p50(floor)).toFixed(0)} ms over the floor\n`);

  // Create until the first command's output, cold: REST and the SDK in turn, in the same profile.
  const profileId = /\/profile\/([^/]+)\//.exec(roomUrl)![1]!;
  const restCreate = async (profile: string, room: string) => {
    const url = `${base}/api/profile/${profile}/room/${room}`;
    const res = await fetch(url, { method: 'POST', headers, body: '{}' });
    if (res.status !== 201) throw new Error(`create ${room} answered ${res.status}: ${await res.text()}`);
    const ran = await fetch(`${url}/command`, { method: 'POST', headers, body: JSON.stringify({ command: 'echo hello' }) });
    const body = (await ran.json()) as { result?: { output: string } };
    if (body.result?.output.trim() !== 'hello') throw new Error(`the first command of ${room} answered ${JSON.stringify(body)}`);
    return async () => {
      const del = await fetch(url, { method: 'DELETE', headers });
      if (del.status !== 200) throw new Error(`delete of ${room} answered ${del.status}`);
    };
  };
  const sdkCreate = async (template: string) => {
    const created = await Sandbox.create(template, e2b);
    const said = await created.commands.run('echo hello');
    if (said.stdout.trim() !== 'hello') throw new Error(`the first command printed ${JSON.stringify(said.stdout)}`);
    return async () => void (await created.kill());
  };
  const coldRest: number[] = [];
  const coldSdk: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    for (const [times, fn] of [[coldRest, () => restCreate(profileId, `cold-${i}`)], [coldSdk, () => sdkCreate('bench-e2b')]] as const) {
      const started = performance.now();
      const remove = await fn();
      times.push(performance.now() - started);
      await remove();
    }
  }
  console.log(`roomkit REST create -> first command's output (cold)      ${summary(coldRest)}`);
  console.log(`roomkit E2B Sandbox.create() -> first output (cold)        ${summary(coldSdk)}`);
  console.log(`        at p50: ${(p50(coldSdk) / p50(coldRest)).toFixed(2)}x REST\n`);

  // Warm: a profile keeps one instance booted; each run waits for it, then times the claim.
  const pooled = await fetch(`${base}/api/profiles`, { method: 'POST', headers, body: JSON.stringify({ name: 'bench-e2b-warm', warm_pool: 1, network: { egress: 'none' } }) });
  const warmProfile = ((await pooled.json()) as { profile_id: string }).profile_id;
  const untilWarm = async () => {
    const deadline = Date.now() + 120_000;
    for (;;) {
      const res = await fetch(`${base}/api/profiles/${warmProfile}`, { headers });
      if (res.status !== 200) throw new Error(`the warm profile answered ${res.status}: ${await res.text()}`);
      const profile = (await res.json()) as { warm_pool_instances: { ready: number } };
      if (profile.warm_pool_instances.ready >= 1) return;
      if (Date.now() > deadline) throw new Error('the warm pool did not refill within 120 s');
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  const warmRest: number[] = [];
  const warmSdk: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    for (const [times, fn] of [[warmRest, () => restCreate(warmProfile, `warm-${i}`)], [warmSdk, () => sdkCreate('bench-e2b-warm')]] as const) {
      await untilWarm();
      const started = performance.now();
      const remove = await fn();
      times.push(performance.now() - started);
      await remove();
    }
  }
  await fetch(`${base}/api/profiles/${warmProfile}`, { method: 'DELETE', headers });
  console.log(`roomkit REST create -> first output (warm pool claim)      ${summary(warmRest)}`);
  console.log(`roomkit E2B Sandbox.create() -> first output (warm pool)   ${summary(warmSdk)}`);
  console.log(`        at p50: ${(p50(warmSdk) / p50(warmRest)).toFixed(2)}x REST`);
} finally {
  await bench.close();
}
