// Quotas per organization and host admission, over the runtime test double: the
// arithmetic at its edges, each quota refused exactly at its limit with the Error
// body's details, racing creates and commands, deletes that free a quota, another
// organization unaffected, the operator's overrides (CLI and /operator/) and
// GET /api/usage. The same with real sandboxes is in test/host/quotas.test.ts.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { admissibleCount, admissionBreach, countedMemoryMb, memoryRoomMb, underPressure } from '../../src/core/admission.ts';
import { PROFILE_DEFAULTS } from '../../src/core/profile-schema.ts';
import { instanceBreach, rateRetryAfterS, sumResources } from '../../src/core/quotas.ts';
import { sandboxMemoryLimitMb } from '../../src/runtimes/gvisor/bundle.ts';
import { startingMemoryMb } from '../../src/runtimes/gvisor/host-usage.ts';
import type { CommandOutcome, CommandRequest } from '../../src/runtimes/types.ts';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';
import { run } from '../support/cli.ts';
import { FakeRuntime } from '../support/fake-runtime.ts';

const LIMITS = { instances: 3, memory_mb: 4096, vcpus: 4, disk_mb: 8192, concurrent_commands: 2, commands_per_minute: 5, snapshots: 10 };
const ONE = { memory_mb: 1024, vcpus: 1, disk_mb: 2048 };

