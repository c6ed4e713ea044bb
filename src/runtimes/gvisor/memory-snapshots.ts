// Snapshots and forks with memory: a running sandbox's state saved while it goes on
// running, and new instances started from that state under their own id, bundle,
// network namespace and address.
//
// The sandbox's memory and its writable layer are taken at one instant: the guest
// flushes its writes (sync), `runsc pause` stops it, `runsc checkpoint --leave-running`
// saves its state and leaves it paused, the layer is copied, and `runsc resume` lets it
// go on (the copy comes after the checkpoint, so that anything the checkpoint itself
// writes out to the files is in it). Taken while it runs (a checkpoint that lets it go
// on, then the copy) the copy could hold writes the memory never made, and a restored
// process would find files that disagree with what it holds of them. A service that
// stops between the pause and the resume leaves the sandbox paused: the runtime resumes
// it when it adopts it (gvisor-runtime.ts's health).
//
// A restore is `runsc restore` of the saved state over the new instance's bundle, after
// its network namespace has its own address on its veth (runsc's network stack takes
// the interface's address and routes from there, not from the image): the restored
// processes answer at the new address; their established TCP connections were dropped
// at the checkpoint, their listeners stay. The agent in the restored memory read its key
// at its first boot and answers to the source's key only: the new instance takes that
// key (its record keeps it, and its file in the layer holds it, so that a later
// files-only boot of it uses it too).
//
// Restores run a few at a time (ROOMKIT_RESTORES_AT_ONCE, the host's CPU count by
// default): each costs a burst of CPU and page cache, and a fork into many rooms
// finishes sooner queued than all at once. All of a fork's copies restore from the one
// image in the snapshot's directory, read-only: its pages are read from disk once and
// then from the host's page cache.
import type { Logger } from 'pino';
import { Turns } from '../../lib/turns.ts';
import { checkpointInto, restoreFrom } from './checkpoint.ts';
import type { InstanceHandle } from './instance-handle.ts';
import type { Runsc } from './runsc.ts';

/**
 * Saves the running sandbox's state into `memoryDir` and, while it is held still, runs
 * `copyLayer`; the sandbox runs again before this resolves or rejects.
 */
export async function captureRunning(h: InstanceHandle, runsc: Runsc, memoryDir: string, copyLayer: () => Promise<void>, log: Logger): Promise<void> {
  await runsc.callChecked(h.netns, ['pause', h.id]);
  try {
    await checkpointInto(h, runsc, memoryDir, { leaveRunning: true });
    await copyLayer();
  } finally {
    await resumeSandbox(h, runsc, log);
  }
}

/** Lets a sandbox `runsc pause` held go on; a second try before giving up, since a sandbox left paused serves nothing. */
export async function resumeSandbox(h: InstanceHandle, runsc: Runsc, log: Logger): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    const result = await runsc.call(h.netns, ['resume', h.id]);
    if (result.code === 0) return;
    if (attempt >= 2) {
      log.error({ instanceId: h.id, stderr: result.stderr.trim() }, 'could not resume a sandbox held still for a snapshot');
      throw new Error(`the instance's sandbox could not be resumed after its snapshot: ${result.stderr.trim().split('\n').slice(-2).join(' | ')}`);
    }
  }
}

/** Restores a few sandboxes at a time, in the order asked. */
export class RestoreSlots {
  private readonly turns: Turns;

  constructor(atOnce: number) {
    this.turns = new Turns(atOnce);
  }

  /** Restores running at once. */
  get atOnce(): number {
    return this.turns.atOnce;
  }

  restore(h: InstanceHandle, runsc: Runsc, imageDir: string): Promise<void> {
    return this.turns.run(() => restoreFrom(h, runsc, imageDir));
  }
}
