// Abuse under load: bursts of 1,000 commands across 20 real gVisor instances of one
// organization. No answer is a 5xx, and each limit answers exactly the requests past it
// and no others (every other answer is a 200, or a 202 for background commands):
//
// - commands_per_minute quota 50: of 1,000 sent at once, 50 run, 950 get
//   429 commands_rate_exceeded with Retry-After;
// - concurrent_commands quota 20: of 1,000 background commands sent at once, 20 start,
//   980 get 403 quota_exceeded (they run on through the next burst);
// - quotas raised: 1,000 commands, 100 in flight at a time (5 per instance), all 200
//   with their own output; p50/p95/p99 are printed;
// - the API key's rate limit (1,000 requests): the key that made exactly 1,000 was never
//   refused; a key with 980 made sends 1,000 commands at once: 20 run, 980 get
//   429 rate_limited ("api_key");
// - the organization's rate limit: with 20 requests left to it, 1,000 commands at once
//   from a fresh key: 20 run, 980 get 429 rate_limited ("organization").
//
// Each refusal count is also the positive control of its limit: the limit bit, in the
// count expected. The rate-limit window is an hour here, so that no window ends during
// the file and every count is exact; quotas change per phase through the operator's
// per-organization overrides. Instances are small (256 MB, 512 MB disk, no egress) so
// that 20 fit this host; they are created at once, and a 21st is refused by the
// organization's instance quota (20); at the end, all 20 stop within the time that
// `roomkit serve` gives a shutdown. The vcpus quota is raised from its default of
// 16, which stops a 17th instance of 1 vCPU first. The file's and each phase's time are printed.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { InjectOptions, LightMyRequestResponse as InjectResponse } from 'fastify';
import { SHUTDOWN_TIMEOUT_MS } from '../../src/cli/serve.ts';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';

const POOL = '10.237.0.0/24';
const INSTANCES = 20;
const BURST = 1000;
const KEY_LIMIT = 1000;
/** Above what the bursts before the organization's own take (about 4,030 requests), so that little padding is needed. */
const ORG_LIMIT = 4200;
const PER_MINUTE = 50;
const CONCURRENT = 20;
/** Commands in flight at once when all must run: 5 per instance. */
const WIDTH = 100;
const fileStarted = performance.now();

let t: TestApp;
let org: TestOrg;
let profileId: string;

const room = (i: number) => `/api/profile/${profileId}/room/load-${i}`;
const auth = (key: string) => ({ authorization: `Bearer ${key}` });

/** A key of the organization that has made no request yet: the per-key rate limit counts from zero. */
async function freshKey(): Promise<string> {
  return (await t.services.organizations.createKey(org.organizationId, { env: 'test' })).secret;
}

interface Answer {
  res: InjectResponse;
  ms: number;
}

/** Sends the requests with at most `width` in flight (all at once by default), in order; returns each answer with its time. */
async function send(requests: InjectOptions[], width = requests.length): Promise<Answer[]> {
  const answers: Answer[] = new Array(requests.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(width, requests.length) }, async () => {
      while (next < requests.length) {
        const i = next++;
        const started = performance.now();
        const res = await t.app.inject(requests[i]!);
        answers[i] = { res, ms: performance.now() - started };
      }
    }),
  );
  return answers;
}

/** The commands of a burst, spread over the instances in turn. */
function commands(key: string, count: number, body: (i: number) => Record<string, unknown>): InjectOptions[] {
  return Array.from({ length: count }, (_, i) => ({ method: 'POST', url: `${room(i % INSTANCES)}/command`, headers: auth(key), payload: body(i) }));
}

/** Answers by status and error code, e.g. {"200": 100, "429 commands_rate_exceeded": 900}; then asserts that none is a 5xx. */
function tally(answers: Answer[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const { res } of answers) {
    const label = res.statusCode < 300 ? String(res.statusCode) : `${res.statusCode} ${(res.json() as { error: string }).error}`;
    counts[label] = (counts[label] ?? 0) + 1;
  }
  const fives = answers.filter((a) => a.res.statusCode >= 500);
  assert.equal(fives.length, 0, `${JSON.stringify(counts)}; the first 5xx: ${fives[0]?.res.body}`);
  return counts;
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN;
}

function latencies(label: string, answers: Answer[]): string {
  const ms = answers.map((a) => a.ms);
  return `${label}: n=${ms.length} p50 ${percentile(ms, 50).toFixed(0)} ms, p95 ${percentile(ms, 95).toFixed(0)} ms, p99 ${percentile(ms, 99).toFixed(0)} ms`;
}

const ok = (a: Answer) => a.res.statusCode < 300;
const refused = (a: Answer) => a.res.statusCode >= 400;