describe('quota arithmetic', () => {
  it('lets a request take exactly the rest of a quota, and not one unit more', () => {
    const use = { instances: 1, memory_mb: 3072, vcpus: 1, disk_mb: 2048 };
    assert.equal(instanceBreach(LIMITS, use, ONE), undefined);
    assert.deepEqual(instanceBreach(LIMITS, use, { ...ONE, memory_mb: 1025 }), { quota: 'memory_mb', limit: 4096, used: 3072, requested: 1025 });
    assert.deepEqual(instanceBreach(LIMITS, { ...use, instances: 3 }, ONE), { quota: 'instances', limit: 3, used: 3, requested: 1 });
    assert.deepEqual(instanceBreach(LIMITS, { ...use, vcpus: 4 }, ONE)?.quota, 'vcpus');
    assert.deepEqual(instanceBreach(LIMITS, { ...use, disk_mb: 6145 }, ONE)?.quota, 'disk_mb');
    assert.equal(instanceBreach({ ...LIMITS, instances: 0 }, { instances: 0, memory_mb: 0, vcpus: 0, disk_mb: 0 }, ONE)?.quota, 'instances');
  });

  it("weighs a fork's copies together: every copy counts, and the breach says how many were asked for", () => {
    const none = { instances: 0, memory_mb: 0, vcpus: 0, disk_mb: 0 };
    assert.equal(instanceBreach({ ...LIMITS, vcpus: 8 }, none, ONE, 3), undefined);
    assert.deepEqual(instanceBreach(LIMITS, none, ONE, 4), { quota: 'instances', limit: 3, used: 0, requested: 4 });
    assert.deepEqual(instanceBreach({ ...LIMITS, instances: 10 }, { ...none, memory_mb: 1024 }, ONE, 4), { quota: 'memory_mb', limit: 4096, used: 1024, requested: 4096 });
  });

  it('adds up what live instances hold from their rows', () => {
    const rows = [{ resources: ONE }, { resources: { memory_mb: 512, vcpus: 2, disk_mb: 100 } }];
    assert.deepEqual(sumResources(rows), { instances: 2, memory_mb: 1536, vcpus: 3, disk_mb: 2148 });
  });

  it('tells a rate-limited caller when the oldest command leaves the minute', () => {
    assert.equal(rateRetryAfterS(10_000, 10_000), 60);
    assert.equal(rateRetryAfterS(10_000, 69_001), 1);
    assert.equal(rateRetryAfterS(10_000, 50_500), 20);
    assert.equal(rateRetryAfterS(10_000, 80_000), 1);
  });

  it('admits while memory in use, the new one\'s estimate and the reserve fit in the share, and the disks in theirs, and no further', () => {
    const memory = { limitMb: 5000, inUseMb: 3000, reserveMb: 1000, hostFreeMb: 20_000 };
    const disk = { limitMb: 900, committedMb: 0, freeMb: 10_000, floorMb: 1024 };
    assert.equal(memoryRoomMb(memory), 1000);
    assert.equal(admissionBreach({ memory, disk, request: { memoryMb: 1000, diskMb: 900 } }), undefined);
    assert.deepEqual(admissionBreach({ memory, disk, request: { memoryMb: 1001, diskMb: 0 } }), {
      resource: 'memory', limitMb: 5000, inUseMb: 3000, reserveMb: 1000, roomMb: 1000, requestedMb: 1001, hostBound: false,
    });
    assert.equal(admissionBreach({ memory, disk, request: { memoryMb: 0, diskMb: 901 } })?.resource, 'disk');
    assert.equal(admissibleCount({ memory, disk }, { memoryMb: 400, diskMb: 100 }), 2);
    assert.equal(admissibleCount({ memory: { ...memory, inUseMb: 4000 }, disk }, { memoryMb: 400, diskMb: 100 }), 0);
  });

  it('lets disk be thin-provisioned past what is free, but never below the floor the file system keeps free', () => {
    const memory = { limitMb: 5000, inUseMb: 0, reserveMb: 0, hostFreeMb: 20_000 };
    // ROOMKIT_ADMIT_DISK_PERCENT 400 of 10 GB free: 40 GB of layers may be committed.
    const disk = { limitMb: 40_000, committedMb: 30_000, freeMb: 10_000, floorMb: 1024 };
    assert.equal(admissionBreach({ memory, disk, request: { memoryMb: 64, diskMb: 2048 } }), undefined);
    assert.equal(admissibleCount({ memory, disk }, { memoryMb: 64, diskMb: 2048 }), 4);
    const full = { ...disk, freeMb: 1000 };
    assert.deepEqual(admissionBreach({ memory, disk: full, request: { memoryMb: 64, diskMb: 2048 } }), { resource: 'disk_floor', freeMb: 1000, floorMb: 1024 });
    assert.equal(admissibleCount({ memory, disk: full }, { memoryMb: 64, diskMb: 2048 }), 0);
    // A resume takes no more disk: the floor does not refuse it.
    assert.equal(admissionBreach({ memory, disk: full, request: { memoryMb: 64, diskMb: 0 } }), undefined);
  });

  it('is bounded by what the host really has free, and says so', () => {
    // The share leaves 2000 MB, but other programs leave the host only 1500 MB above what it keeps free.
    const memory = { limitMb: 5000, inUseMb: 3000, reserveMb: 500, hostFreeMb: 1500 };
    assert.equal(memoryRoomMb(memory), 1000);
    const breach = admissionBreach({ memory, disk: { limitMb: 1, committedMb: 0, freeMb: 10_000, floorMb: 1024 }, request: { memoryMb: 1001, diskMb: 0 } });
    assert.equal(breach?.resource === 'memory' && breach.hostBound, true);
  });

  it('is under pressure once running instances eat into the reserve', () => {
    assert.equal(underPressure({ limitMb: 5000, inUseMb: 4000, reserveMb: 1000, hostFreeMb: 20_000 }), false);
    assert.equal(underPressure({ limitMb: 5000, inUseMb: 4001, reserveMb: 1000, hostFreeMb: 20_000 }), true);
    assert.equal(underPressure({ limitMb: 5000, inUseMb: 0, reserveMb: 1000, hostFreeMb: 999 }), true);
  });

  it('counts a running instance as measured, a starting one at least at its estimate, a paused one as nothing', () => {
    assert.equal(countedMemoryMb('ready', 23, 64, 1536), 23);
    assert.equal(countedMemoryMb('ready', undefined, 64, 1536), 1536, 'unmeasured: its limit');
    assert.equal(countedMemoryMb('vm_started', 10, 64, 1536), 64);
    assert.equal(countedMemoryMb('vm_booted', 90, 64, 1536), 90);
    assert.equal(countedMemoryMb('resuming', undefined, 64, 1536), 64);
    assert.equal(countedMemoryMb('paused', 5, 64, 1536), 0);
    assert.equal(countedMemoryMb('stopping', undefined, 64, 1536), 0);
  });

  it('starts a default gVisor instance at 64 MB, far below its 1536 MB limit: hundreds, not 13, on a 24 GiB host at 85%', () => {
    assert.equal(sandboxMemoryLimitMb(PROFILE_DEFAULTS.memory_mb), 1536);
    const start = startingMemoryMb(PROFILE_DEFAULTS);
    assert.equal(start, 64);
    // This machine: MemTotal 24,105 MB; 85% = 20,489 MB; less the default 2048 MB reserve.
    const host = { memory: { limitMb: 20_489, inUseMb: 0, reserveMb: 2048, hostFreeMb: 20_489 }, disk: { limitMb: 1_000_000, committedMb: 0, freeMb: 100_000, floorMb: 1024 } };
    assert.equal(admissibleCount(host, { memoryMb: start, diskMb: PROFILE_DEFAULTS.disk_mb }), 288);
    // Once started, 200 idle ones at about 25 MB each leave room for more.
    assert.equal(memoryRoomMb({ ...host.memory, inUseMb: 200 * 25 }) > start, true);
  });
});

