// What one instance can take of the host, whatever its guest root does: several real
// instances burst processes at once, as the VM user and through sudo as many users, and
// each sandbox's host tasks stay under its bound while the guest's forks fail with
// EAGAIN; the instances answer afterwards. A guest-root memory balloon is stopped by the
// memory guard, and its command says why it died.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { ROOT_SERVICE_TASKS } from '../../src/runtimes/agent/boot.ts';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';

let t: TestApp;
let org: TestOrg;
let profileId: string;

const room = (name: string) => `/api/profile/${profileId}/room/${name}`;

interface CommandAnswer {
  status: string;
  result: { output: string; exit_code: number; end_reason?: string | null };
}

async function run(name: string, command: string, timeout_s = 120): Promise<CommandAnswer> {
  const res = await t.app.inject({ method: 'POST', url: `${room(name)}/command`, headers: org.headers, payload: { command, timeout_s } });
  assert.equal(res.statusCode, 200, res.body);
  return res.json() as CommandAnswer;
}

/** Forks N children that sleep (small ones: memory is not what this tests), and prints how many forks worked and how many failed with EAGAIN. */
const burst = (n: number, sleepS: number) =>
  `python3 -c 'import os,time,errno
ok=failed=other=0
for i in range(${n}):
  try:
    if os.fork()==0:
      os.execv("/bin/sleep", ["sleep", "${sleepS}"])
    ok+=1
  except OSError as e:
    if e.errno==errno.EAGAIN: failed+=1
    else: other+=1
print("forked", ok, "eagain", failed, "other", other, flush=True)'`;

function counts(output: string): { forked: number; eagain: number }[] {
  return [...output.matchAll(/forked (\d+) eagain (\d+)/g)].map((m) => ({ forked: Number(m[1]), eagain: Number(m[2]) }));
}

const pidsFile = (id: string, file: string) => Number(readFileSync(`/sys/fs/cgroup/pids/roomkit/${id}/${file}`, 'utf8').trim().split(/\s+/).at(-1));

before(async () => {
  t = await startTestApp({ gvisorPool: '10.228.0.0/24' });
  t.gvisor();
  org = await t.newOrg();
  profileId = await t.createProfile(org, { name: 'limits', memory_mb: 1024, disk_mb: 512, network: { egress: 'none' }, command_timeout_s: 300 });
});

after(async () => {
  await t.closeLeavingNothing();
});