/** The `RateLimit` field's remaining count for one policy. */
function remaining(res: InjectResponse, policy: string): number {
  const match = new RegExp(`"${policy}";r=(\\d+)`).exec(String(res.headers.ratelimit));
  assert.ok(match, `no ${policy} in RateLimit: ${res.headers.ratelimit}`);
  return Number(match[1]);
}

before(async () => {
  t = await startTestApp({
    gvisorPool: POOL,
    config: {
      // Bursts put 50 commands on each instance at once: only the organization's quotas decide.
      maxCommandsPerInstance: 64,
      rateLimitKeyRequests: KEY_LIMIT,
      rateLimitOrgRequests: ORG_LIMIT,
      rateLimitWindowS: 3600,
    },
  });
  org = await t.newOrg();
  // The default vcpus quota (16) would stop a 17th instance of 1 vCPU before the instance quota (20) does.
  await t.services.quotas.setOverrides(org.organizationId, { vcpus: 2 * INSTANCES });
  profileId = await t.createProfile(org, { name: 'small', memory_mb: 256, disk_mb: 512, network: { egress: 'none' }, command_timeout_s: 120 });
});
let closed = false;
after(async () => {
  if (!closed) await t.closeLeavingNothing();
  console.log(`load-abuse: the whole file took ${((performance.now() - fileStarted) / 1000).toFixed(1)} s`);
});

