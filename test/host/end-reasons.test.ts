// Why an instance or a command ended, with real gVisor instances: guest root blowing a
// memory balloon past memory_mb is stopped by the memory guard, its command says
// out_of_memory and the instance lives on; a command past its time limit says
// time_limit; one failing with the disk full says disk_full; a delete records the key that asked; a sandbox killed from the host makes
// its instance failed with sandbox_exited within seconds, and nothing of it is left.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { run as runHost } from '../../src/host/run.ts';
import { hostObjects, NOTHING } from '../support/host.ts';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';

let t: TestApp;
let org: TestOrg;
let profileId: string;

const MEMORY_MB = 512;
const room = (name: string) => `/api/profile/${profileId}/room/${name}`;

type History = { state: string; reason?: string; reason_code?: string; key_id?: string }[];

interface CommandAnswer {
  command_id: string;
  status: string;
  result: { output: string; exit_code: number; timed_out: boolean; end_reason: string };
}

async function run(name: string, command: string, timeout_s = 120): Promise<CommandAnswer> {
  const res = await t.app.inject({ method: 'POST', url: `${room(name)}/command`, headers: org.headers, payload: { command, timeout_s } });
  assert.equal(res.statusCode, 200, res.body);
  return res.json() as CommandAnswer;
}

async function create(name: string): Promise<string> {
  const res = await t.app.inject({ method: 'POST', url: room(name), headers: org.headers });
  assert.equal(res.statusCode, 201, res.body);
  return res.json().instance_id as string;
}

async function instance(name: string): Promise<{ state: string; state_history: History }> {
  const res = await t.app.inject({ method: 'GET', url: room(name), headers: org.headers });
  assert.equal(res.statusCode, 200, res.body);
  return res.json();
}

const codes = (history: History) => history.filter((s) => s.reason_code !== undefined).map((s) => `${s.state}:${s.reason_code}`);

before(async () => {
  t = await startTestApp({ gvisorPool: '10.236.0.0/24' });
  t.gvisor();
  org = await t.newOrg();
  profileId = await t.createProfile(org, { name: 'ends', memory_mb: MEMORY_MB, disk_mb: 512, network: { egress: 'none' }, command_timeout_s: 120 });
});

after(async () => {
  await t.closeLeavingNothing();
});

describe('a command\'s end reason, and a delete by a key', () => {
  let id: string;
  before(async () => {
    id = await create('balloon');
  });

  it('guest root blowing a balloon past memory_mb is stopped by the memory guard: out_of_memory, and the instance lives on', async () => {
    // 16 MB at a time, each page touched, the running total printed after each step.
    const balloon = `sudo python3 -c 'import sys
chunks = []
for i in range(1, ${(MEMORY_MB * 3) / 16}):
    chunks.append(bytearray(16 << 20))
    print("held", i * 16, flush=True)
'`;
    const answer = await run('balloon', balloon);
    const held = [...answer.result.output.matchAll(/^held (\d+)$/gm)].map((m) => Number(m[1]));
    const most = Math.max(0, ...held);
    // Positive control: the balloon really passed memory_mb before the guard killed it,
    // by its own count and by the host cgroup's high-water mark.
    const peakBytes = Number(readFileSync(`/sys/fs/cgroup/memory/roomkit/${id}/memory.max_usage_in_bytes`, 'utf8').trim());
    console.log(`balloon held ${most} MB when it died; sandbox peak ${Math.round(peakBytes / 1048576)} MB; exit ${answer.result.exit_code}`);
    assert.ok(most > MEMORY_MB, `the balloon itself passed memory_mb (it held ${most} MB)`);
    assert.ok(peakBytes > MEMORY_MB * 1048576, `the sandbox passed memory_mb (peak ${peakBytes} bytes)`);
    // It did not finish: the guard ended it.
    assert.ok(most < MEMORY_MB * 3 - 16, `the balloon was stopped (it held ${most} MB)`);
    assert.notEqual(answer.result.exit_code, 0);
    assert.equal(answer.result.end_reason, 'out_of_memory', answer.result.output.slice(-500));
    const status = await t.app.inject({ method: 'GET', url: `${room('balloon')}/commands/${answer.command_id}`, headers: org.headers });
    assert.equal(status.json().end_reason, 'out_of_memory');
    // The instance lives on and answers.
    assert.equal((await instance('balloon')).state, 'ready');
    const after = await run('balloon', 'echo alive');
    assert.equal(after.result.output, 'alive\n');
    assert.equal(after.result.end_reason, 'exited');
  });

  it('a command past its time limit says time_limit', async () => {
    const answer = await run('balloon', 'echo started; sleep 60', 2);
    assert.equal(answer.result.output, 'started\n');
    assert.equal(answer.result.timed_out, true);
    assert.equal(answer.result.exit_code, 124);
    assert.equal(answer.result.end_reason, 'time_limit');
  });

  it('a command that fails with the disk full says disk_full', async () => {
    // Positive control: the same write, small, succeeds.
    const small = await run('balloon', 'dd if=/dev/zero of=small bs=1M count=8 && rm small');
    assert.equal(small.result.exit_code, 0, small.result.output);
    assert.equal(small.result.end_reason, 'exited');
    const answer = await run('balloon', 'dd if=/dev/zero of=fill bs=1M count=2048');
    assert.notEqual(answer.result.exit_code, 0);
    assert.match(answer.result.output, /No space left on device/);
    assert.equal(answer.result.end_reason, 'disk_full');
    const freed = await run('balloon', 'rm fill; echo freed');
    assert.equal(freed.result.end_reason, 'exited');
  });

  it('a delete records reason_code deleted and the key that asked', async () => {
    const keys = await t.app.inject({ method: 'GET', url: '/api/keys', headers: org.headers });
    const keyId = (keys.json().keys as { key_id: string }[])[0]?.key_id;
    assert.ok(keyId);
    const res = await t.app.inject({ method: 'DELETE', url: room('balloon'), headers: org.headers });
    assert.equal(res.statusCode, 200, res.body);
    const history = res.json().state_history as History;
    assert.equal(res.json().state, 'stopped');
    assert.deepEqual(codes(history), ['stopping:deleted', 'stopped:deleted']);
    assert.deepEqual(
      history.filter((s) => s.reason_code).map((s) => s.key_id),
      [keyId, keyId],
    );
  });
});

