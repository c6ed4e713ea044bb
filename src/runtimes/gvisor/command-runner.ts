// Commands in a gVisor instance: the command path of the runtime. A command runs
// through the instance's agent (agent/commands.ts); its
// files_changed is the layer's change between its start and end (change-tracker.ts), on
// an undo layer with its undo point and journal entry (undo.ts); its end says whether
// the memory guard killed a process of it, whether the layer is full, and whether the
// instance went away under it. A command whose connection drops because its instance is
// being paused with its memory waits for the resume and attaches again from the output
// it has (the agent kept the rest); a pause that keeps no memory, or a delete, ends it.
// A snapshot with memory of a running instance drops its connections too (the
// checkpoint drops established TCP) while the sandbox goes on: its commands attach
// again as soon as the snapshot is done (across()).
// Reverts of one command (undo-revert.ts) and input to a running command's stdin
// (command-inputs.ts, which holds input sent during a pause for the reattach) are here too.
import { statfsSync } from 'node:fs';
import type { Logger } from 'pino';
import type { AgentChannel, AgentEndpoint } from '../agent/client.ts';
import type { CommandOutcome, CommandRequest, FileChangeEntry, RevertOutcome } from '../types.ts';
import { RuntimeFeatureUnavailable, UndoRefused } from '../types.ts';
import { AgentConnectionLost, type AgentCommandOptions, type AgentCommandOutcome, attachAgentCommand, COMMAND_MARKER, runAgentCommand } from '../agent/commands.ts';
import { readHeads } from '../agent/files.ts';
import type { LayerChangeTracking, LayerDiff } from '../layer-changes/tracking.ts';
import { CommandInputs } from './command-inputs.ts';
import type { InstanceHandle } from './instance-handle.ts';
import type { MemoryGuard } from './memory-guard.ts';
import { addMimeTypes } from '../layer-changes/mime-sniffing.ts';
import type { UndoPoints } from '../layer-changes/undo.ts';
import { revertCommand } from '../layer-changes/undo-revert.ts';

/** The exit code of a command whose instance went away under it (as SIGKILL gives). */
const KILLED_EXIT_CODE = 137;

/** How long the guest is given to see its commands' connections end before a pause goes on. */
const SUSPEND_SETTLE_MS = 200;

/** An instance's commands waiting for its sandbox to run again (CommandRunner.suspended). */
interface Suspension {
  resumed: Promise<boolean>;
  settle: (resumed: boolean) => void;
  done: boolean;
  byPause: boolean;
}

function suspension(byPause: boolean): Suspension {
  let settle!: (resumed: boolean) => void;
  const resumed = new Promise<boolean>((resolve) => (settle = resolve));
  const made: Suspension = { resumed, settle: (value) => { made.done = true; settle(value); }, done: false, byPause };
  return made;
}

/** How long after a snapshot a dropped connection of a command is taken for one the snapshot dropped. */
const ATTACH_WINDOW_MS = 2_000;

/** A writable layer with less than this free is full, for a command's end reason. */
const DISK_FULL_BYTES = 1024 * 1024;

/** What the command path needs of the runtime that owns the instances. */
export interface CommandRunnerDeps {
  log: Logger;
  changeTracker: LayerChangeTracking;
  undo: UndoPoints;
  memoryGuard: MemoryGuard;
  /** Whether the runtime still holds the instance (false once a delete began). */
  isHeld(instanceId: string): boolean;
  /** Whether the instance's sandbox ended by itself. */
  hasEnded(instanceId: string): boolean;
  /**
   * Runs an operation through the instance's agent, the one way into it; an agent that
   * cannot be reached fails it with RuntimeFeatureUnavailable, saying so.
   */
  withAgent<T>(h: InstanceHandle, operation: (endpoint: AgentEndpoint) => Promise<T>): Promise<T>;
  imageOf(h: InstanceHandle): { key: string; rootfs: string };
}

