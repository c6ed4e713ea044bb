// Pausing and resuming a gVisor instance. A pause that keeps memory (where the runtime
// can: its sandboxes run on gVisor's own network stack, see checkpoint.ts) flushes the
// guest's writes, saves the sandbox's state with `runsc checkpoint` (which ends it), and
// lets the sandbox go while everything else stays: the writable layer and the overlay
// root mounted over the image, the saved memory, and the network (the namespace, the veth
// pair, the egress rule and the address lease). A resume then only puts the guest's
// address back on the veth (a sandbox on its own network stack took it off) and
// `runsc restore`s the sandbox, instead of making the network and the mounts again (a
// hundred milliseconds and more on a busy host); its processes go on with their memory,
// pids and listening sockets (established TCP connections were dropped at the
// checkpoint: their peers see a reset). A files-only pause (asked, or where memory
// cannot be kept) stops the sandbox instead (its processes end), and its resume boots a
// new sandbox over the same layer, with the same address and agent key, as provisioning
// boots one. A network or mounts a resume does not find (the host restarted) are made
// again. A saved memory that cannot be restored is not the end of the instance: its
// resume falls back to that files-only boot and says why. A layer that keeps undo
// points (btrfs) keeps them across a pause.
//
// Both are idempotent and each step undoes or redoes cleanly, so a crash in the middle
// is settled by calling pause() again: whatever was half made is stopped and released,
// a sandbox that still runs is saved again, a whole saved memory from before is kept,
// a partial one is removed, and the layer is left as it was.
import { existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { mountBtrfsImage } from '../../host/btrfs.ts';
import { isMountPoint, mountDiskImage, mountOverlay } from '../../host/mounts.ts';
import type { RunResult } from '../../host/run.ts';
import type { ImageStore } from '../../images/builder.ts';
import { type EgressService, guestNameservers } from '../../network/egress/egress-service.ts';
import { allowEgress, revokeEgress } from '../../network/firewall.ts';
import { createNetns, createVethPair, netnsPath, setGuestAddress } from '../../network/netns.ts';
import type { AddressPool } from '../../network/pool.ts';
import type { AgentEndpoint } from '../agent/client.ts';
import type { MachineSpec, PauseOptions, PauseOutcome, ResumeOutcome } from '../types.ts';
import { removeCgroups } from './cgroups.ts';
import type { ExecOptions } from '../agent/commands.ts';
import { type BootingSandbox, checkReady, type Exec, waitForAgent, writeAgentKey, writeGuestConfig } from '../agent/boot.ts';
import type { InstanceHandle, InstanceMeta } from './instance-handle.ts';
import type { Runsc } from './runsc.ts';
import { checkpointSandbox, hasCheckpoint, removeCheckpoint, restoreSandbox, spendCheckpoint } from './checkpoint.ts';
import { stopMachine } from './teardown.ts';

/** How long the guest may take to flush its writes before its sandbox is stopped anyway. */
const FLUSH_TIMEOUT_MS = 10_000;
/** How long a resumed sandbox may take to answer (as at a create: agent/boot.ts's own deadlines apply inside). */
const RESUME_TIMEOUT_MS = 60_000;

/** What pausing and resuming need of the runtime that owns the instance. */
export interface PauseDeps {
  runsc: Runsc;
  pool: AddressPool;
  images: ImageStore;
  tag: string;
  dnsServers: string[];
  egress: EgressService;
  log: Logger;
  /** Whether this runtime's sandboxes can be checkpointed with their memory (capabilities.pauseMemory). */
  checkpoints: boolean;
  /** Runs a program in the instance, through its agent. */
  exec(instanceId: string, argv: string[], options: ExecOptions): Promise<RunResult>;
  /** The instance's agent, when it was made with one. */
  agentOf(h: InstanceHandle): AgentEndpoint | undefined;
  /** The sandbox being booted, for waitForAgent. */
  booting(h: InstanceHandle): BootingSandbox;
  /** Stops watching, guarding and tracking the instance (before its sandbox is stopped, so its end is not reported). */
  forget(instanceId: string): Promise<InstanceHandle>;
  /** The runtime keeps the handle again and guards the sandbox's memory (after `runsc create`). */
  remember(h: InstanceHandle, memoryMb: number): void;
  /** Watches the booted sandbox's process and the layer's changes, as after a create. */
  watch(h: InstanceHandle): Promise<void>;
  /** Whether the instance's sandbox runs, when this process watches it (from /proc, no host program); undefined when it does not. */
  runsNow(instanceId: string): boolean | undefined;
}

/** What a pause's background release did. */
export interface PauseRelease {
  /** The guest's address and route are back on the kept veth: a resume in this process need not put them there. */
  guestAddressBack: boolean;
}

/** Puts the lease's address back on the namespace's eth0 when the network is still there; whether it did. */
async function putGuestAddressBack(h: InstanceHandle, deps: PauseDeps): Promise<boolean> {
  if (!networkKept(h)) return false;
  const lease = await deps.pool.leaseOf(h.id);
  if (!lease) return false;
  await setGuestAddress(h.netns, lease);
  return true;
}

/** Whether the instance's namespace and veth are on the host (a host that restarted has lost them). */
function networkKept(h: InstanceHandle): boolean {
  return existsSync(netnsPath(h.netns)) && existsSync(`/sys/class/net/${h.hostIf}`);
}

/**
 * Pauses the instance: its files stay and, when asked and possible, its memory and
 * processes; else its processes end. `save: false` keeps a saved memory already there
 * but saves none of a running sandbox (undoing a resume). Safe to call on an instance in
 * any condition (running, half paused or resumed after a crash, already paused). Resolves once no
 * process of it runs (its network and mounts stay, for its resume); runsc's record and
 * the cgroups go once the dead sandbox has been reaped (at once under the subreaper,
 * host/subreaper.ts; else when the host's init gets to it, a second or more), in
 * `released`, which a resume waits for.
 */
export async function pauseInstance(
  h: InstanceHandle,
  deps: PauseDeps,
  options: PauseOptions & { save?: boolean },
): Promise<PauseOutcome & { released: Promise<PauseRelease> }> {
  const keepMemory = options.memory && deps.checkpoints;
  // When each step ended, in ms from the start, for the log (where a pause's time goes).
  const began = performance.now();
  const steps: Record<string, number> = {};
  const stepDone = (step: string) => {
    steps[step] = Math.round(performance.now() - began);
  };
  // The guest's writes are on the layer once its sync returns (so that a files-only
  // resume finds them, should the saved memory not restore); a sandbox that does not
  // answer (already stopped, or stuck) is stopped without, as a crash would leave it.
  const runs = deps.runsNow(h.id) ?? (await sandboxRuns(h, deps));
  if (runs) {
    try {
      await deps.exec(h.id, ['/bin/sync'], { as: 'root', timeoutMs: FLUSH_TIMEOUT_MS });
    } catch (err) {
      deps.log.warn({ instanceId: h.id, err }, 'could not flush the guest before pausing it');
    }
    stepDone('sync');
  }
  // Forgotten before the checkpoint ends the sandbox, so that its end is not reported.
  await deps.forget(h.id);
  stepDone('forget');
  if (keepMemory && runs && options.save !== false) {
    try {
      await checkpointSandbox(h, deps.runsc);
      stepDone('checkpoint');
    } catch (err) {
      deps.log.warn({ instanceId: h.id, err }, "could not save the instance's memory: it is paused with its files only");
    }
  }
  // A whole image is this pause's, or (after a crash) the one a resume had not finished
  // restoring: the state the instance was paused in. Anything else is not kept.
  const memoryKept = keepMemory && hasCheckpoint(h);
  if (!memoryKept) removeCheckpoint(h);
  await stopMachine(h, deps.runsc);
  stepDone('stopped');
  deps.log.debug({ instanceId: h.id, memoryKept, steps }, 'paused');
  // The rest goes on after the answer: runsc's record and the cgroups go (its delete
  // waits until the dead sandbox is reaped; the record must be gone before a sandbox of
  // the same id is made again, since after a checkpoint runsc still calls the ended
  // sandbox running), and the guest's address goes back on the kept veth (the sandbox's
  // network stack took it off), so that a resume finds the network as a create left it
  // and starts no host program for it.
  const released = (async (): Promise<PauseRelease> => {
    const [record, address] = await Promise.allSettled([deps.runsc.destroy(null, h.id).then(() => removeCgroups(h.id)), putGuestAddressBack(h, deps)]);
    if (record.status === 'rejected') throw record.reason;
    if (address.status === 'rejected') deps.log.warn({ instanceId: h.id, err: address.reason }, "could not put a paused instance's address back on its veth; its resume does");
    return { guestAddressBack: address.status === 'fulfilled' && address.value };
  })();
  // Unhandled only until a resume, a destroy or close() waits for it.
  released.catch((err: unknown) => deps.log.warn({ instanceId: h.id, err }, "could not remove a paused instance's sandbox record; its resume or the next start does"));
  return { memoryKept, released };
}

/**
 * Starts the paused instance again: from its saved memory when it has one, else (or
 * when that fails) by booting a new sandbox over its writable layer. On failure, what it
 * made is stopped and released again (the instance stays paused) and it rejects.
 */
export async function resumeInstance(
  h: InstanceHandle,
  spec: MachineSpec,
  deps: PauseDeps,
  log: Logger,
  pausedHere?: Promise<PauseRelease | undefined>,
): Promise<ResumeOutcome> {
  const meta = h.readMeta();
  if (!meta?.imageKey) throw new Error(`instance ${h.id} has no record of what it was made from; it cannot be resumed`);
  if (!meta.agentKey) throw new Error(`instance ${h.id} was made without roomkit's agent (by an older roomkit), the only way into it; it cannot be resumed: delete it and create it again`);
  if (!existsSync(h.diskImage)) throw new Error(`instance ${h.id} has no writable layer left; it cannot be resumed`);
  const rootfs = deps.images.rootfsOf(meta.imageKey);
  if (!existsSync(rootfs)) throw new Error(`the image instance ${h.id} was made from (${meta.imageKey}) is no longer in the image cache`);
  const signal = AbortSignal.timeout(RESUME_TIMEOUT_MS);
  const saved = hasCheckpoint(h);
  // When each step ended, in ms from the start, for the log (where a resume's time goes).
  const began = performance.now();
  const steps: Record<string, number> = {};
  const stepDone = (step: string) => {
    steps[step] = Math.round(performance.now() - began);
  };
  try {
    const lease = await deps.pool.allocate(h.id);
    stepDone('lease');
    // The network and the mounts do not depend on each other: both at once, each waited
    // for before a failure is thrown, so that the undo finds each done or not begun.
    const prepared = await Promise.allSettled([
      (async () => {
        // The pause's release (when this process paused it) must be done before a sandbox
        // of this id is made again; it also put the address back on the kept veth, and
        // left the egress rule as it was (no start of the service came in between).
        const release = await pausedHere?.catch(() => undefined);
        // The lease was kept, and the network with it unless the host restarted since: the
        // same address comes back on the veth (a sandbox on its own network stack took it off).
        const kept = networkKept(h);
        if (kept && release?.guestAddressBack && meta.egress === spec.network.egress && spec.network.egress !== 'allowlist') {
          stepDone('network');
          return;
        }
        if (kept) {
          await setGuestAddress(h.netns, lease);
        } else {
          await createNetns(h.netns);
          await createVethPair(h, lease);
        }
        // Added again even when the pause kept it: a start of the service in between made the
        // firewall's table anew (adding an element that is there changes nothing). A kept
        // rule the profile no longer allows is removed.
        if (spec.network.egress === 'allowlist' || meta.egress === 'allowlist') {
          await deps.egress.apply(h.id, h.hostIf, lease.guestAddress, spec.network, { fresh: !kept });
        } else if (spec.network.egress === 'internet') await allowEgress(deps.tag, h.hostIf);
        else if (kept && meta.egress !== 'none') await revokeEgress(deps.tag, h.hostIf);
        // A policy changed while it was paused is the one its teardown and next adopt find.
        if (meta.egress !== spec.network.egress || spec.network.egress === 'allowlist') h.writeMeta({ ...(meta as InstanceMeta), egress: spec.network.egress, network: spec.network });
        stepDone('network');
      })(),
      (async () => {
        // The pause kept them, unless the host restarted since (or a crash came between the two).
        if (isMountPoint(h.rootfs)) return;
        // The layer's own file system, as the create made it (btrfs when it keeps undo points).
        if (!isMountPoint(h.layer)) {
          if (meta.undoLayer) await mountBtrfsImage(h.diskImage, h.layer, spec.disk_mb);
          else await mountDiskImage(h.diskImage, h.layer, spec.disk_mb);
        }
        await mountOverlay({ lower: rootfs, upper: h.upper, work: h.work, target: h.rootfs });
        stepDone('mounts');
      })(),
    ]);
    for (const outcome of prepared) if (outcome.status === 'rejected') throw outcome.reason;
    const endpoint = deps.agentOf(h);
    if (!endpoint) throw new Error(`instance ${h.id} has no address or agent key on record; it cannot be resumed`);

    // A sandbox started with runsc's own root overlay (its default; runsc.ts turns it
    // off) left its file in the rootfs, and runsc refuses to start another over it.
    const filestore = join(h.rootfs, `.gvisor.filestore.${h.id}`);
    rmSync(filestore, { force: true });
    let memoryLost: string | undefined;
    if (saved && deps.checkpoints) {
      try {
        await restoreSandbox(h, deps.runsc);
        stepDone('restore');
        deps.remember(h, spec.memory_mb);
        // Watching the sandbox and its layer does not wait for the agent: both at once.
        const settled = await Promise.allSettled([
          waitForAgent(endpoint, signal, deps.booting(h)).then(() => stepDone('agent')),
          deps.watch(h).then(() => stepDone('watch')),
        ]);
        for (const outcome of settled) if (outcome.status === 'rejected') throw outcome.reason;
        // The layer moves on from here: this image would not match it again.
        dropImage(h, log);
        stepDone('image_set_aside');
        log.debug({ instanceId: h.id, steps }, 'resumed with its memory');
        return { memoryRestored: true };
      } catch (err) {
        memoryLost = err instanceof Error ? err.message : String(err);
        log.warn({ instanceId: h.id, err }, "could not restore the instance's saved memory: booting it over its files instead");
        await deps.forget(h.id);
        await stopMachine(h, deps.runsc);
        await deps.runsc.destroy(null, h.id);
        // The failed sandbox's network stack may have taken eth0's address.
        await setGuestAddress(h.netns, lease);
        rmSync(filestore, { force: true });
      }
    } else if (saved) {
      memoryLost = 'this runtime cannot restore saved memory (its sandboxes do not run on their own network stack)';
    }

    // The guest may have changed these; they are the host's to say, as at a create.
    writeGuestConfig(h.rootfs, guestNameservers(spec.network, deps.dnsServers, lease.guestAddress));
    writeAgentKey(h.rootfs, meta.agentKey);
    // The bundle (config.json) written at the create still says everything. runsc's
    // words go to the console log with its stdio: a failure carries their end.
    await deps.runsc.create(h.netns, h.id, h.bundle, h.consoleLog, h.pidFile).catch((err: unknown) => {
      const said = deps.booting(h).printed().trim().split('\n').slice(-3).join(' | ');
      throw new Error(`${err instanceof Error ? err.message : String(err)}${said ? `: ${said}` : ''}`);
    });
    deps.remember(h, spec.memory_mb);
    await deps.runsc.start(h.netns, h.id);
    const exec: Exec = (argv, options) => deps.exec(h.id, argv, options);
    // The hello checks readiness; a command checks it with an agent too old to.
    const { readinessChecked } = await waitForAgent(endpoint, signal, deps.booting(h), spec);
    const settled = await Promise.allSettled([readinessChecked ? undefined : checkReady(exec, spec), deps.watch(h)]);
    for (const outcome of settled) if (outcome.status === 'rejected') throw outcome.reason;
    // Only now: had this boot failed, the instance would stay paused with its saved
    // memory (as its record says) and the next resume would try it again.
    if (saved) dropImage(h, log);
    return { memoryRestored: false, ...(memoryLost === undefined ? {} : { memoryLost }) };
  } catch (err) {
    try {
      // What this resume started is stopped, not saved; a saved memory still here is kept for the next try.
      await (await pauseInstance(h, deps, { memory: true, save: false })).released;
    } catch (undoErr) {
      log.error({ instanceId: h.id, err: undoErr }, 'could not undo a failed resume; the next start settles it');
    }
    throw err;
  }
}

/** The instance's saved memory, no longer its state, set aside now and removed in the background. */
function dropImage(h: InstanceHandle, log: Logger): void {
  spendCheckpoint(h).catch((err: unknown) => log.warn({ instanceId: h.id, err }, "could not remove a resumed instance's saved memory; its delete does"));
}

/**
 * Whether runsc has a sandbox of this id whose process still runs (after a checkpoint
 * runsc's record goes on saying "running" for a sandbox that has ended).
 */
async function sandboxRuns(h: InstanceHandle, deps: PauseDeps): Promise<boolean> {
  const state = await deps.runsc.state(null, h.id);
  if (state?.status !== 'running' || state.pid <= 0) return false;
  try {
    process.kill(state.pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code !== 'ESRCH';
  }
}
