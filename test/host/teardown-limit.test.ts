// A sandbox's host memory limit during a teardown, with real gVisor sandboxes: while a
// process inside allocates memory, a DELETE tears the instance down, and the sandbox's
// v1 memory cgroup, read every millisecond meanwhile, keeps its limit for as long as any
// of its processes still runs; it is removed only once none is left.
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { sandboxMemoryLimitMb } from '../../src/runtimes/gvisor/bundle.ts';
import { memoryCgroupDir, processesOf } from '../../src/runtimes/gvisor/cgroups.ts';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';

const POOL = '10.231.0.64/26';
const MEMORY_MB = 256;

let t: TestApp;
let org: TestOrg;
let profile: string;
const room = (name: string) => `/api/profile/${profile}/room/${name}`;

before(async () => {
  t = await startTestApp({ gvisorPool: POOL });
  org = await t.newOrg();
  profile = await t.createProfile(org, { name: 'teardown', memory_mb: MEMORY_MB, disk_mb: 512, network: { egress: 'none' } });
});
after(() => t.closeLeavingNothing());

interface Sample {
  limit: number | null;
  running: number;
}

/** Whether the pid is a process that is not a zombie. */
function isRunning(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

describe('tearing down an instance', () => {
  it('keeps the sandbox\'s host memory limit while any of its processes runs', async (ctx) => {
    const created = await t.app.inject({ method: 'POST', url: room('a'), headers: org.headers, payload: {} });
    assert.equal(created.statusCode, 201, created.body);
    const id = created.json().instance_id as string;
    const dir = memoryCgroupDir(id);
    if (!existsSync(dir)) return ctx.skip('no v1 memory cgroup on this host');
    const limit = (sandboxMemoryLimitMb(MEMORY_MB)) * 1024 * 1024;
    assert.equal(Number(readFileSync(`${dir}/memory.limit_in_bytes`, 'utf8')), limit);
    // Guest root allocates steadily in the background (below memory_mb, so the memory guard leaves it be).
    const balloon = 'import time\nl = []\nfor i in range(200):\n    l.append(b"x" * 1048576)\n    time.sleep(0.005)\ntime.sleep(600)';
    const started = await t.app.inject({
      method: 'POST',
      url: `${room('a')}/command`,
      headers: org.headers,
      payload: { command: `sudo python3 -c '${balloon}'`, background: true },
    });
    assert.equal(started.statusCode, 202, started.body);
    await sleep(300);

    const samples: Sample[] = [];
    const sample = () => {
      let value: number | null = null;
      try {
        value = Number(readFileSync(`${dir}/memory.limit_in_bytes`, 'utf8'));
      } catch {
        // Removed.
      }
      samples.push({ limit: value, running: (processesOf(id) ?? []).filter(isRunning).length });
    };
    sample();
    const timer = setInterval(sample, 1);
    try {
      const deleted = await t.app.inject({ method: 'DELETE', url: room('a'), headers: org.headers });
      assert.equal(deleted.statusCode, 200, deleted.body);
      sample();
      await t.gvisor().releasesSettled();
      sample();
    } finally {
      clearInterval(timer);
    }
    assert.ok(samples[0]!.running > 0, 'the sandbox ran when the delete began');
    const whileRunning = samples.filter((s) => s.running > 0);
    assert.ok(whileRunning.length > 0);
    for (const s of whileRunning) assert.equal(s.limit, limit, `the limit read ${s.limit} while ${s.running} processes ran`);
    const removedAt = samples.findIndex((s) => s.limit === null);
    assert.ok(removedAt > 0, 'the cgroup was removed by the release');
    assert.ok(samples.slice(removedAt).every((s) => s.running === 0), 'nothing ran once the cgroup was gone');
    assert.equal(samples.at(-1)!.limit, null);
  });
});
