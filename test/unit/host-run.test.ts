// run(): what a program prints after its exit. runsc exec can report a program's exit
// before the sandbox has passed on its output, which then arrives on pipes that are
// still open; a caller that needs that output asks for a longer grace, and a program
// whose leftover processes hold the pipes open still answers within the grace.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { run } from '../../src/host/run.ts';

/** Exits at once; a process it leaves prints after 600 ms and then closes the pipe. */
const LATE = ['-c', '(sleep 0.6; echo late) & echo early'];

describe('run() after the program exits', () => {
  it('drops output later than the default grace of 250 ms (the positive control)', async () => {
    const result = await run('sh', LATE, { timeoutMs: 10_000 });
    assert.equal(result.code, 0);
    assert.equal(result.stdout, 'early\n');
  });

  it('keeps output that comes within outputGraceMs, and answers when the pipe closes, not at the end of the grace', async () => {
    const started = performance.now();
    const result = await run('sh', LATE, { timeoutMs: 10_000, outputGraceMs: 5_000 });
    assert.equal(result.stdout, 'early\nlate\n');
    assert.ok(performance.now() - started < 3_000, `took ${performance.now() - started} ms`);
  });

  it('answers within outputGraceMs when a leftover process holds the pipe open', async () => {
    const started = performance.now();
    const result = await run('sh', ['-c', 'sleep 4 & echo early'], { timeoutMs: 60_000, outputGraceMs: 1_000 });
    assert.equal(result.stdout, 'early\n');
    const took = performance.now() - started;
    assert.ok(took >= 1_000 && took < 5_000, `took ${took} ms`);
  });
});
