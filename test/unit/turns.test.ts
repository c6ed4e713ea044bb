// Turns: work run a few at a time, in the order asked, a failure passing its turn on.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Turns } from '../../src/lib/turns.ts';

/** A promise and the functions that settle it. */
function deferred(): { promise: Promise<void>; resolve: () => void; reject: (err: Error) => void } {
  let resolve!: () => void;
  let reject!: (err: Error) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

describe('Turns', () => {
  it('runs at most `atOnce` at a time, the rest in the order asked, and a failure passes its turn on', async () => {
    const turns = new Turns(2);
    const gates = Array.from({ length: 5 }, () => deferred());
    const started: number[] = [];
    let running = 0;
    let most = 0;
    const results = gates.map((gate, i) =>
      turns.run(async () => {
        started.push(i);
        running++;
        most = Math.max(most, running);
        try {
          await gate.promise;
          return i;
        } finally {
          running--;
        }
      }),
    );
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(started, [0, 1]);
    gates[1]!.reject(new Error('failed'));
    await assert.rejects(results[1]!, /failed/);
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(started, [0, 1, 2]);
    for (const gate of gates) gate.resolve();
    assert.deepEqual(await Promise.all([results[0], results[2], results[3], results[4]]), [0, 2, 3, 4]);
    assert.deepEqual(started, [0, 1, 2, 3, 4]);
    assert.equal(most, 2);
  });

  it('runs at least one at a time', async () => {
    assert.equal(new Turns(0).atOnce, 1);
    assert.equal(await new Turns(0).run(async () => 'ran'), 'ran');
  });
});
