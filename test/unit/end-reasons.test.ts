// Why an instance or a command ended, as codes an agent can branch on: an instance's
// state history (reason_code, and the key of a delete), a command's end_reason in its
// result, status and record. The runtime is the test double, reporting what the real
// one reports (a machine that ended by itself, a memory guard kill in an outcome).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { endReasonOf } from '../../src/core/commands.ts';
import type { CommandOutcome } from '../../src/runtimes/types.ts';
import { FakeRuntime } from '../support/fake-runtime.ts';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';
import { until } from '../support/until.ts';

let t: TestApp;
let org: TestOrg;

before(async () => {
  t = await startTestApp();
  org = await t.newOrg();
});
after(() => t.close());

type History = { state: string; reason?: string; reason_code?: string; key_id?: string }[];
const roomUrl = (room: string) => `/api/profile/${org.defaultProfileId}/room/${room}`;
const codes = (history: History) => history.filter((s) => s.reason_code !== undefined).map((s) => `${s.state}:${s.reason_code}`);

async function createReady(room: string): Promise<string> {
  const res = await t.app.inject({ method: 'POST', url: roomUrl(room), headers: org.headers });
  assert.equal(res.statusCode, 201, res.body);
  return res.json().instance_id;
}

async function historyOf(instanceId: string): Promise<{ state: string; state_history: History }> {
  const res = await t.app.inject({ method: 'GET', url: '/api/instances?limit=100', headers: org.headers });
  const found = (res.json().instances as { instance_id: string; state: string; state_history: History }[]).find((i) => i.instance_id === instanceId);
  assert.ok(found, `instance ${instanceId} is listed`);
  return found;
}

describe('why an instance ended', () => {
  it('a delete records reason_code deleted and the id of the key that asked', async () => {
    const id = await createReady('deleted');
    const keys = await t.app.inject({ method: 'GET', url: '/api/keys', headers: org.headers });
    const keyId = (keys.json().keys as { key_id: string }[])[0]?.key_id;
    assert.ok(keyId);
    const res = await t.app.inject({ method: 'DELETE', url: roomUrl('deleted'), headers: org.headers });
    assert.equal(res.statusCode, 200, res.body);
    const history = res.json().state_history as History;
    assert.deepEqual(codes(history), ['stopping:deleted', 'stopped:deleted']);
    for (const step of history.filter((s) => s.reason_code)) {
      assert.equal(step.key_id, keyId);
      assert.match(step.reason ?? '', new RegExp(keyId));
    }
    // Provisioning steps carry no code.
    assert.equal(history.filter((s) => s.reason_code === undefined).length, 7);
    assert.ok(!t.runtime.live.has(id));
  });

  it('a machine that ends by itself makes a ready instance failed with sandbox_exited, and removes what is left', async () => {
    const id = await createReady('exited');
    t.runtime.emit({ type: 'machine_exited', instanceId: id, outOfMemory: false, detail: 'its sandbox process ended unexpectedly' });
    const instance = await until('the instance to fail', async () => {
      const i = await historyOf(id);
      return i.state === 'failed' ? i : undefined;
    });
    assert.deepEqual(codes(instance.state_history), ['failed:sandbox_exited']);
    assert.equal(instance.state_history.at(-1)?.reason, 'its sandbox process ended unexpectedly');
    assert.ok(t.runtime.destroyed.includes(id));
    // The room says why to a command that comes later.
    const cmd = await t.app.inject({ method: 'POST', url: `${roomUrl('exited')}/command`, headers: org.headers, payload: { command: 'true' } });
    assert.equal(cmd.statusCode, 409, cmd.body);
    assert.match(cmd.json().message, /ended unexpectedly/);
  });

  it('says out_of_memory when the host reports memory as why', async () => {
    const id = await createReady('oom');
    t.runtime.emit({ type: 'machine_exited', instanceId: id, outOfMemory: true, detail: 'killed by the host for memory' });
    const instance = await until('the instance to fail', async () => {
      const i = await historyOf(id);
      return i.state === 'failed' ? i : undefined;
    });
    assert.deepEqual(codes(instance.state_history), ['failed:out_of_memory']);
  });

  it('a report about an instance that is not ready changes nothing', async () => {
    const id = await createReady('gone-already');
    await t.app.inject({ method: 'DELETE', url: roomUrl('gone-already'), headers: org.headers });
    t.runtime.emit({ type: 'machine_exited', instanceId: id, outOfMemory: false, detail: 'late' });
    await new Promise((r) => setTimeout(r, 50));
    const instance = await historyOf(id);
    assert.equal(instance.state, 'stopped');
    assert.deepEqual(codes(instance.state_history), ['stopping:deleted', 'stopped:deleted']);
  });

  it('a failed start says provision_failed; a shutdown with "stop" says service_stopped', async () => {
    const fake = new FakeRuntime({ failAt: { step: 'vm_booted', message: 'init did not answer' } });
    const own = await startTestApp({ fake });
    try {
      const o = await own.newOrg();
      const res = await own.app.inject({ method: 'POST', url: `/api/profile/${o.defaultProfileId}/room/r`, headers: o.headers });
      assert.equal(res.statusCode, 500, res.body);
      const history = res.json().details.state_history as History;
      assert.deepEqual(codes(history), ['failed:provision_failed']);
      fake.options = {};
      const ok = await own.app.inject({ method: 'POST', url: `/api/profile/${o.defaultProfileId}/room/s`, headers: o.headers });
      assert.equal(ok.statusCode, 201, ok.body);
      await own.services.instances.close('stop');
      const row = await own.services.db.selectFrom('instance_events').selectAll().where('instance_id', '=', ok.json().instance_id).orderBy('seq').execute();
      assert.deepEqual(
        row.filter((e) => e.reason_code !== null).map((e) => `${e.state}:${e.reason_code}`),
        ['stopping:service_stopped', 'stopped:service_stopped'],
      );
    } finally {
      await own.close();
    }
  });
});

