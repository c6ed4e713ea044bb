// The memory benchmark's readings (bench/memory-sampler.ts): smaps_rollup, memory.stat,
// the roles of a sandbox's host processes, and the guest listing script, run here on the
// host's own /proc with the shell the guest uses.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { run } from '../../src/host/run.ts';
import { GUEST_SCRIPT, guestRole, hostRole, parseGuestView, parseMemoryStat, parseSmapsRollup } from '../../bench/memory-sampler.ts';

const ROLLUP = `55d7c8a3c000-7ffc1b9f5000 ---p 00000000 00:00 0                          [rollup]
Rss:               36892 kB
Pss:               16781 kB
Pss_Dirty:         10143 kB
Pss_Anon:           7044 kB
Pss_File:           6601 kB
Pss_Shmem:          3135 kB
Shared_Clean:      21228 kB
Shared_Dirty:       4480 kB
Private_Clean:      3276 kB
Private_Dirty:      7908 kB
Referenced:        36892 kB
Anonymous:          7048 kB
Swap:                  0 kB
SwapPss:               0 kB
`;

describe('memory benchmark readings', () => {
  it('reads RSS, PSS and private memory from smaps_rollup, in bytes, not the Pss_* breakdown', () => {
    assert.deepEqual(parseSmapsRollup(ROLLUP), { rss: 36892 * 1024, pss: 16781 * 1024, private: (3276 + 7908) * 1024 });
  });

  it('reads this process\'s own smaps_rollup: RSS at least PSS at least private, and more than nothing', () => {
    const own = parseSmapsRollup(readFileSync('/proc/self/smaps_rollup', 'utf8'));
    assert.ok(own.private > 0 && own.pss >= own.private && own.rss >= own.pss, JSON.stringify(own));
  });

  it('reads memory.stat of cgroup v1 and v2, and keeps total_* apart from the cgroup\'s own figures', () => {
    const v1 = parseMemoryStat('cache 8847360\nrss 12079104\nshmem 8204288\ntotal_rss 99\n');
    assert.equal(v1.get('rss'), 12079104);
    assert.equal(v1.get('cache'), 8847360);
    assert.equal(v1.get('total_rss'), 99);
    const v2 = parseMemoryStat('anon 1200\nfile 3400\nkernel 560\nshmem 10\n');
    assert.deepEqual([v2.get('anon'), v2.get('file'), v2.get('kernel'), v2.get('rss')], [1200, 3400, 560, undefined]);
  });

  it('tells runsc\'s sandbox, gofer and ptrace stubs apart by their command lines', () => {
    assert.equal(hostRole('runsc-sandbox\0--root=/x\0boot\0'), 'runsc-sandbox');
    assert.equal(hostRole('runsc-gofer\0--root=/x\0gofer\0'), 'runsc-gofer');
    assert.equal(hostRole(''), 'ptrace stubs');
    assert.equal(hostRole('runsc\0exec\0'), 'other');
    assert.deepEqual(['agent', 'python3', 'tini', 'sleep', 'bash'].map(guestRole), ['agent', 'root service', 'tini, sleep', 'tini, sleep', 'other']);
  });

  it('adds up the guest listing by role, and refuses one without the guest\'s meminfo', () => {
    const view = parseGuestView('mem MemTotal 1572864\nmem MemFree 1555024\nproc 1 0 14424 agent\nproc 7 1 14584 agent\nproc 18 1 16096 python3\n');
    assert.equal(view.inUse, (1572864 - 1555024) * 1024);
    assert.deepEqual(view.rssByRole, { agent: (14424 + 14584) * 1024, 'root service': 16096 * 1024, 'tini, sleep': 0, other: 0 });
    assert.throws(() => parseGuestView('proc 1 0 10 agent\n'), /MemTotal/);
  });

  it('the guest script lists the processes of a /proc with their RSS, leaving out the shell running it and what it starts', async () => {
    const result = await run('sh', ['-c', GUEST_SCRIPT], { timeoutMs: 30_000, maxOutputBytes: 16 * 1024 * 1024 });
    assert.equal(result.code, 0, result.stderr);
    const procs = result.stdout.split('\n').filter((l) => l.startsWith('proc ')).map((l) => l.split(' '));
    const own = procs.find((p) => p[1] === String(process.pid));
    assert.ok(own, 'this process is listed');
    assert.ok(Number(own[3]) > 0, `its RSS is read: ${own.join(' ')}`);
    // The shell is a child of this process; neither it nor any child of it is listed.
    assert.equal(procs.filter((p) => p[2] === String(process.pid)).length, 0, 'the listing shell is left out');
    const view = parseGuestView(result.stdout);
    assert.ok(view.inUse > 0);
  });
});
