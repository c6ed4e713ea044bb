import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { KeyedSerial, Serial } from '../../src/lib/keyed-serial.ts';

/** A promise with its resolve and reject at hand. */
function deferred<T = void>(): { promise: Promise<T>; resolve: (v: T) => void; reject: (e: unknown) => void } {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

const tick = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('KeyedSerial', () => {
  it('runs work for one key one at a time, in the order asked', async () => {
    const serial = new KeyedSerial<string>();
    const events: string[] = [];
    const gates = [deferred(), deferred(), deferred()];
    const runs = gates.map((gate, i) =>
      serial.run('a', async () => {
        events.push(`start ${i}`);
        await gate.promise;
        events.push(`end ${i}`);
        return i;
      }),
    );
    await tick();
    assert.deepEqual(events, ['start 0']);
    gates[2]!.resolve();
    gates[1]!.resolve();
    await tick();
    assert.deepEqual(events, ['start 0'], 'later work waits for the first even when its own gate is open');
    gates[0]!.resolve();
    assert.deepEqual(await Promise.all(runs), [0, 1, 2]);
    assert.deepEqual(events, ['start 0', 'end 0', 'start 1', 'end 1', 'start 2', 'end 2']);
  });

  it('runs work for different keys side by side', async () => {
    const serial = new KeyedSerial<string>();
    const gate = deferred();
    const started: string[] = [];
    const a = serial.run('a', async () => {
      started.push('a');
      await gate.promise;
    });
    const b = serial.run('b', async () => {
      started.push('b');
    });
    await b;
    assert.deepEqual(started, ['a', 'b']);
    gate.resolve();
    await a;
  });

  it('lets the next work run after one failed, and hands the failure only to its caller', async () => {
    const serial = new KeyedSerial<string>();
    const failed = serial.run('a', async () => {
      throw new Error('boom');
    });
    const next = serial.run('a', async () => 'ran');
    await assert.rejects(failed, /boom/);
    assert.equal(await next, 'ran');
  });

  it('settles idle() when the work queued so far has ended, even when it failed, and forgets an idle key', async () => {
    const serial = new KeyedSerial<string>();
    const gate = deferred();
    const work = serial.run('a', async () => {
      await gate.promise;
      throw new Error('boom');
    });
    work.catch(() => {});
    assert.equal(serial.busy('a'), true);
    let idle = false;
    const waited = serial.idle('a').then(() => {
      idle = true;
    });
    await tick();
    assert.equal(idle, false);
    gate.resolve();
    await waited;
    assert.equal(idle, true);
    await tick();
    assert.equal(serial.busy('a'), false);
    await serial.idle('never-used');
  });
});

describe('Serial', () => {
  it('runs work one at a time in the order asked', async () => {
    const serial = new Serial();
    const events: number[] = [];
    const gate = deferred();
    const first = serial.run(async () => {
      await gate.promise;
      events.push(1);
    });
    const second = serial.run(async () => {
      events.push(2);
    });
    await tick();
    assert.deepEqual(events, []);
    gate.resolve();
    await Promise.all([first, second]);
    assert.deepEqual(events, [1, 2]);
  });
});
