// Terminals: interactive shells (or a command) on a pseudo-terminal in a room's
// instance, as the VM user, for as long as a client holds them open. This service owns
// every open terminal: it opens them within the per-instance limit, keeps their instance
// from idling out while they are open, closes idle ones, and ends them, with the reason,
// when their instance stops or the service shuts down. Ending a terminal hangs up its
// shell and then kills whatever the terminal started that is still running, so nothing
// of it outlives it. It knows nothing of WebSockets: adapters/rest/routes/terminal.ts carries a
// terminal over one. A terminal open when its instance is paused with its memory is
// let go without a hang-up: its shell goes on in the instance, and the client may attach
// to it again (by its id) within TERMINAL_REATTACH_MS of the instance running again.
// Somewhat over 400 lines: the open terminals and the ones let go at a pause share
// their counting, cleanup and ids, and stay together here.
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import { AppError } from '../errors.ts';
import { RuntimeFeatureUnavailable, type TerminalSession } from '../runtimes/types.ts';
import type { EndReason } from './instance-records.ts';
import type { Instances } from './instances.ts';
import { envOf } from './instance-options.ts';
import { noteOperation } from './operations.ts';
import { addressFacts, type InstanceAddress, roomRef } from './instance-address.ts';

/** Bounds of a terminal's size, in character cells; 80x24 unless asked. */
export const TERMINAL_SIZE = { minCols: 1, maxCols: 1000, minRows: 1, maxRows: 1000, defaultCols: 80, defaultRows: 24 } as const;
/** Longest command a terminal runs instead of the login shell, in UTF-8 bytes (it travels in the URL). */
export const MAX_TERMINAL_COMMAND_BYTES = 4096;
/** How long an ended terminal's shell has to exit after its hang-up before what is left is killed. */
const HANGUP_GRACE_MS = 2_500;
/** How long a terminal let go at a pause with memory may be attached again once its instance runs; then its shell is ended. */
export const TERMINAL_REATTACH_MS = 10 * 60_000;
/** How often terminals let go at a pause are looked at (attach window, instance gone). */
const DETACHED_SWEEP_MS = 15_000;

/** Why a terminal ended other than by its program exiting. */
export type TerminalEndReason =
  /** The client closed it (or went away). */
  | 'closed'
  /** Its instance is stopping (deleted, expired, stopped by the service) or its machine ended. */
  | 'instance_stopped'
  /** Its instance is being paused with its memory: the shell goes on, and the terminal can be attached again after the resume. */
  | 'instance_paused'
  /** Neither input nor output for ROOMKIT_TERMINAL_IDLE_TIMEOUT_S. */
  | 'idle'
  /** The service is shutting down. */
  | 'shutting_down'
  /** The connection to the instance's agent ended without the program's exit. */
  | 'lost';

export type TerminalEnd = { kind: 'exit'; exitCode: number } | { kind: 'ended'; reason: TerminalEndReason; message: string };

export interface TerminalOptions {
  cols?: number;
  rows?: number;
  /** Run by `sh -c` instead of the user's login shell. */
  command?: string;
  /** Attach again to this terminal, let go at a pause with memory, instead of opening one. */
  terminalId?: string;
}

/** An open terminal: its output, input and size; `ended` settles once, with why. */
export class Terminal {
  readonly id: string;
  readonly instanceId: string;
  readonly organizationId: string;
  readonly profileId: string;
  readonly roomId: string;
  readonly ended: Promise<TerminalEnd>;
  lastActivity = Date.now();
  private readonly session: TerminalSession;
  private settle!: (end: TerminalEnd) => void;
  private end: TerminalEnd | undefined;

  constructor(ids: { id: string; instanceId: string; organizationId: string; profileId: string; roomId: string }, session: TerminalSession) {
    this.id = ids.id;
    this.instanceId = ids.instanceId;
    this.organizationId = ids.organizationId;
    this.profileId = ids.profileId;
    this.roomId = ids.roomId;
    this.session = session;
    this.ended = new Promise((resolve) => (this.settle = resolve));
    void session.exited.then(({ exitCode }) =>
      // The runtime answers -1 when the agent's connection ended before the program did.
      this.finish(exitCode === -1 ? { kind: 'ended', reason: 'lost', message: "the connection to the instance's agent ended" } : { kind: 'exit', exitCode }),
    );
  }

  /** The terminal's output as it comes (one listener; what came before it is kept for it). */
  onOutput(listener: (chunk: Buffer) => void): void {
    this.session.onOutput((chunk) => {
      this.lastActivity = Date.now();
      listener(chunk);
    });
  }

  write(data: Buffer): void {
    if (this.end) return;
    this.lastActivity = Date.now();
    this.session.write(data);
  }

