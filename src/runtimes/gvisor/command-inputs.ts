// The open stdin of running commands (started with stdinOpen), by command id: the
// connection their input goes through. A pause with memory closes a command's connection
// and its reattach after the resume opens another; input sent in between waits for that
// one (up to REATTACH_WAIT_MS) rather than being dropped on the closed connection.
import type { AgentChannel } from '../agent/client.ts';
import { FRAME } from '../agent/frames.ts';

/** How long input waits for its command's connection to be made again after a pause. */
const REATTACH_WAIT_MS = 30_000;

export class CommandInputs {
  private readonly channels = new Map<string, AgentChannel>();
  /** Input waiting for a command's next connection (or its end), by command id. */
  private readonly waiting = new Map<string, Set<() => void>>();

  /** The command's current connection (its start, or its attach again after a resume). */
  set(commandId: string, channel: AgentChannel): void {
    this.channels.set(commandId, channel);
    this.wakeWaiting(commandId);
  }

  /** The command has ended: it takes no more input. */
  delete(commandId: string): void {
    this.channels.delete(commandId);
    this.wakeWaiting(commandId);
  }

  /** Writes to (or closes, with null) the command's stdin; false when it runs no more or was not attached again in time. */
  async send(commandId: string, data: Buffer | null): Promise<boolean> {
    const deadline = Date.now() + REATTACH_WAIT_MS;
    for (;;) {
      const channel = this.channels.get(commandId);
      if (!channel) return false;
      if (data === null ? channel.send(FRAME.close) : channel.send(FRAME.input, data)) {
        await channel.drained();
        return true;
      }
      // Written into a socket with a full buffer: taken, once it drains.
      if (channel.isOpen) {
        await channel.drained();
        return true;
      }
      const left = deadline - Date.now();
      if (left <= 0) return false;
      await this.nextConnection(commandId, left);
    }
  }

  private nextConnection(commandId: string, timeoutMs: number): Promise<void> {
    return new Promise((resolve) => {
      const waiters = this.waiting.get(commandId) ?? new Set<() => void>();
      this.waiting.set(commandId, waiters);
      const done = () => {
        clearTimeout(timer);
        waiters.delete(done);
        if (waiters.size === 0 && this.waiting.get(commandId) === waiters) this.waiting.delete(commandId);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      waiters.add(done);
    });
  }

  private wakeWaiting(commandId: string): void {
    for (const done of [...(this.waiting.get(commandId) ?? [])]) done();
  }
}