export class CommandRunner {
  private readonly deps: CommandRunnerDeps;
  /** Connections of running commands whose stdin stays open, by command id. */
  private readonly inputs = new CommandInputs();
  /** Per running command (by id): the instance whose memory guard killed a process of it. */
  private readonly memoryKilled = new Map<string, string>();
  /**
   * Instances being paused with their memory (or snapshotted with it): whether their
   * sandbox runs again with it, once known. `done` once settled: a snapshot's entry
   * stays a moment after (ATTACH_WINDOW_MS) for drops seen late. `byPause`: a pause
   * waits on it, whose resume settles it (a snapshot under way leaves it to that).
   */
  private readonly suspended = new Map<string, Suspension>();
  /** Commands whose connection a pause took and that cannot be reached again: they were interrupted. */
  private readonly pausedAway = new Set<string>();
  /** The connection each running command is carried on now, with its instance and its files_changed tracking. */
  private readonly carried = new Map<string, { instanceId: string; channel: AgentChannel; h: InstanceHandle; tracking: ChangeTracking; image?: { key: string; rootfs: string } }>();

  constructor(deps: CommandRunnerDeps) {
    this.deps = deps;
  }

  /** Forgets what it kept about an instance that is being torn down. */
  forget(instanceId: string): void {
    for (const [commandId, id] of this.memoryKilled) if (id === instanceId) this.memoryKilled.delete(commandId);
  }

  /**
   * The instance is about to be paused with its memory (before its connections end):
   * its commands' connections that drop wait for wake() rather than end.
   */
  async suspend(instanceId: string): Promise<void> {
    const current = this.suspended.get(instanceId);
    if (current?.done === false) {
      if (current.byPause) return;
      // A snapshot under way: what it drops waits for this pause's resume instead.
      current.byPause = true;
    } else {
      this.suspended.set(instanceId, suspension(true));
    }
    // Their connections are closed now, while the guest runs, rather than cut under the
    // checkpoint: a restore failed to bring back an agent whose command connections
    // were ended just before it. The agent keeps each command for the attach.
    const commands = [...this.carried.values()].filter((c) => c.instanceId === instanceId);
    for (const { channel } of commands) channel.close();
    if (commands.length > 0) await new Promise((r) => setTimeout(r, SUSPEND_SETTLE_MS));
    // The layer's watch, and the marks on it, end with the pause: what each command
    // changed so far is taken now, and what it changes after the resume from a new mark.
    for (const { h, tracking, image } of commands) {
      if (tracking.mark === undefined || !image) continue;
      const mark = tracking.mark;
      tracking.mark = undefined;
      tracking.earlier = await this.deps.changeTracker.diff(mark, h.upper, image).catch((err: unknown) => {
        this.deps.log.warn({ instanceId, err }, "could not read a command's changes before a pause: its files_changed is incomplete");
        return { changes: [], incomplete: true, method: 'walk' as const };
      });
    }
  }

  /**
   * Runs `hold`, which holds the instance's sandbox still and drops the connections
   * open into it while it goes on running (a snapshot with memory), with its commands'
   * dropped connections waiting for it to end rather than failing. Then `cut()` ends
   * the host's side of the connections it dropped (nothing in the guest answers them
   * any more), and those commands attach again from the output they have; should a
   * pause have begun meanwhile, after its resume. A sandbox that `hold` could not let
   * go on fails their attach: they end as interrupted. Unlike a pause, the connections
   * are not closed ahead: that would hold every snapshot up by SUSPEND_SETTLE_MS, and
   * the sandbox is not restored from this checkpoint.
   */
  async across<T>(instanceId: string, hold: () => Promise<T>, cut: () => void): Promise<T> {
    let own = this.suspended.get(instanceId);
    if (own?.done !== false) this.suspended.set(instanceId, (own = suspension(false)));
    try {
      return await hold();
    } finally {
      cut();
      if (!own.byPause && this.suspended.get(instanceId) === own) {
        own.settle(true);
        // A drop the host sees a little late still finds the snapshot's mark (reattach()).
        setTimeout(() => {
          if (this.suspended.get(instanceId) === own) this.suspended.delete(instanceId);
        }, ATTACH_WINDOW_MS).unref();
      }
    }
  }

  /**
   * The instance is running again with the memory it was paused with (`true`: its
   * commands attach again), or it will not be (a files-only pause, a lost memory, a
   * delete: they end as interrupted).
   */
  wake(instanceId: string, resumed: boolean): void {
    const suspension = this.suspended.get(instanceId);
    if (!suspension) return;
    this.suspended.delete(instanceId);
    suspension.settle(resumed);
  }

  /** Ends every wait for a resume (the runtime is closing). */
  wakeAll(): void {
    for (const instanceId of [...this.suspended.keys()]) this.wake(instanceId, false);
  }