  resize(cols: number, rows: number): void {
    if (this.end) return;
    checkSize(cols, rows);
    this.session.resize(cols, rows);
  }

  /** Stops passing output on (a client that cannot keep up); the terminal's programs wait. */
  pause(): void {
    this.session.pause();
  }

  resume(): void {
    this.session.resume();
  }

  /** Ends the terminal (once; later calls and a later exit change nothing). */
  close(reason: TerminalEndReason = 'closed', message = 'the terminal was closed'): void {
    this.finish({ kind: 'ended', reason, message });
  }

  get isEnded(): boolean {
    return this.end !== undefined;
  }

  /** Lets the terminal's connection go without a hang-up: its shell goes on. */
  detach(): void {
    this.session.resume();
    this.session.detach();
  }

  /** Hangs up the terminal: its shell ends, the runtime kills what stays after a grace period. */
  hangUp(): void {
    this.session.resume();
    this.session.close();
  }

  /** Settles when the terminal's first process has ended (or the connection to it). */
  get processExited(): Promise<unknown> {
    return this.session.exited;
  }

  private finish(end: TerminalEnd): void {
    if (this.end) return;
    this.end = end;
    this.settle(end);
  }
}

export class Terminals {
  private readonly instances: Instances;
  private readonly config: Config;
  private readonly log: Logger;
  /** Terminals counted against each instance's limit: opening, open, or being cleaned up. */
  private readonly slots = new Map<string, number>();
  private readonly openByInstance = new Map<string, Set<Terminal>>();
  /** Each terminal's cleanup, until it is done. */
  private readonly cleanups = new Set<Promise<void>>();
  private readonly idleTimer: NodeJS.Timeout | undefined;
  /** Terminals let go at a pause with memory, by id: where they are, and since when their instance runs again. */
  private readonly detached = new Map<string, { instanceId: string; organizationId: string; readySince?: number }>();
  private readonly detachedTimer: NodeJS.Timeout;
  private closing = false;

  constructor(deps: { instances: Instances; config: Config; log: Logger }) {
    this.instances = deps.instances;
    this.config = deps.config;
    this.log = deps.log;
    // An instance with an open terminal is in use, whether or not anyone types.
    this.instances.addBusyCheck((instanceId) => (this.openByInstance.get(instanceId)?.size ?? 0) > 0);
    this.instances.onStopping((instanceId, why, pause) => this.endInstance(instanceId, why, pause?.keepsMemory === true));
    this.detachedTimer = setInterval(() => void this.sweepDetached(), DETACHED_SWEEP_MS);
    this.detachedTimer.unref();
    const idleS = deps.config.terminalIdleTimeoutS;
    if (idleS > 0) {
      this.idleTimer = setInterval(() => this.closeIdle(), Math.min(30_000, Math.max(1_000, (idleS * 1000) / 4)));
      this.idleTimer.unref();
    }
  }

  /** Terminals counted against an instance's limit now. */
  countIn(instanceId: string): number {
    return this.slots.get(instanceId) ?? 0;
  }

  /**
   * Checks what can be checked before a terminal is opened (a ready instance, the
   * limit), so that a client that will open it over a WebSocket, which shows it no HTTP
   * answer, hears of a refusal first.
   */
  async precheck(organizationId: string, profileId: string, roomId: string): Promise<void> {
    return this.precheckAt(roomRef(organizationId, profileId, roomId));
  }

  async precheckAt(address: InstanceAddress): Promise<void> {
    if (this.closing) throw new AppError('shutting_down', 'the server is shutting down; retry against a running server');
    const { row } = await this.instances.requireReadyAt(address);
    this.checkLimit(row.id);
  }

  private checkLimit(instanceId: string): void {
    const max = this.config.maxTerminalsPerInstance;
    const held = this.countIn(instanceId);
    if (held >= max) {
      throw new AppError(
        'too_many_terminals',
        `the instance already has ${held} terminals open, the most it keeps at once (ROOMKIT_MAX_TERMINALS_PER_INSTANCE = ${max}); close one first`,
        { limit: max },
      );
    }
  }

  /**
   * Opens a terminal in the room's ready instance. Refusals (no instance, not ready, the
   * instance cannot have terminals, too many open) are thrown as AppError.
   */
  async open(organizationId: string, profileId: string, roomId: string, options: TerminalOptions = {}): Promise<Terminal> {
    return this.openAt(roomRef(organizationId, profileId, roomId), options);
  }

