// Tearing an instance down, in two parts. Stopping its machine is quick and awaited:
// every process of the sandbox's host cgroup (the sandbox, its gofer and the ptrace
// stubs) gets SIGKILL, and within milliseconds none of them runs, holds memory or keeps
// a file open. The cgroup keeps its memory limit throughout: it is removed only after
// runsc's delete has seen the processes gone (and the kernel refuses to remove a cgroup
// that still lists any). Releasing what it held on the host follows in the background: mounts,
// egress rule, veth and namespace (tens of milliseconds), then runsc's record and the
// cgroups, which only go once the dead processes are reaped (runsc's own delete waits
// for that; sandboxes started under host/subreaper.ts are reaped at once, others by the
// host's init), the instance's directory, and last its address lease.
//
// The lease row is the store's record that the instance still holds something on the
// host: the runtime's list() names every leased instance, so a sweep after a crash
// finishes a release the crash interrupted, and the address is never handed to another
// instance before its namespace and veth are gone. close() waits for every release
// under way.
//
// Why not `runsc delete --force` on the request's path: it kills the sandbox and then
// polls every 100 ms until the sandbox's pid is gone, and a killed process keeps its pid
// as a zombie until its parent, the host's init (runsc's sandboxes are daemons), reaps
// it. Measured on this host without the subreaper: the sandbox is a zombie 1 ms after
// SIGKILL, init reaps it about 1.2 s later, and `runsc delete` takes 1.3-1.5 s; under
// the subreaper the delete takes tens of milliseconds. Unmounts, rule, network and lease
// take about 130 ms more (docs/architecture.md, "Deleting an instance").
import { readFileSync, rmSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { unmountAll } from '../../host/mounts.ts';
import type { EgressService } from '../../network/egress/egress-service.ts';
import { revokeEgress } from '../../network/firewall.ts';
import { removeNetwork } from '../../network/netns.ts';
import type { AddressPool } from '../../network/pool.ts';
import { processesOf, removeCgroups, unfreezeMemory } from './cgroups.ts';
import type { InstanceHandle } from './instance-handle.ts';
import type { Runsc } from './runsc.ts';

/** How long the sandbox's processes may take to die after SIGKILL before runsc's own delete is asked to finish them. */
const KILL_DEADLINE_MS = 2_000;
/** How often the killed processes are looked at while they die. */
const KILL_POLL_MS = 2;
/** Pauses before a failed release is tried again; after the last, the next start's sweep finishes it. */
const RELEASE_RETRY_DELAYS_MS = [1_000, 5_000];

export interface TeardownDeps {
  runsc: Runsc;
  pool: AddressPool;
  /** The data directory's tag (firewall table and host names). */
  tag: string;
  /** Removes an allowlisted instance's rules and stops serving it. */
  egress: Pick<EgressService, 'release'>;
  log: Logger;
}

/** What destroy() hands back once an instance's machine is stopped. */
export interface Teardown {
  /** Settles when everything else the instance held is released; never rejects (a failure is logged and left to the next sweep). */
  released: Promise<void>;
}

interface Pending {
  stopped: Promise<void>;
  /** Rejects when the release failed after its retries. */
  released: Promise<void>;
}

/** The teardowns of one runtime: one per instance at a time, each stopped at once and released in the background. */
export class Teardowns {
  private readonly deps: TeardownDeps;
  private readonly pending = new Map<string, Pending>();

  constructor(deps: TeardownDeps) {
    this.deps = deps;
  }

  /**
   * Stops the instance's machine and starts releasing what it holds; resolves once the
   * machine is stopped. A teardown already under way for the instance is joined.
   */
  async begin(h: InstanceHandle): Promise<Teardown> {
    const pending = this.start(h);
    await pending.stopped;
    return { released: pending.released.catch(() => {}) };
  }

  /** Stops the instance and releases everything it holds; rejects when something could not be released. */
  async complete(h: InstanceHandle): Promise<void> {
    const pending = this.start(h);
    await pending.stopped;
    await pending.released;
  }

  /** Waits for every release under way (for a shutdown). */
  async settled(): Promise<void> {
    await Promise.allSettled([...this.pending.values()].map((p) => p.released));
  }

  private start(h: InstanceHandle): Pending {
    const existing = this.pending.get(h.id);
    if (existing) return existing;
    const stopped = stopMachine(h, this.deps.runsc);
    // The release starts on the next turn of the event loop, so that whatever waits for
    // the stop (a DELETE's answer) goes first: each host program it starts blocks the
    // loop while Node forks (25 ms each was measured on a busy host).
    const released = stopped.then(() => new Promise<void>((resolve) => setImmediate(resolve))).then(() => this.releaseWithRetries(h));
    const pending: Pending = { stopped, released };
    this.pending.set(h.id, pending);
    // Whatever the outcome, the next destroy() of this instance starts afresh.
    released.then(
      () => this.pending.delete(h.id),
      () => this.pending.delete(h.id),
    );
    return pending;
  }

  private async releaseWithRetries(h: InstanceHandle): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      try {
        await release(h, this.deps);
        return;
      } catch (err) {
        const delay = RELEASE_RETRY_DELAYS_MS[attempt];
        if (delay === undefined) {
          this.deps.log.error({ instanceId: h.id, err }, 'could not release what a stopped instance held; the next start finishes it');
          throw err;
        }
        this.deps.log.warn({ instanceId: h.id, err, retryInMs: delay }, 'releasing what a stopped instance held failed; trying again');
        await sleep(delay);
      }
    }
  }
}