  /** The memory guard killed processes of these commands in the instance (their outcome says out of memory). */
  noteMemoryKill(instanceId: string, commandIds: readonly string[]): void {
    for (const commandId of commandIds) this.memoryKilled.set(commandId, instanceId);
  }

  /** Runs a command in the instance, with its files_changed and, on an undo layer, its undo point and journal entry. */
  async run(h: InstanceHandle, request: CommandRequest): Promise<CommandOutcome> {
    const instanceId = h.id;
    const undoLayer = h.readMeta()?.undoLayer === true;
    if (request.keepUndo && !undoLayer) throw new RuntimeFeatureUnavailable('this instance\'s writable layer cannot keep undo points: set keep_undo on its profile, then delete the instance and create it again');
    // Every command of an undo layer is journaled (a later one can make a revert ambiguous).
    if (undoLayer) await this.deps.undo.beforeCommand(h, request.commandId, request.keepUndo === true);
    const image = request.trackChanges ? this.deps.imageOf(h) : undefined;
    const tracking: ChangeTracking = { mark: image ? await this.deps.changeTracker.mark(h.id, h.upper) : undefined };
    let outcome: CommandOutcome | undefined;
    try {
      outcome = await this.runTracked(h, request, tracking, image);
      return outcome;
    } catch (err) {
      if (tracking.mark !== undefined) this.deps.changeTracker.discard(tracking.mark);
      throw err;
    } finally {
      if (undoLayer) await this.deps.undo.afterCommand(h, request.commandId, outcome?.changes ?? null).catch((err: unknown) => this.deps.log.warn({ instanceId, err }, 'could not journal a command\'s changes'));
    }
  }

  /** Puts back what a command run with an undo point changed (undo-revert.ts). */
  async revert(h: InstanceHandle, commandId: string, options: { force: boolean }): Promise<RevertOutcome> {
    if (h.readMeta()?.undoLayer !== true) {
      throw new UndoRefused('no_undo_point', 'this instance\'s writable layer keeps no undo points (its profile has no keep_undo): none of its commands can be reverted');
    }
    const image = this.deps.imageOf(h);
    return this.deps.withAgent(h, (endpoint) => revertCommand({
      h,
      commandId,
      force: options.force,
      undo: this.deps.undo,
      walker: () => this.deps.changeTracker.walkerBinary(),
      rootfs: image.rootfs,
      endpoint,
      track: async (work) => {
        const before = await this.deps.changeTracker.mark(h.id, h.upper);
        try {
          await work();
        } catch (err) {
          this.deps.changeTracker.discard(before);
          throw err;
        }
        const diff = await this.deps.changeTracker.diff(before, h.upper, image);
        await this.addMimeTypes(h, diff.changes);
        return { changes: diff.changes, changesMethod: diff.method };
      },
    }));
  }

  /** Types the changed files; a failure leaves those not typed by their extension without a type (the command itself is done). */
  private async addMimeTypes(h: InstanceHandle, changes: FileChangeEntry[]): Promise<void> {
    try {
      await addMimeTypes(changes, (paths, bytes) => this.deps.withAgent(h, (endpoint) => readHeads(endpoint, paths, bytes)));
    } catch (err) {
      this.deps.log.warn({ instanceId: h.id, err }, 'could not read the first bytes of changed files for their types');
    }
  }