  async openAt(address: InstanceAddress, options: TerminalOptions = {}): Promise<Terminal> {
    noteOperation('terminal.open', { ...addressFacts(address), command: options.command, ...(options.terminalId === undefined ? {} : { terminalId: options.terminalId }) });
    if (this.closing) throw new AppError('shutting_down', 'the server is shutting down; retry against a running server');
    const cols = options.cols ?? TERMINAL_SIZE.defaultCols;
    const rows = options.rows ?? TERMINAL_SIZE.defaultRows;
    checkSize(cols, rows);
    if (options.command !== undefined) checkCommand(options.command);
    const { row: instance, spec } = await this.instances.requireReadyAt(address);
    const runtime = this.instances.activeRuntime();
    const reattaching = options.terminalId;
    const kept = reattaching === undefined ? undefined : this.detached.get(reattaching);
    if (reattaching !== undefined && (kept === undefined || kept.instanceId !== instance.id || kept.organizationId !== instance.organization_id)) {
      throw terminalNotFound(reattaching);
    }
    this.checkLimit(instance.id);
    // Counted before the first await, so racing opens see it.
    this.slots.set(instance.id, this.countIn(instance.id) + 1);
    const id = reattaching ?? randomUUID();
    let session: TerminalSession;
    try {
      if (reattaching !== undefined) {
        if (!runtime.attachTerminal) throw terminalNotFound(reattaching);
        this.detached.delete(reattaching);
        session = await runtime.attachTerminal(instance.id, reattaching).catch((err: unknown) => {
          this.log.warn({ instanceId: instance.id, terminalId: reattaching, err }, 'could not attach again to a terminal');
          throw terminalNotFound(reattaching);
        });
        if (options.cols !== undefined || options.rows !== undefined) session.resize(cols, rows);
      } else {
        session = await runtime.openTerminal(instance.id, {
          terminalId: id,
          user: spec.user,
          home: spec.home,
          env: { ...spec.env, ...envOf(instance) },
          cols,
          rows,
          ...(options.command === undefined ? {} : { command: options.command }),
        });
      }
    } catch (err) {
      this.release(instance.id);
      if (err instanceof RuntimeFeatureUnavailable) throw this.unavailable(err);
      throw err;
    }
    const terminal = new Terminal({ id, instanceId: instance.id, organizationId: instance.organization_id, profileId: instance.profile_id, roomId: instance.room_id }, session);
    let set = this.openByInstance.get(instance.id);
    if (!set) this.openByInstance.set(instance.id, (set = new Set()));
    set.add(terminal);
    const log = this.log.child({ instanceId: instance.id, terminalId: id });
    log.info({ cols, rows, command: options.command !== undefined, reattached: reattaching !== undefined }, reattaching === undefined ? 'terminal opened' : 'terminal attached again');
    const cleanup = terminal.ended.then((end) => this.cleanUp(terminal, end, log));
    this.cleanups.add(cleanup);
    void cleanup.finally(() => this.cleanups.delete(cleanup));
    // Stopped while it opened: the stop's notice came before the terminal was listed.
    if (this.closing) terminal.close('shutting_down', 'the server is shutting down');
    else if (!(await this.instances.isReady(instance.id))) terminal.close('instance_stopped', 'the instance stopped while the terminal opened');
    return terminal;
  }

  /** Ends every terminal and waits until what they started has ended. */
  async close(): Promise<void> {
    this.closing = true;
    if (this.idleTimer) clearInterval(this.idleTimer);
    clearInterval(this.detachedTimer);
    for (const set of this.openByInstance.values()) for (const terminal of set) terminal.close('shutting_down', 'the server is shutting down');
    await Promise.allSettled([...this.cleanups]);
  }

  private endInstance(instanceId: string, why: EndReason, keepsMemory: boolean): void {
    const set = this.openByInstance.get(instanceId);
    if (!set) return;
    for (const terminal of set) {
      if (keepsMemory) {
        terminal.close(
          'instance_paused',
          `the instance is being paused with its memory (${why.reason}): the terminal's shell goes on; open the terminal again with terminal_id=${terminal.id} once it runs, within ${TERMINAL_REATTACH_MS / 60_000} minutes of its resume`,
        );
      } else {
        terminal.close('instance_stopped', `the instance is stopping: ${why.reason}`);
      }
    }
  }