describe('a sandbox killed from the host', () => {
  it('turns its instance failed with sandbox_exited within seconds, its command says instance_stopped, and nothing is left', async () => {
    const id = await create('killed');
    const started = await t.app.inject({
      method: 'POST',
      url: `${room('killed')}/command`,
      headers: org.headers,
      payload: { command: 'sleep 300', background: true },
    });
    assert.equal(started.statusCode, 202, started.body);
    const commandId = started.json().command_id as string;
    // Only this instance's sandbox: the oldest process of its runsc root whose last argument
    // is its id (runsc orders its global flags differently from one start to the next).
    const found = await runHost('pgrep', ['-o', '-f', `^runsc-sandbox .*--root=${join(t.dataDir, 'runsc')} .* ${id}$`], { timeoutMs: 10_000 });
    const pid = Number(found.stdout.trim());
    assert.ok(pid > 0, `found the sandbox process of ${id}`);
    const killedAt = Date.now();
    process.kill(pid, 'SIGKILL');

    let seen: { state: string; state_history: History } | undefined;
    while (Date.now() - killedAt < 15_000) {
      seen = await instance('killed');
      if (seen.state === 'failed') break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const tookMs = Date.now() - killedAt;
    console.log(`instance failed ${tookMs} ms after its sandbox was killed`);
    assert.equal(seen?.state, 'failed', JSON.stringify(seen?.state_history));
    assert.ok(tookMs < 10_000, `failed within seconds (${tookMs} ms)`);
    assert.deepEqual(codes(seen.state_history), ['failed:sandbox_exited']);

    let status = await t.app.inject({ method: 'GET', url: `${room('killed')}/commands/${commandId}`, headers: org.headers });
    for (let i = 0; i < 50 && status.json().state === 'running'; i++) {
      await new Promise((r) => setTimeout(r, 100));
      status = await t.app.inject({ method: 'GET', url: `${room('killed')}/commands/${commandId}`, headers: org.headers });
    }
    assert.equal(status.json().state, 'interrupted', status.body);
    assert.equal(status.json().end_reason, 'instance_stopped');

    // Recorded as failed only once nothing of it is left on the host.
    assert.deepEqual({ ...(await hostObjects(t.dataDir, [id])), egressRules: [] }, NOTHING);
    const cmd = await t.app.inject({ method: 'POST', url: `${room('killed')}/command`, headers: org.headers, payload: { command: 'true' } });
    assert.equal(cmd.statusCode, 409, cmd.body);
    assert.match(cmd.json().message, /ended unexpectedly/);
  });
});