describe('why a command ended', () => {
  const run = (room: string, command = 'work') =>
    t.app.inject({ method: 'POST', url: `${roomUrl(room)}/command`, headers: org.headers, payload: { command } });

  for (const [name, outcome, expected, state] of [
    ['on its own', {}, 'exited', 'exited'],
    ['on its own, failing', { exitCode: 2 }, 'exited', 'exited'],
    ['on a signal', { exitCode: 137 }, 'signal', 'exited'],
    ['killed by the memory guard', { exitCode: 137, outOfMemory: true }, 'out_of_memory', 'exited'],
    ['failing with the disk full', { exitCode: 1, diskFull: true }, 'disk_full', 'exited'],
    ['at its time limit', { exitCode: 124, timedOut: true }, 'time_limit', 'timed_out'],
    ['at its silence limit', { exitCode: 124, timedOut: true, noOutput: true }, 'no_output', 'timed_out'],
    ['with its machine gone', { exitCode: 255, instanceGone: true }, 'instance_stopped', 'interrupted'],
  ] as [string, Partial<CommandOutcome>, string, string][]) {
    it(`${name}: end_reason ${expected} in the result, the status and the record`, async () => {
      const room = `cmd-${expected}-${name.length}`;
      await createReady(room);
      t.runtime.options.commandOutcome = outcome;
      try {
        const res = await run(room);
        assert.equal(res.statusCode, 200, res.body);
        const result = res.json();
        assert.equal(result.result.end_reason, expected);
        const status = await t.app.inject({ method: 'GET', url: `${roomUrl(room)}/commands/${result.command_id}`, headers: org.headers });
        assert.equal(status.json().end_reason, expected);
        assert.equal(status.json().state, state);
        const list = await t.app.inject({ method: 'GET', url: `${roomUrl(room)}/commands`, headers: org.headers });
        assert.equal(list.json().commands[0].end_reason, expected);
      } finally {
        t.runtime.options.commandOutcome = undefined;
      }
    });
  }

  it('a command still running has no end reason; one recovered after a restart says service_stopped', async () => {
    await createReady('recover');
    // Long enough to be running still when recover() looks, however loaded the host.
    t.runtime.options.commandDelayMs = 3_000;
    try {
      const started = await t.app.inject({
        method: 'POST',
        url: `${roomUrl('recover')}/command`,
        headers: org.headers,
        payload: { command: 'sleep', background: true },
      });
      assert.equal(started.statusCode, 202, started.body);
      const id = started.json().command_id;
      const status = await t.app.inject({ method: 'GET', url: `${roomUrl('recover')}/commands/${id}`, headers: org.headers });
      assert.equal(status.json().end_reason, null);
      // As a restart finds it: recorded as running.
      assert.equal(await t.services.commands.recover(), 1);
      const row = await t.services.db.selectFrom('commands').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
      assert.equal(row.end_reason, 'service_stopped');
      assert.equal(row.state, 'interrupted');
    } finally {
      t.runtime.options.commandDelayMs = undefined;
    }
  });

  it('gives the runtime the silence limit: the command\'s, else the profile\'s, 0 for none', async () => {
    const profile = await t.app.inject({
      method: 'POST',
      url: '/api/profiles',
      headers: org.headers,
      payload: { name: 'quiet-limit', command_idle_output_timeout_s: 7 },
    });
    assert.equal(profile.statusCode, 201, profile.body);
    assert.equal(profile.json().command_idle_output_timeout_s, 7);
    const url = `/api/profile/${profile.json().profile_id}/room/quiet`;
    assert.equal((await t.app.inject({ method: 'POST', url, headers: org.headers })).statusCode, 201);
    const limits: (number | undefined)[] = [];
    const payloads = [
      { command: 'a' },
      { command: 'b', idle_output_timeout_s: 2 },
      { command: 'c', idle_output_timeout_s: 0 },
      { command: 'd', background: true },
      { command: 'e', background: true, idle_output_timeout_s: 3 },
    ];
    for (const payload of payloads) {
      const res = await t.app.inject({ method: 'POST', url: `${url}/command`, headers: org.headers, payload });
      assert.ok(res.statusCode === 200 || res.statusCode === 202, res.body);
      await until('the command to reach the runtime', () => (t.runtime.commands.at(-1)?.command === payload.command ? true : undefined));
      limits.push(t.runtime.commands.at(-1)?.idleOutputTimeoutMs);
    }
    // A background command has none unless it asks, as with its time limit.
    assert.deepEqual(limits, [7000, 2000, 0, 0, 3000]);
    await createReady('quiet-default');
    const own = await run('quiet-default', 'd');
    assert.equal(own.statusCode, 200, own.body);
    assert.equal(t.runtime.commands.at(-1)?.idleOutputTimeoutMs, 0, 'a profile without one sets none');
    const negative = await t.app.inject({ method: 'POST', url: `${url}/command`, headers: org.headers, payload: { command: 'e', idle_output_timeout_s: -1 } });
    assert.equal(negative.statusCode, 400, negative.body);
    assert.equal(negative.json().error, 'validation_error');
  });

  it('puts roomkit\'s own doing before what the exit code shows', () => {
    assert.equal(endReasonOf({ output: '', outputBytes: 0, outputTruncated: false, exitCode: 124, timedOut: true, noOutput: true, changes: [] }, 'timed_out', false), 'no_output');
    const base: CommandOutcome = { output: '', outputBytes: 0, outputTruncated: false, exitCode: 137, timedOut: false, changes: [] };
    assert.equal(endReasonOf({ ...base, timedOut: true, outOfMemory: true }, 'timed_out', false), 'time_limit');
    assert.equal(endReasonOf({ ...base, outOfMemory: true }, 'killed', true), 'killed');
    assert.equal(endReasonOf(base, 'exited', true), 'killed');
    assert.equal(endReasonOf({ ...base, exitCode: 0 }, 'exited', true), 'exited');
    assert.equal(endReasonOf({ ...base, exitCode: 0, outOfMemory: true }, 'exited', false), 'out_of_memory');
    assert.equal(endReasonOf({ ...base, diskFull: true }, 'interrupted', false), 'instance_stopped');
    assert.equal(endReasonOf({ ...base, exitCode: 0, diskFull: true }, 'exited', false), 'exited');
    assert.equal(endReasonOf({ ...base, exitCode: 200 }, 'exited', false), 'exited');
  });
});