describe('1,000 commands at once across 20 instances', () => {
  it(`creates ${INSTANCES} instances at once, and the organization's instance quota refuses a 21st`, async (c) => {
    const started = performance.now();
    const created = await send(Array.from({ length: INSTANCES }, (_, i) => ({ method: 'POST', url: room(i), headers: org.headers, payload: {} })));
    assert.deepEqual(tally(created), { 201: INSTANCES }, created.filter(refused).map((a) => a.res.body).join('\n'));
    c.diagnostic(`${INSTANCES} instances created at once in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    const extra = await t.app.inject({ method: 'POST', url: room(INSTANCES), headers: org.headers, payload: {} });
    assert.equal(extra.statusCode, 403, extra.body);
    assert.deepEqual(extra.json().details, { quota: 'instances', limit: 20, used: 20, requested: 1 });
  });

  it(`commands_per_minute ${PER_MINUTE}: exactly ${PER_MINUTE} of 1,000 run, the other ${BURST - PER_MINUTE} get 429 commands_rate_exceeded`, async (c) => {
    await t.services.quotas.setOverrides(org.organizationId, { concurrent_commands: BURST, commands_per_minute: PER_MINUTE });
    const started = performance.now();
    const answers = await send(commands(await freshKey(), BURST, (i) => ({ command: `echo minute-${i}` })));
    assert.deepEqual(tally(answers), { 200: PER_MINUTE, '429 commands_rate_exceeded': BURST - PER_MINUTE });
    for (const { res } of answers.filter(ok)) assert.equal(res.json().result.exit_code, 0, res.body);
    for (const { res } of answers.filter(refused)) {
      const { details } = res.json();
      assert.deepEqual({ ...details, retry_after_s: 0 }, { quota: 'commands_per_minute', limit: PER_MINUTE, used: PER_MINUTE, requested: 1, retry_after_s: 0 });
      assert.ok(details.retry_after_s >= 1 && details.retry_after_s <= 60, res.body);
      assert.equal(res.headers['retry-after'], String(details.retry_after_s));
    }
    c.diagnostic(`${((performance.now() - started) / 1000).toFixed(1)} s; ${latencies('run', answers.filter(ok))}; ${latencies('refused', answers.filter(refused))}`);
  });

  it(`concurrent_commands ${CONCURRENT}: exactly ${CONCURRENT} of 1,000 background commands start, the other ${BURST - CONCURRENT} get 403 quota_exceeded`, async (c) => {
    await t.services.quotas.setOverrides(org.organizationId, { concurrent_commands: CONCURRENT, commands_per_minute: 100_000 });
    const started = performance.now();
    const key = await freshKey();
    const answers = await send(commands(key, BURST, () => ({ command: 'sleep 600', background: true })));
    assert.deepEqual(tally(answers), { 202: CONCURRENT, '403 quota_exceeded': BURST - CONCURRENT });
    for (const { res } of answers.filter(refused)) {
      assert.deepEqual(res.json().details, { quota: 'concurrent_commands', limit: CONCURRENT, used: CONCURRENT, requested: 1 });
    }
    // The burst's key has used its 1,000 requests; the organization's first key reads.
    const usage = await t.app.inject({ method: 'GET', url: '/api/usage', headers: org.headers });
    assert.equal(usage.json().quotas.concurrent_commands.used, CONCURRENT);
    c.diagnostic(`${((performance.now() - started) / 1000).toFixed(1)} s; ${latencies('started', answers.filter(ok))}; ${latencies('refused', answers.filter(refused))}`);
  });

  it(`quotas raised: all 1,000 commands run, ${WIDTH} in flight at a time, each with its own output`, async (c) => {
    // The background commands of the burst before run on, and count.
    await t.services.quotas.setOverrides(org.organizationId, { concurrent_commands: BURST + CONCURRENT, commands_per_minute: 100_000 });
    const started = performance.now();
    // Exactly the key's rate limit: the 1,000th request is still allowed.
    const key = await freshKey();
    const answers = await send(
      commands(key, BURST, (i) => ({ command: `echo run-${i}` })),
      WIDTH,
    );
    assert.deepEqual(tally(answers), { 200: BURST });
    answers.forEach(({ res }, i) => assert.equal(res.json().result.output, `run-${i}\n`));
    assert.equal(Math.min(...answers.map((a) => remaining(a.res, 'api_key'))), 0, 'the key used its whole limit');
    const seconds = (performance.now() - started) / 1000;
    c.diagnostic(`${seconds.toFixed(1)} s, ${(BURST / seconds).toFixed(1)} commands/s; ${latencies('all 1,000', answers)}`);
    const last = await t.app.inject({ method: 'GET', url: '/api/usage', headers: auth(key) });
    assert.equal(last.statusCode, 429, 'the 1,001st request of the key is refused');
    assert.equal(last.json().details.limit, 'api_key');
  });

  it(`the API key's rate limit: with 980 of ${KEY_LIMIT} requests made, 20 of 1,000 commands run and 980 get 429 rate_limited`, async (c) => {
    const key = await freshKey();
    const padding = await send(Array.from({ length: KEY_LIMIT - 20 }, () => ({ method: 'GET' as const, url: '/api/usage', headers: auth(key) })), 50);
    assert.deepEqual(tally(padding), { 200: KEY_LIMIT - 20 });
    assert.equal(remaining(padding.at(-1)!.res, 'api_key'), 20);
    const started = performance.now();
    const answers = await send(commands(key, BURST, () => ({ command: 'echo ok' })));
    assert.deepEqual(tally(answers), { 200: 20, '429 rate_limited': 980 });
    for (const { res } of answers.filter(refused)) {
      assert.equal(res.json().details.limit, 'api_key');
      assert.equal(res.headers['retry-after'], String(res.json().details.retry_after_s));
    }
    c.diagnostic(`${((performance.now() - started) / 1000).toFixed(1)} s; ${latencies('run', answers.filter(ok))}; ${latencies('refused', answers.filter(refused))}`);
  });

  it("the organization's rate limit: with 20 requests left to it, 20 of 1,000 commands from a fresh key run and 980 get 429 rate_limited", async (c) => {
    // What the organization has left (every key's requests counted, in an hour's window), down to 20.
    const probe = await t.app.inject({ method: 'GET', url: '/api/usage', headers: auth(await freshKey()) });
    let left = remaining(probe, 'organization');
    assert.ok(left > 20, `the organization has ${left} requests left`);
    while (left > 20) {
      // Each key stays under its own limit.
      const padKey = await freshKey();
      const count = Math.min(left - 20, KEY_LIMIT / 2);
      const padding = await send(Array.from({ length: count }, () => ({ method: 'GET' as const, url: '/api/usage', headers: auth(padKey) })), 50);
      assert.deepEqual(tally(padding), { 200: count });
      left = Math.min(...padding.map((a) => remaining(a.res, 'organization')));
    }
    assert.equal(left, 20);
    const started = performance.now();
    const answers = await send(commands(await freshKey(), BURST, () => ({ command: 'echo ok' })));
    assert.deepEqual(tally(answers), { 200: 20, '429 rate_limited': 980 });
    for (const { res } of answers.filter(refused)) assert.equal(res.json().details.limit, 'organization');
    c.diagnostic(`${((performance.now() - started) / 1000).toFixed(1)} s; ${latencies('run', answers.filter(ok))}; ${latencies('refused', answers.filter(refused))}`);
  });

  it(`stops its ${INSTANCES} instances within the ${SHUTDOWN_TIMEOUT_MS / 1000} s roomkit serve gives a shutdown, leaving nothing`, async (c) => {
    const started = performance.now();
    closed = true;
    await t.closeLeavingNothing();
    const seconds = (performance.now() - started) / 1000;
    c.diagnostic(`stopped in ${seconds.toFixed(1)} s`);
    assert.ok(seconds < SHUTDOWN_TIMEOUT_MS / 1000, `took ${seconds.toFixed(1)} s`);
  });
});