  private async runTracked(
    h: InstanceHandle,
    request: CommandRequest,
    tracking: ChangeTracking,
    image: { key: string; rootfs: string } | undefined,
  ): Promise<CommandOutcome> {
    const instanceId = h.id;
    const script = request.cwd === undefined ? request.command : `cd -- ${shellQuote(request.cwd)} || exit 1\n${request.command}`;
    // A program given as such starts without a shell; in a working directory of its own,
    // a shell only changes to it and becomes the program, parsing none of its words.
    const argv =
      request.argv === undefined
        ? ['/bin/sh', '-c', script]
        : request.cwd === undefined
          ? request.argv
          : ['/bin/sh', '-c', 'cd -- "$1" || exit 1; shift; exec "$@"', 'sh', request.cwd, ...request.argv];
    const env = { LANG: 'C.UTF-8', ...request.env, [COMMAND_MARKER]: request.commandId };
    const outcome = await this.deps.withAgent(h, (endpoint) =>
      this.agentCommand(h, endpoint, {
        argv,
        identity: { as: 'vm', home: request.home },
        env: Object.entries(env).map(([k, v]) => `${k}=${v}`),
        commandId: request.commandId,
        timeoutMs: request.timeoutMs,
        ...(request.idleOutputTimeoutMs ? { idleOutputMs: request.idleOutputTimeoutMs } : {}),
        maxOutputBytes: request.maxOutputBytes,
        ...(request.onOutput ? { onOutput: request.onOutput } : {}),
        ...(request.stdin ? { input: request.stdin } : {}),
        ...(request.stdinOpen ? { stdinOpen: true } : {}),
        onStarted: (channel: AgentChannel) => {
          this.carried.set(request.commandId, { instanceId, channel, h, tracking, ...(image ? { image } : {}) });
          if (request.stdinOpen) this.inputs.set(request.commandId, channel);
          request.onStarted?.({ streamsApart: true });
        },
        reattach: (offset: number) => this.reattach(h, endpoint, request.commandId, offset),
        onReattached: (channel: AgentChannel) => {
          this.carried.set(request.commandId, { instanceId, channel, h, tracking, ...(image ? { image } : {}) });
          if (request.stdinOpen) this.inputs.set(request.commandId, channel);
        },
      }).finally(() => {
        this.inputs.delete(request.commandId);
        this.carried.delete(request.commandId);
      }),
    );
    const streams = {
      stdout: { text: outcome.stdout, bytes: outcome.stdoutBytes, truncated: outcome.stdoutTruncated },
      stderr: { text: outcome.stderr, bytes: outcome.stderrBytes, truncated: outcome.stderrTruncated },
    };
    // Whether the memory guard ended a process of it: a kill under way is waited for.
    await this.deps.memoryGuard.settled(instanceId);
    const outOfMemory = this.memoryKilled.get(request.commandId) === instanceId;
    this.memoryKilled.delete(request.commandId);
    // Gone: its sandbox ended, or a delete began (which forgets the handle first).
    const gone = () => this.deps.hasEnded(instanceId) || !this.deps.isHeld(instanceId);
    let instanceGone = outcome.interrupted === true || gone();
    let changes: FileChangeEntry[] | null = null;
    let changesIncomplete = false;
    let changesMethod: CommandOutcome['changesMethod'];
    // A sandbox that ended takes its file system with it soon: no changes are read.
    if (tracking.mark !== undefined && image && !instanceGone) {
      try {
        const diff = mergeDiffs(tracking.earlier, await this.deps.changeTracker.diff(tracking.mark, h.upper, image));
        ({ changes, incomplete: changesIncomplete, method: changesMethod } = diff);
        if (diff.walkedBecause) this.deps.log.info({ instanceId, commandId: request.commandId, reason: diff.walkedBecause }, 'files_changed made by a walk of the layer');
        await this.addMimeTypes(h, changes);
      } catch (err) {
        // A delete that began while the changes were read ends the command; nothing else does.
        if (!gone()) throw err;
        instanceGone = true;
        changes = null;
      }
    } else if (tracking.mark !== undefined) {
      this.deps.changeTracker.discard(tracking.mark);
    }
    return {
      output: outcome.output,
      outputBytes: outcome.outputBytes,
      outputTruncated: outcome.outputTruncated,
      streams,
      exitCode: outcome.exitCode,
      timedOut: outcome.timedOut,
      ...(outcome.noOutput ? { noOutput: true } : {}),
      changes,
      changesIncomplete,
      ...(changesMethod ? { changesMethod } : {}),
      outOfMemory,
      diskFull: !instanceGone && layerFull(h.layer),
      instanceGone,
    };
  }

  /**
   * A command through the agent. When the connection ends before the command does and
   * the instance is gone (deleted, or its sandbox ended), or a pause took it (reattach()
   * could not reach it again), that is the command's end, with the output it had
   * printed; otherwise the agent failed, and so does the command.
   */
  private async agentCommand(h: InstanceHandle, endpoint: AgentEndpoint, options: AgentCommandOptions): Promise<AgentCommandOutcome & { interrupted?: boolean }> {
    try {
      return await runAgentCommand(endpoint, options);
    } catch (err) {
      if (!(err instanceof AgentConnectionLost)) throw err;
      await new Promise((r) => setTimeout(r, 200)); // the sandbox's end may take a moment to be seen
      const interrupted = options.commandId !== undefined && this.pausedAway.delete(options.commandId);
      if (!interrupted && this.deps.isHeld(h.id) && !this.deps.hasEnded(h.id)) throw err;
      return { ...err.partial, exitCode: KILLED_EXIT_CODE, signal: null, timedOut: false, noOutput: false, interrupted: true };
    }
  }