/** Commands that run until released, to hold the concurrent-command quota. */
class HeldCommands extends FakeRuntime {
  private releases: (() => void)[] = [];
  override async runCommand(instanceId: string, request: CommandRequest): Promise<CommandOutcome> {
    if (!request.command.startsWith('hold')) return super.runCommand(instanceId, request);
    // It runs (and says so) until released.
    const { onStarted, ...rest } = request;
    onStarted?.({ streamsApart: false });
    await new Promise<void>((resolve) => this.releases.push(resolve));
    return super.runCommand(instanceId, rest);
  }
  finishHeld(): void {
    for (const r of this.releases.splice(0)) r();
  }
}

describe('quotas over the API', () => {
  let t: TestApp;
  let fake: HeldCommands;
  const room = (org: TestOrg, name: string) => `/api/profile/${org.defaultProfileId}/room/${name}`;
  const create = (org: TestOrg, name: string) => t.app.inject({ method: 'POST', url: room(org, name), headers: org.headers, payload: {} });
  const remove = (org: TestOrg, name: string) => t.app.inject({ method: 'DELETE', url: room(org, name), headers: org.headers });
  const command = (org: TestOrg, name: string, text: string, background = false) =>
    t.app.inject({ method: 'POST', url: `${room(org, name)}/command`, headers: org.headers, payload: { command: text, background } });
  const usage = async (org: TestOrg) => (await t.app.inject({ method: 'GET', url: '/api/usage', headers: org.headers })).json();

  before(async () => {
    fake = new HeldCommands();
    t = await startTestApp({
      fake,
      config: {
        quotaInstances: 3,
        quotaMemoryMb: 2560,
        quotaConcurrentCommands: 2,
        quotaCommandsPerMinute: 5,
        operatorToken: 'operator-token-for-tests-0123456789abcdef',
      },
    });
  });
  after(() => t.close());

  it('refuses the instance over the memory quota (403 quota_exceeded, with details) and not the one before it', async () => {
    const org = await t.newOrg();
    assert.equal((await create(org, 'm1')).statusCode, 201);
    assert.equal((await create(org, 'm2')).statusCode, 201);
    // 2048 of 2560 MB used; another 1024 would be 3072.
    const res = await create(org, 'm3');
    assert.equal(res.statusCode, 403, res.body);
    assert.equal(res.json().error, 'quota_exceeded');
    assert.deepEqual(res.json().details, { quota: 'memory_mb', limit: 2560, used: 2048, requested: 1024 });
    assert.match(res.json().message, /delete an instance.*ask the operator/);
    // Nothing was recorded for the refused room.
    assert.equal((await t.app.inject({ method: 'GET', url: room(org, 'm3'), headers: org.headers })).statusCode, 404);
    const small = await t.createProfile(org, { name: 'small', memory_mb: 512 });
    const fits = await t.app.inject({ method: 'POST', url: `/api/profile/${small}/room/s1`, headers: org.headers, payload: {} });
    assert.equal(fits.statusCode, 201, 'exactly the rest of the quota fits');
    const u = await usage(org);
    assert.deepEqual(u.quotas.memory_mb, { limit: 2560, used: 2560, source: 'default' });
    assert.deepEqual(u.quotas.instances, { limit: 3, used: 3, source: 'default' });
    assert.deepEqual(u.quotas.vcpus.used, 3);
    assert.deepEqual(u.quotas.disk_mb.used, 3 * 2048);
  });

  it('lets racing creates take a quota exactly, never more, and a delete frees it', async () => {
    const org = await t.newOrg();
    const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => create(org, `race-${i}`)));
    const codes = answers.map((a) => a.statusCode).sort();
    // 2560 MB hold two instances of 1024.
    assert.deepEqual(codes, [201, 201, 403, 403, 403, 403, 403, 403], answers.map((a) => a.body).join('\n'));
    const live = await t.services.db.selectFrom('instances').select('room_id').where('organization_id', '=', org.organizationId).execute();
    assert.equal(live.length, 2);
    const winner = live[0]!.room_id;
    assert.equal((await create(org, 'after')).statusCode, 403);
    assert.equal((await remove(org, winner)).statusCode, 200);
    assert.equal((await create(org, 'after')).statusCode, 201, 'the deleted instance gave its quota back');
    assert.equal((await usage(org)).quotas.instances.used, 2);
  });

  it('leaves another organization its own quotas', async () => {
    const full = await t.newOrg();
    await create(full, 'a');
    await create(full, 'b');
    assert.equal((await create(full, 'c')).statusCode, 403);
    const other = await t.newOrg();
    assert.equal((await create(other, 'a')).statusCode, 201);
    assert.equal((await usage(other)).quotas.memory_mb.used, 1024);
  });

  it('refuses the command over the concurrent quota (403) and the one over the per-minute quota (429, Retry-After)', async () => {
    const org = await t.newOrg();
    await create(org, 'cmd');
    await create(org, 'cmd2');
    assert.equal((await command(org, 'cmd', 'hold 1', true)).statusCode, 202);
    assert.equal((await command(org, 'cmd2', 'hold 2', true)).statusCode, 202);
    // Across instances: the third running command of the organization is refused.
    const busy = await command(org, 'cmd', 'echo three');
    assert.equal(busy.statusCode, 403, busy.body);
    assert.deepEqual(busy.json().details, { quota: 'concurrent_commands', limit: 2, used: 2, requested: 1 });
    assert.equal((await usage(org)).quotas.concurrent_commands.used, 2);
    fake.finishHeld();
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal((await usage(org)).quotas.concurrent_commands.used, 0);
    // Two started so far this minute; three more fit, the sixth does not.
    for (let i = 3; i <= 5; i++) assert.equal((await command(org, 'cmd', `echo ${i}`)).statusCode, 200, `command ${i}`);
    const sixth = await command(org, 'cmd', 'echo 6');
    assert.equal(sixth.statusCode, 429, sixth.body);
    assert.equal(sixth.json().error, 'commands_rate_exceeded');
    const { retry_after_s, ...details } = sixth.json().details;
    assert.deepEqual(details, { quota: 'commands_per_minute', limit: 5, used: 5, requested: 1 });
    assert.ok(retry_after_s >= 1 && retry_after_s <= 60, String(retry_after_s));
    assert.equal(sixth.headers['retry-after'], String(retry_after_s));
    assert.equal((await usage(org)).quotas.commands_per_minute.used, 5);
    // The refused command was not recorded.
    const history = await t.app.inject({ method: 'GET', url: `${room(org, 'cmd')}/commands`, headers: org.headers });
    assert.equal(history.json().commands.length, 4);
  });

  it('lets racing commands take the per-minute quota exactly', async () => {
    const org = await t.newOrg();
    // Only the per-minute quota is raced here: with two at once allowed, commands still
    // finishing when the next ones come would be refused for that instead (403).
    await t.services.quotas.setOverrides(org.organizationId, { concurrent_commands: 100 });
    await create(org, 'burst');
    const answers = await Promise.all(Array.from({ length: 9 }, (_, i) => command(org, 'burst', `echo ${i}`)));
    const codes = answers.map((a) => a.statusCode).sort();
    assert.deepEqual(codes, [200, 200, 200, 200, 200, 429, 429, 429, 429]);
  });

  it('takes the operator\'s overrides from the CLI at once, also while the service runs', async () => {
    const org = await t.newOrg('cli-quota-org');
    await create(org, 'one');
    await create(org, 'two');
    assert.equal((await create(org, 'three')).statusCode, 403);
    const set = await run(['orgs', 'quota', 'cli-quota-org', '--memory-mb', '8192', '--instances', '3', '--json', '--data-dir', t.dataDir]);
    assert.equal(set.code, 0, set.stderr);
    assert.deepEqual(JSON.parse(set.stdout).quotas.memory_mb, { limit: 8192, used: 2048, source: 'organization' });
    assert.equal((await create(org, 'three')).statusCode, 201);
    const four = await create(org, 'four');
    assert.equal(four.statusCode, 403);
    assert.deepEqual(four.json().details, { quota: 'instances', limit: 3, used: 3, requested: 1 });
    const back = await run(['orgs', 'quota', org.organizationId, '--instances', 'default', '--memory-mb', 'default', '--data-dir', t.dataDir]);
    assert.equal(back.code, 0, back.stderr);
    // The defaults the CLI shows are those of its own environment (here the built-in ones).
    assert.match(back.stdout, /memory_mb\s+3072\s+16384\s+default/);
    assert.equal((await usage(org)).quotas.memory_mb.limit, 2560, 'the service is back at its own default');
    const shown = await run(['orgs', 'usage', 'cli-quota-org', '--json', '--data-dir', t.dataDir], { env: { ROOMKIT_QUOTA_MEMORY_MB: '2560', ROOMKIT_QUOTA_INSTANCES: '3' } });
    const served = await usage(org);
    assert.deepEqual(JSON.parse(shown.stdout).quotas.memory_mb, served.quotas.memory_mb);
    assert.deepEqual(JSON.parse(shown.stdout).quotas.instances, served.quotas.instances);
    const missing = await run(['orgs', 'usage', 'no-such-org', '--data-dir', t.dataDir]);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /no organization named or with id "no-such-org"/);
  });

  it('takes the operator\'s overrides from /operator/ with the operator token, and nothing else', async () => {
    const org = await t.newOrg('op-quota-org');
    const operator = { authorization: 'Bearer operator-token-for-tests-0123456789abcdef' };
    const put = (headers: Record<string, string>, payload: unknown) =>
      t.app.inject({ method: 'PUT', url: '/operator/orgs/op-quota-org/quotas', headers, payload: payload as object });
    for (const headers of [{}, org.headers, { authorization: 'Bearer operator-token-for-tests-0123456789abcdeX' }]) {
      const res = await put(headers, { instances: 0 });
      assert.equal(res.statusCode, 401);
      assert.equal(res.json().error, 'invalid_operator_token');
    }
    assert.equal((await create(org, 'before')).statusCode, 201, 'the refused calls changed nothing');
    const res = await put(operator, { instances: 1, vcpus: null });
    assert.equal(res.statusCode, 200, res.body);
    assert.deepEqual(res.json().quotas.instances, { limit: 1, used: 1, source: 'organization' });
    assert.equal((await create(org, 'after')).statusCode, 403);
    assert.equal((await put(operator, { instances: -1 })).statusCode, 400);
    assert.equal((await put(operator, { nonsense: 1 })).statusCode, 400);
    const seen = await t.app.inject({ method: 'GET', url: `/operator/orgs/${org.organizationId}/usage`, headers: operator });
    assert.deepEqual(seen.json(), await usage(org));
    const capacity = await t.app.inject({ method: 'GET', url: '/operator/capacity', headers: operator });
    assert.equal(capacity.statusCode, 200, capacity.body);
    assert.ok(capacity.json().memory.committed_mb > 0);
    assert.equal((await t.app.inject({ method: 'GET', url: '/operator/orgs/nobody/usage', headers: operator })).json().error, 'organization_not_found');
  });
});