  /**
   * Ends the shells of terminals let go at a pause that were not attached again within
   * TERMINAL_REATTACH_MS of their instance running, and forgets those whose instance is
   * gone or did not keep them (an attach then fails, as it would now).
   */
  private async sweepDetached(now = Date.now()): Promise<void> {
    for (const [terminalId, kept] of this.detached) {
      const state = await this.instances.stateOf(kept.instanceId).catch(() => undefined);
      if (state === 'ready') {
        kept.readySince ??= now;
        if (now - kept.readySince < TERMINAL_REATTACH_MS) continue;
        this.detached.delete(terminalId);
        const runtime = this.instances.activeRuntime();
        await runtime.killCommand(kept.instanceId, terminalId, 'HUP').catch(() => 0);
        await new Promise((resolve) => setTimeout(resolve, HANGUP_GRACE_MS).unref());
        await runtime.killCommand(kept.instanceId, terminalId, 'KILL').catch(() => 0);
        this.log.info({ instanceId: kept.instanceId, terminalId }, 'a terminal let go at a pause was not attached again in time: its shell was ended');
      } else if (state === 'paused' || state === 'pausing' || state === 'resuming') {
        kept.readySince = undefined;
      } else {
        this.detached.delete(terminalId);
      }
    }
  }

  private closeIdle(now = Date.now()): void {
    const idleMs = this.config.terminalIdleTimeoutS * 1000;
    for (const set of this.openByInstance.values()) {
      for (const terminal of set) {
        if (now - terminal.lastActivity >= idleMs) {
          terminal.close('idle', `no input or output for ${this.config.terminalIdleTimeoutS} s (ROOMKIT_TERMINAL_IDLE_TIMEOUT_S)`);
        }
      }
    }
  }

  /**
   * After a terminal ended: its shell is hung up (unless it exited), and once it has
   * ended or the grace period passed, whatever carries the terminal's marker is killed
   * (a `nohup` or `setsid` child ignores the hang-up). An instance that is stopping is
   * left to its teardown.
   */
  private async cleanUp(terminal: Terminal, end: TerminalEnd, log: Logger): Promise<void> {
    try {
      if (end.kind === 'ended' && end.reason === 'instance_paused') {
        // Its shell is kept for an attach after the resume: no hang-up, nothing killed.
        terminal.detach();
        this.detached.set(terminal.id, { instanceId: terminal.instanceId, organizationId: terminal.organizationId });
        return;
      }
      if (end.kind === 'ended') {
        terminal.hangUp();
        await Promise.race([terminal.processExited, new Promise((resolve) => setTimeout(resolve, HANGUP_GRACE_MS).unref())]);
      }
      if (end.kind === 'exit' || end.reason !== 'instance_stopped') {
        if (await this.instances.isReady(terminal.instanceId)) {
          await this.instances.activeRuntime().killCommand(terminal.instanceId, terminal.id, 'KILL');
          await this.instances.touch(terminal.instanceId);
        }
      }
    } catch (err) {
      log.warn({ err }, 'could not end everything a terminal started');
    } finally {
      this.openByInstance.get(terminal.instanceId)?.delete(terminal);
      if (this.openByInstance.get(terminal.instanceId)?.size === 0) this.openByInstance.delete(terminal.instanceId);
      this.release(terminal.instanceId);
      log.info(end.kind === 'exit' ? { exitCode: end.exitCode } : { reason: end.reason }, 'terminal ended');
    }
  }

  private release(instanceId: string): void {
    const n = (this.slots.get(instanceId) ?? 1) - 1;
    if (n <= 0) this.slots.delete(instanceId);
    else this.slots.set(instanceId, n);
  }

  private unavailable(err: RuntimeFeatureUnavailable): AppError {
    return new AppError('feature_unavailable', err.message);
  }
}

/** terminal_not_found: no terminal of this id can be attached again in the room's instance. */
function terminalNotFound(terminalId: string): AppError {
  return new AppError(
    'terminal_not_found',
    `no terminal ${terminalId} can be attached again in this room's instance: only a terminal let go at a pause with memory can, within ${TERMINAL_REATTACH_MS / 60_000} minutes of the resume; open a new one without terminal_id`,
    { terminal_id: terminalId },
  );
}

function checkSize(cols: number, rows: number): void {
  const { minCols, maxCols, minRows, maxRows } = TERMINAL_SIZE;
  if (!Number.isInteger(cols) || cols < minCols || cols > maxCols || !Number.isInteger(rows) || rows < minRows || rows > maxRows) {
    throw new AppError('validation_error', `a terminal's size must be ${minCols}-${maxCols} columns and ${minRows}-${maxRows} rows; got ${cols}x${rows}`);
  }
}

function checkCommand(command: string): void {
  if (command.trim() === '') throw new AppError('validation_error', 'command is empty; leave it out to start the login shell');
  if (Buffer.byteLength(command) > MAX_TERMINAL_COMMAND_BYTES) {
    throw new AppError('validation_error', `command is more than ${MAX_TERMINAL_COMMAND_BYTES} bytes; write long scripts to a file and run that`);
  }
  if (command.includes('\0')) throw new AppError('validation_error', 'command contains a NUL character, which a shell command cannot carry');
}