  /** A terminal's dropped connection, attached again as a command's is (its terminal id is its command id). */
  reattachTerminal(h: InstanceHandle, endpoint: AgentEndpoint, terminalId: string, offset: number): Promise<AgentChannel | null> {
    return this.reattach(h, endpoint, terminalId, offset, false);
  }

  /**
   * A dropped connection of a command whose instance is being paused with its memory
   * (or snapshotted with it): once it runs again, a new connection to the command from `offset` (the agent kept
   * what came after). Null when the connection dropped for another reason, or the
   * memory did not come back, or the agent no longer has the command; a command lost to
   * a pause is then interrupted even though its instance runs (a lost memory's resume).
   */
  private async reattach(h: InstanceHandle, endpoint: AgentEndpoint, commandId: string, offset: number, command = true): Promise<AgentChannel | null> {
    // The pause marks the instance before it ends the connections: a drop without the
    // mark came from something else.
    const suspension = this.suspended.get(h.id);
    if (!suspension) return null;
    const lost = () => {
      if (command) this.pausedAway.add(commandId);
      return null;
    };
    if (!(await suspension.resumed)) return lost();
    const carried = this.carried.get(commandId);
    if (carried?.image && carried.tracking.earlier) {
      carried.tracking.mark = await this.deps.changeTracker.mark(h.id, h.upper).catch(() => undefined);
    }
    try {
      const attached = await attachAgentCommand(endpoint, { commandId, offset });
      if (attached.dropped > 0) this.deps.log.warn({ instanceId: h.id, commandId, droppedBytes: attached.dropped }, "part of a command's output across a pause was no longer kept by the agent");
      this.deps.log.info({ instanceId: h.id, commandId, offset: attached.offset }, 'attached again to a command after its instance resumed');
      return attached.channel;
    } catch (err) {
      this.deps.log.warn({ instanceId: h.id, commandId, err }, 'could not attach again to a command after its instance resumed');
      return lost();
    }
  }

  /** Writes to (or closes, with null) the stdin of a running command started with stdinOpen; false when none runs. */
  sendInput(commandId: string, data: Buffer | null): Promise<boolean> {
    return this.inputs.send(commandId, data);
  }


}

/**
 * A command's files_changed tracking: its mark on the layer, and (across a pause with
 * memory, which ends the layer's watch) what it had changed up to the pause.
 */
interface ChangeTracking {
  mark: number | undefined;
  earlier?: LayerDiff;
}

/**
 * What a command changed before a pause and after its resume, as one list. A file the
 * command created and then deleted is not listed; created and then changed is created;
 * deleted and then made again is modified. Not complete: what it changed between the
 * restore and the new mark is not seen, so the list says incomplete.
 */
export function mergeDiffs(earlier: LayerDiff | undefined, later: LayerDiff): LayerDiff {
  if (!earlier) return later;
  const byPath = new Map<string, FileChangeEntry>();
  for (const entry of earlier.changes) byPath.set(entry.path, entry);
  for (const entry of later.changes) {
    const first = byPath.get(entry.path);
    if (first?.status === 'created' && entry.status === 'deleted') byPath.delete(entry.path);
    else if (first?.status === 'created') byPath.set(entry.path, { ...entry, status: 'created' });
    else if (first?.status === 'deleted' && entry.status === 'created') byPath.set(entry.path, { ...entry, status: 'modified' });
    else byPath.set(entry.path, entry);
  }
  return { changes: [...byPath.values()], incomplete: true, method: later.method === 'walk' || earlier.method === 'walk' ? 'walk' : later.method };
}

/** Whether a writable layer is full: less than DISK_FULL_BYTES or no inode left. */
function layerFull(layer: string): boolean {
  try {
    const fs = statfsSync(layer);
    return fs.bavail * fs.bsize < DISK_FULL_BYTES || (fs.files > 0 && fs.ffree === 0);
  } catch {
    return false;
  }
}


/** Quotes a string for a POSIX shell. */
function shellQuote(value: string): string {
  return `'${value.replaceAll("'", "'\\''")}'`;
}
