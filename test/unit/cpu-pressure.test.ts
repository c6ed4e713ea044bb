// CPU pressure over the runtime test double (one that can freeze, whose instances use
// the CPU time the test sets): while the host's CPUs are busier than
// ROOMKIT_FREEZE_CPU_PERCENT, instances that are idle (no request for
// ROOMKIT_PRESSURE_IDLE_S, nothing running) and quiet (under QUIET_PERCENT of a core
// since the last check) are frozen; a busy, a working or a recently used one is not; a
// host that is not busy freezes nothing; 0 turns it off. The host's /proc/stat sampler
// is checked on this machine's own figures. The freezing itself, on real sandboxes, is
// in test/host/cpu-pressure.test.ts.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { CpuPressure, QUIET_PERCENT } from '../../src/core/cpu-pressure.ts';
import { CpuSampler, readCpuTimes } from '../../src/host/cpu-stat.ts';
import { createLogger } from '../../src/log.ts';
import { FakeRuntime } from '../support/fake-runtime.ts';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';

class FreezableFakeRuntime extends FakeRuntime {
  override readonly capabilities = { network: false, diskLimit: false, interactive: false, pause: false, pauseMemory: false, snapshot: false, snapshotMemory: false, freeze: true };
  readonly frozen = new Set<string>();
  readonly cpuMs = new Map<string, number>();
  freeze(instanceId: string): boolean {
    this.frozen.add(instanceId);
    return true;
  }
  isFrozen(instanceId: string): boolean {
    return this.frozen.has(instanceId);
  }
  cpuUsedMs(instanceId: string): number | undefined {
    return this.cpuMs.get(instanceId) ?? 0;
  }
}

describe('CPU pressure', () => {
  let t: TestApp;
  let org: TestOrg;
  let profile: string;
  const runtime = new FreezableFakeRuntime();
  const ids = new Map<string, string>();
  const busyIds = new Set<string>();
  let hostBusy: number | undefined = 90;
  let percent = 70;
  const pressure = () =>
    new CpuPressure({
      db: t.services.db,
      nodeId: t.services.nodeId,
      config: { freezeCpuPercent: percent, pressureIdleS: 60 },
      log: createLogger('silent'),
      runtime: () => runtime,
      busy: (id) => busyIds.has(id),
      sampler: { busyPercent: () => hostBusy },
    });
  const age = async (name: string, seconds: number) => {
    const at = new Date(Date.now() - seconds * 1000).toISOString();
    await t.services.db.updateTable('instances').set({ last_active_at: at }).where('id', '=', ids.get(name)!).execute();
  };

  before(async () => {
    t = await startTestApp({ fake: runtime });
    org = await t.newOrg();
    profile = await t.createProfile(org, { name: 'cpu' });
    for (const name of ['idle', 'working', 'recent', 'busy']) {
      const res = await t.app.inject({ method: 'POST', url: `/api/profile/${profile}/room/${name}?wait=true`, headers: org.headers, payload: {} });
      assert.equal(res.statusCode, 201, res.body);
      ids.set(name, res.json().instance_id);
    }
    for (const name of ['idle', 'working', 'busy']) await age(name, 600);
    busyIds.add(ids.get('busy')!);
  });
  after(() => t.close());

  it('freezes only idle, quiet instances while the host is busy, after one check to tell quiet ones', async () => {
    const cpu = pressure();
    const start = Date.now();
    assert.deepEqual(await cpu.relieve(start), [], 'the first check has no CPU figures of the instances yet');
    // 10 s later: "working" used 5 s of CPU (50% of a core), the others next to nothing.
    runtime.cpuMs.set(ids.get('working')!, 5_000);
    runtime.cpuMs.set(ids.get('idle')!, 300);
    assert.equal((300 * 100) / 10_000 < QUIET_PERCENT, true);
    const frozen = await cpu.relieve(start + 10_000);
    assert.deepEqual(frozen, [ids.get('idle')]);
    assert.equal(runtime.isFrozen(ids.get('idle')!), true);
    for (const name of ['working', 'recent', 'busy']) assert.equal(runtime.isFrozen(ids.get(name)!), false, name);
    assert.deepEqual(cpu.last, { busyPercent: 90, frozen: 1 });
    assert.equal(cpu.frozenCount, 1);
  });

  it('freezes nothing while the host is not busy, or when turned off', async () => {
    runtime.frozen.clear();
    const start = Date.now();
    for (const [busy, threshold] of [[40, 70], [99, 0]] as const) {
      hostBusy = busy;
      percent = threshold;
      const cpu = pressure();
      await cpu.relieve(start);
      assert.deepEqual(await cpu.relieve(start + 10_000), [], `host ${busy}% busy, threshold ${threshold}`);
      assert.equal(runtime.frozen.size, 0);
    }
    hostBusy = 90;
    percent = 70;
  });

  it("reads the host's CPU times from /proc/stat", async () => {
    const times = readCpuTimes();
    assert.ok(times && times.total > 0 && times.busy >= 0 && times.busy <= times.total, JSON.stringify(times));
    const sampler = new CpuSampler();
    const until = Date.now() + 50;
    while (Date.now() < until) Math.sqrt(Math.random());
    const busy = sampler.busyPercent();
    assert.ok(busy === undefined || (busy >= 0 && busy <= 100), String(busy));
  });
});