describe('host tasks of several instances bursting at once', () => {
  const names = ['burst-1', 'burst-2', 'burst-3'];
  const ids: string[] = [];
  /** Per instance: how many processes guest root's users had at once in the burst. */
  const sudoAtOnce = new Map<string, number>();

  before(async () => {
    for (const name of names) {
      const res = await t.app.inject({ method: 'POST', url: room(name), headers: org.headers });
      assert.equal(res.statusCode, 201, res.body);
      ids.push(res.json().instance_id);
    }
  });

  it('keeps each sandbox under its host task bound while the guest\'s forks fail with EAGAIN, and the instances answer after', async () => {
    const bound = t.services.config.maxHostTasksPerInstance;
    for (const id of ids) assert.equal(pidsFile(id, 'pids.max'), bound, 'the sandbox\'s host cgroup does not carry the configured bound');
    const threadsMax = Number(readFileSync('/proc/sys/kernel/threads-max', 'utf8'));
    const peaks = new Map<string, number>(ids.map((id) => [id, 0]));
    let hostPeak = 0;
    const sampler = setInterval(() => {
      for (const id of ids) peaks.set(id, Math.max(peaks.get(id) ?? 0, pidsFile(id, 'pids.current')));
      hostPeak = Math.max(hostPeak, Number(readFileSync('/proc/loadavg', 'utf8').split(' ')[3]?.split('/')[1]));
    }, 200);
    for (const name of names) {
      const cgroup = await run(name, 'sudo cat /proc/self/cgroup');
      assert.match(cgroup.result.output, /pids:\/sudo/);
    }
    const rounds = 1;
    const seen: string[] = [];
    try {
      for (let round = 0; round < rounds; round++) {
        await Promise.all(
          names.map(async (name) => {
            // The VM user, and guest root switching to three other users through sudo, at once.
            const [user, root] = await Promise.all([
              // After the sudo processes (the VM user's too) have forked, so that both bursts happen.
              run(name, `sleep 3; ${burst(300, 60)}`),
              run(name, `for u in 2001 2002 2003; do sudo setpriv --reuid=$u --regid=$u --clear-groups ${burst(150, 60)} & done; wait`),
            ]);
            // The children sleep far longer than the forks take, so what forked was there at once; now they go.
            await run(name, 'sudo pkill -KILL -x -u 1000,2001,2002,2003 sleep; echo ended');
            const [vm] = counts(user.result.output);
            const sudo = counts(root.result.output);
            seen.push(`${name} round ${round}: VM user ${JSON.stringify(vm)}, sudo ${JSON.stringify(sudo)}`);
            // Positive control: the burst happened and ran into the guest's limits.
            assert.ok(vm && vm.forked >= 100 && vm.eagain > 0, `round ${round}, the VM user's burst (exit ${user.result.exit_code}): ${user.result.output}`);
            assert.equal(sudo.length, 3, root.result.output);
            const sudoForked = sudo.reduce((n, c) => n + c.forked, 0);
            assert.ok(sudo.some((c) => c.eagain > 0), `no fork under sudo failed: ${root.result.output}`);
            assert.ok(sudoForked >= 128, `guest root's users forked only ${sudoForked}: the burst did not happen`);
            sudoAtOnce.set(name, sudoForked);
          }),
        );
        await new Promise((r) => setTimeout(r, 3000));
      }
    } finally {
      clearInterval(sampler);
      for (const id of ids) {
        const mem = (f: string) => { try { return readFileSync(`/sys/fs/cgroup/memory/roomkit/${id}/${f}`, 'utf8').trim(); } catch { return '?'; } };
        console.log(id, 'peak', pidsFile(id, 'pids.peak'), 'events', pidsFile(id, 'pids.events'), 'sampled', peaks.get(id), 'mem max', mem('memory.max_usage_in_bytes'), 'failcnt', mem('memory.failcnt'));
      }
    }
    for (const id of ids) {
      const peak = Math.max(peaks.get(id) ?? 0, pidsFile(id, 'pids.peak'));
      seen.push(`${id}: peak ${peak} host tasks, now ${pidsFile(id, 'pids.current')}`);
      assert.ok(peak < bound, `sandbox ${id} reached ${peak} host tasks; its bound is ${bound}`);
      assert.equal(pidsFile(id, 'pids.events'), 0, `sandbox ${id} hit its host task limit`);
    }
    seen.push(`host: peak ${hostPeak} tasks of threads-max ${threadsMax}`);
    console.log(seen.join('\n'));
    assert.ok(hostPeak < threadsMax / 4, `the host reached ${hostPeak} tasks (threads-max ${threadsMax})`);
    for (const name of names) {
      const alive = await run(name, 'echo alive');
      assert.equal(alive.result.output, 'alive\n');
    }
  });

  // Whatever users guest root switches to, everything under sudo shares one limit: the
  // pids group of gVisor's own cgroup file system that the agent puts its root service in.
  // runsc 20240729 lets the group go past its pids.max (each user's RLIMIT_NPROC still
  // binds, and the host's pids limit bounds the sandbox: the test above), so this check
  // reports as a known gap until the runtime enforces it again.
  it('holds every user under sudo to one shared process limit', { todo: 'runsc 20240729 does not enforce the pids.max of the root service\'s group (docs/architecture.md)' }, () => {
    assert.equal(sudoAtOnce.size, names.length, 'the burst above did not run');
    for (const [name, forked] of sudoAtOnce) assert.ok(forked <= ROOT_SERVICE_TASKS, `${name}: guest root's users had ${forked} processes at once`);
  });
});
