// CommandInputs: input for a running command goes through its current connection; input
// sent while a pause has closed that connection waits for the next one (the command's
// attach again after the resume), and is refused once the command has ended.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { AgentChannel } from '../../src/runtimes/agent/client.ts';
import { CommandInputs } from '../../src/runtimes/gvisor/command-inputs.ts';

/** A connection that records what is sent on it while open. */
function channel(open = true) {
  const sent: string[] = [];
  const fake = {
    isOpen: open,
    sent,
    send(_type: number, payload?: Buffer) {
      if (!fake.isOpen) return false;
      sent.push(payload === undefined ? '<close>' : payload.toString());
      return true;
    },
    drained: () => Promise.resolve(),
  };
  return fake;
}
const asChannel = (c: ReturnType<typeof channel>) => c as unknown as AgentChannel;

describe('CommandInputs', () => {
  it('sends input and a close through the current connection', async () => {
    const inputs = new CommandInputs();
    const c = channel();
    inputs.set('cmd', asChannel(c));
    assert.equal(await inputs.send('cmd', Buffer.from('a')), true);
    assert.equal(await inputs.send('cmd', null), true);
    assert.deepEqual(c.sent, ['a', '<close>']);
  });

  it('holds input sent on a closed connection for the next one', async () => {
    const inputs = new CommandInputs();
    const first = channel();
    inputs.set('cmd', asChannel(first));
    first.isOpen = false;
    const sending = inputs.send('cmd', Buffer.from('after the pause'));
    await new Promise((r) => setTimeout(r, 20));
    const second = channel();
    inputs.set('cmd', asChannel(second));
    assert.equal(await sending, true);
    assert.deepEqual(first.sent, []);
    assert.deepEqual(second.sent, ['after the pause']);
  });

  it('refuses input for a command that ended, also while it waited', async () => {
    const inputs = new CommandInputs();
    assert.equal(await inputs.send('unknown', Buffer.from('x')), false);
    const c = channel(false);
    inputs.set('cmd', asChannel(c));
    const sending = inputs.send('cmd', Buffer.from('x'));
    inputs.delete('cmd');
    assert.equal(await sending, false);
  });
});
