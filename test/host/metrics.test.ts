// GET /metrics against a real gVisor instance: a create, commands and a memory-guard
// kill move the figures they should, read with a Prometheus text-format parser; labels
// carry route patterns, never a URL's ids.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { PROVISION_STEPS } from '../../src/runtimes/types.ts';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';
import { type Scrape, scrape } from '../support/metrics.ts';

const MEMORY_MB = 256;
const COMMAND_ROUTE = '/api/profile/:profile_id/room/:room_id/command';

let t: TestApp;
let org: TestOrg;
let profileId: string;
let instanceId: string;
let before0: Scrape;

const room = `/api/profile/{p}/room/metrics`;
const url = (suffix = '') => `${room.replace('{p}', profileId)}${suffix}`;

async function command(payload: Record<string, unknown>) {
  const res = await t.app.inject({ method: 'POST', url: url('/command'), headers: org.headers, payload });
  assert.ok(res.statusCode === 200 || res.statusCode === 202, res.body);
  return res.json();
}

before(async () => {
  t = await startTestApp({ gvisorPool: '10.229.0.0/24' });
  t.gvisor();
  org = await t.newOrg();
  profileId = await t.createProfile(org, { name: 'metrics', memory_mb: MEMORY_MB, disk_mb: 1024, network: { egress: 'none' } });
  before0 = await scrape(t.app);
  const created = await t.app.inject({ method: 'POST', url: url(), headers: org.headers });
  assert.equal(created.statusCode, 201, created.body);
  instanceId = created.json().instance_id;
});

after(async () => {
  await t.closeLeavingNothing();
});

describe('/metrics after a create', () => {
  it('counts the create, its duration and the time of each provisioning phase', async () => {
    const now = await scrape(t.app);
    assert.equal(now.value('roomkit_instance_creates_total', { outcome: 'ready' }) - before0.value('roomkit_instance_creates_total', { outcome: 'ready' }), 1);
    const total = now.histogram('roomkit_instance_create_duration_seconds');
    assert.equal(total.count, 1);
    assert.ok(total.sum > 0 && total.sum < 300, `create took ${total.sum} s`);
    let phases = 0;
    for (const phase of PROVISION_STEPS) {
      const h = now.histogram('roomkit_instance_create_phase_duration_seconds', { phase });
      assert.equal(h.count, 1, phase);
      phases += h.sum;
    }
    // The phases are the create, step by step: together no longer than it.
    assert.ok(phases > 0 && phases <= total.sum + 0.001, `phases ${phases} s, create ${total.sum} s`);
  });

  it('shows the instance as ready and the memory its profile asked for as committed', async () => {
    const now = await scrape(t.app);
    assert.equal(now.value('roomkit_instances', { state: 'ready' }), 1);
    assert.equal(now.value('roomkit_instances', { state: 'active' }), 0);
    assert.equal(now.value('roomkit_instances_memory_committed_bytes'), MEMORY_MB * 1024 * 1024);
  });
});

describe('/metrics around commands', () => {
  it('counts commands running while they run, and their durations by how they ended', async () => {
    const start = await scrape(t.app);
    const background = await command({ command: 'sleep 30', background: true });
    const running = await scrape(t.app);
    assert.equal(running.value('roomkit_commands_running') - start.value('roomkit_commands_running'), 1);

    const done = await command({ command: 'sleep 0.3; echo done' });
    assert.equal(done.result.output, 'done\n');
    const kill = await t.app.inject({ method: 'POST', url: url(`/commands/${background.command_id}/kill`), headers: org.headers, payload: {} });
    assert.equal(kill.statusCode, 200, kill.body);

    const end = await scrape(t.app);
    assert.equal(end.value('roomkit_commands_running'), start.value('roomkit_commands_running'));
    const exited = end.histogram('roomkit_command_duration_seconds', { state: 'exited' });
    const exitedBefore = start.histogram('roomkit_command_duration_seconds', { state: 'exited' });
    assert.equal(exited.count - exitedBefore.count, 1);
    assert.ok(exited.sum - exitedBefore.sum >= 0.3, `the command took ${exited.sum - exitedBefore.sum} s`);
    assert.equal(end.histogram('roomkit_command_duration_seconds', { state: 'killed' }).count, 1);
  });

  it('counts requests by route pattern and status, with their latency, and no id in any label', async () => {
    const start = await scrape(t.app);
    await command({ command: 'true' });
    const missing = await t.app.inject({ method: 'GET', url: url('/file/no-such-file'), headers: org.headers });
    assert.equal(missing.statusCode, 404);
    const now = await scrape(t.app);
    const posted = { method: 'POST', route: COMMAND_ROUTE, status: '200' };
    assert.equal(now.value('roomkit_http_requests_total', posted) - start.value('roomkit_http_requests_total', posted), 1);
    assert.ok(now.histogram('roomkit_http_request_duration_seconds', { method: 'POST', route: COMMAND_ROUTE }).count >= 1);
    const notFound = { method: 'GET', route: '/api/profile/:profile_id/room/:room_id/file/*', status: '404' };
    assert.equal(now.value('roomkit_http_requests_total', notFound), 1);
    assert.equal(now.value('roomkit_http_errors_total', { code: 'file_not_found' }) - start.value('roomkit_http_errors_total', { code: 'file_not_found' }), 1);
    for (const id of [instanceId, profileId, org.organizationId]) assert.ok(!now.text.includes(id), `the metrics name ${id}`);
  });
});

describe('/metrics and the memory guard', () => {
  it('counts the process the guard killed when the instance passed its memory', async () => {
    const start = await scrape(t.app);
    const balloon = await command({ command: 'python3 -c \'l = []\nwhile True: l.append(b"x" * 1048576)\'', timeout_s: 120 });
    assert.equal(balloon.result.exit_code, 137, balloon.result.output);
    const now = await scrape(t.app);
    const kills = (s: Scrape) => s.value('roomkit_memory_guard_kills_total', { kind: 'largest_process' });
    assert.ok(kills(now) - kills(start) >= 1, `kills: ${kills(start)} -> ${kills(now)}`);
  });
});

describe('/metrics after a delete', () => {
  it('shows no live instance and no memory committed', async () => {
    const deleted = await t.app.inject({ method: 'DELETE', url: url(), headers: org.headers });
    assert.equal(deleted.statusCode, 200, deleted.body);
    const now = await scrape(t.app);
    assert.equal(now.value('roomkit_instances', { state: 'ready' }), 0);
    assert.equal(now.value('roomkit_instances_memory_committed_bytes'), 0);
  });
});