/**
 * Kills every process of the sandbox's host cgroup and waits until none of them runs.
 * Without a cgroup (the sandbox was never made, or runsc put it elsewhere), or when a
 * process outlives the deadline, runsc's own delete stops whatever it started.
 */
export async function stopMachine(h: InstanceHandle, runsc: Runsc): Promise<void> {
  // A sandbox whose allocations wait at its memory ceiling (the guard turns the
  // kernel's OOM kill off) is let be killed by the kernel too; its limit stays until
  // none of its processes is left, so nothing in it can grow past it meanwhile.
  unfreezeMemory(h.id);
  if (processesOf(h.id) === null || !(await killCgroup(h.id))) {
    await runsc.destroy(null, h.id);
  }
}

/**
 * SIGKILL to every live process in the cgroup, again for any that appears meanwhile,
 * until none is left running (zombies are dead: they run nothing and hold no memory or
 * files); false when some still run at the deadline. Each pid is signalled right after
 * it was listed, and a member that exits stays listed (a zombie) until it is reaped, so
 * a stranger could only be hit if a member were reaped and its pid reused in between.
 */
async function killCgroup(instanceId: string): Promise<boolean> {
  const deadline = performance.now() + KILL_DEADLINE_MS;
  for (;;) {
    const live = (processesOf(instanceId) ?? []).filter(isRunning);
    if (live.length === 0) return true;
    if (performance.now() > deadline) return false;
    for (const pid of live) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // Gone since the listing.
      }
    }
    await sleep(KILL_POLL_MS);
  }
}

/**
 * Releases what a stopped instance holds, from what frees most to the record of it:
 * mounts, egress rule, veth and namespace, then (once runsc's delete, started at once,
 * has seen the processes reaped) runsc's record and the cgroups, the directory, the
 * lease. Each step is idempotent, so a retry or a sweep after a crash starts over.
 */
async function release(h: InstanceHandle, deps: TeardownDeps): Promise<void> {
  // runsc's delete mostly waits for the host's init: it runs beside the rest. It runs
  // in the host's namespace, since the instance's goes away meanwhile.
  const runscDeleted = deps.runsc.destroy(null, h.id);
  const hostSide = (async () => {
    await unmountAll(h.dir);
    // Only an instance with egress has rules; one without a record is checked.
    const egress = h.readMeta()?.egress;
    if (egress === 'internet') await revokeEgress(deps.tag, h.hostIf);
    else if (egress !== 'none') await deps.egress.release(h.id, h.hostIf);
    await removeNetwork(h);
  })();
  const [runsc, host] = await Promise.allSettled([runscDeleted, hostSide]);
  if (host.status === 'rejected') throw host.reason;
  if (runsc.status === 'rejected') throw runsc.reason;
  removeCgroups(h.id);
  rmSync(h.dir, { recursive: true, force: true });
  await deps.pool.release(h.id);
}

/** Whether a process with this pid exists and is not a zombie. */
function isRunning(pid: number): boolean {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return false;
  }
  const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
  return state !== 'Z' && state !== 'X';
}