describe('the operator API without ROOMKIT_OPERATOR_TOKEN', () => {
  it('does not exist', async () => {
    const t = await startTestApp();
    try {
      const res = await t.app.inject({ method: 'GET', url: '/operator/capacity', headers: { authorization: 'Bearer x' } });
      assert.equal(res.statusCode, 404);
    } finally {
      await t.close();
    }
  });
});

describe('host admission over the runtime test double', () => {
  it('refuses with 503 capacity_exhausted and Retry-After past the memory share, and records nothing', async () => {
    // 1% of this host's memory holds one 128 MB instance (the double's use is its memory_mb) and not two.
    const t = await startTestApp({ config: { admitMemoryPercent: 1, admitReserveMb: 0 } });
    try {
      const org = await t.newOrg();
      const tiny = await t.createProfile(org, { name: 'tiny', memory_mb: 128 });
      const first = await t.app.inject({ method: 'POST', url: `/api/profile/${tiny}/room/a`, headers: org.headers, payload: {} });
      assert.equal(first.statusCode, 201, first.body);
      const refused = await t.app.inject({ method: 'POST', url: `/api/profile/${tiny}/room/b`, headers: org.headers, payload: {} });
      assert.equal(refused.statusCode, 503, refused.body);
      assert.equal(refused.json().error, 'capacity_exhausted');
      assert.equal(refused.headers['retry-after'], '30');
      assert.equal(refused.json().details.resource, 'memory');
      assert.equal(refused.json().details.committed_mb, 128);
      assert.equal(refused.json().details.requested_mb, 128);
      const rows = await t.services.db.selectFrom('instances').select('room_id').execute();
      assert.deepEqual(rows.map((r) => r.room_id), ['a']);
      assert.equal(t.runtime.live.size, 1);
    } finally {
      await t.close();
    }
  });
});
