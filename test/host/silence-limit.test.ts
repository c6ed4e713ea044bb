// The silence limit on real gVisor instances: a command that prints nothing for its
// idle_output_timeout_s is ended by the agent (its whole tree, as at its time limit)
// with the end reason no_output, soon after the limit and long before its time limit;
// one that keeps printing more often than the limit runs to its end.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';

let t: TestApp;
let org: TestOrg;
let url: string;

before(async () => {
  t = await startTestApp({ gvisorPool: '10.209.0.0/26' });
  t.gvisor();
  org = await t.newOrg();
  const profileId = await t.createProfile(org, { name: 'quiet', memory_mb: 512, disk_mb: 512, network: { egress: 'none' }, command_timeout_s: 120 });
  url = `/api/profile/${profileId}/room/quiet`;
  const created = await t.app.inject({ method: 'POST', url, headers: org.headers });
  assert.equal(created.statusCode, 201, created.body);
});

after(async () => {
  await t.closeLeavingNothing();
});

async function run(payload: Record<string, unknown>) {
  const started = performance.now();
  const res = await t.app.inject({ method: 'POST', url: `${url}/command`, headers: org.headers, payload });
  assert.equal(res.statusCode, 200, res.body);
  return { result: res.json(), seconds: (performance.now() - started) / 1000 };
}

describe('a command\'s silence limit', () => {
  it('ends a silent command and everything it started, with no_output, about a second after the limit', async () => {
    const { result, seconds } = await run({ command: 'sleep 30 & sleep 30; echo never', idle_output_timeout_s: 1 });
    assert.equal(result.result.end_reason, 'no_output');
    assert.equal(result.result.timed_out, true);
    assert.equal(result.result.exit_code, 124);
    assert.doesNotMatch(result.result.output, /never/);
    assert.ok(seconds >= 1 && seconds < 10, `it ended after ${seconds.toFixed(1)} s`);
    const status = await t.app.inject({ method: 'GET', url: `${url}/commands/${result.command_id}`, headers: org.headers });
    assert.equal(status.json().state, 'timed_out');
    assert.equal(status.json().end_reason, 'no_output');
    // The background sleep went with it.
    const left = await run({ command: 'pgrep -x sleep || echo none' });
    assert.equal(left.result.result.output.trim(), 'none');
    // The audit trail says why it ended.
    await t.services.audit.flush();
    const audit = await t.app.inject({ method: 'GET', url: '/api/audit?action=command.run&limit=50', headers: org.headers });
    const event = (audit.json().events as { command_id: string; end_reason: string | null }[]).find((e) => e.command_id === result.command_id);
    assert.equal(event?.end_reason, 'no_output', audit.body);
  });

  it('lets a command that prints every half second for 3 s finish under a 1 s limit', async () => {
    const { result, seconds } = await run({ command: 'for i in 1 2 3 4 5 6; do echo $i; sleep 0.5; done', idle_output_timeout_s: 1 });
    assert.equal(result.result.end_reason, 'exited', result.result.output);
    assert.equal(result.result.exit_code, 0);
    assert.equal(result.result.output, '1\n2\n3\n4\n5\n6\n');
    assert.ok(seconds >= 3, `it ran ${seconds.toFixed(1)} s`);
  });

  it('counts stderr as output, and the time limit still ends a chatty command as time_limit', async () => {
    const chatty = await run({ command: 'while true; do echo tick >&2; sleep 0.2; done', idle_output_timeout_s: 1, timeout_s: 3 });
    assert.equal(chatty.result.result.end_reason, 'time_limit');
    assert.match(chatty.result.result.stderr, /tick/);
  });
});
