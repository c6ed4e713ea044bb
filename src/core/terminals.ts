// Terminals: interactive shells (or a command) on a pseudo-terminal in a room's
// instance, as the VM user, for as long as a client holds them open. This service owns
// every open terminal: it opens them within the per-instance limit, keeps their instance
// from idling out while they are open, closes idle ones, and ends them, with the reason,
// when their instance stops or the service shuts down. Ending a terminal hangs up its
// shell and then kills whatever the terminal started that is still running, so nothing
// of it outlives it. It knows nothing of WebSockets: adapters/rest/routes/terminal.ts carries a
// terminal over one.
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

/** Why a terminal ended other than by its program exiting. */
export type TerminalEndReason =
  /** The client closed it (or went away). */
  | 'closed'
  /** Its instance is stopping (deleted, expired, stopped by the service) or its machine ended. */
  | 'instance_stopped'
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
  private closing = false;

  constructor(deps: { instances: Instances; config: Config; log: Logger }) {
    this.instances = deps.instances;
    this.config = deps.config;
    this.log = deps.log;
    // An instance with an open terminal is in use, whether or not anyone types.
    this.instances.addBusyCheck((instanceId) => (this.openByInstance.get(instanceId)?.size ?? 0) > 0);
    this.instances.onStopping((instanceId, why) => this.endInstance(instanceId, why));
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
    noteOperation('terminal.open', { ...addressFacts(address), command: options.command });
    if (this.closing) throw new AppError('shutting_down', 'the server is shutting down; retry against a running server');
    const cols = options.cols ?? TERMINAL_SIZE.defaultCols;
    const rows = options.rows ?? TERMINAL_SIZE.defaultRows;
    checkSize(cols, rows);
    if (options.command !== undefined) checkCommand(options.command);
    const { row: instance, spec } = await this.instances.requireReadyAt(address);
    const runtime = this.instances.activeRuntime();
    this.checkLimit(instance.id);
    // Counted before the first await, so racing opens see it.
    this.slots.set(instance.id, this.countIn(instance.id) + 1);
    const id = randomUUID();
    let session: TerminalSession;
    try {
      session = await runtime.openTerminal(instance.id, {
        terminalId: id,
        user: spec.user,
        home: spec.home,
        env: { ...spec.env, ...envOf(instance) },
        cols,
        rows,
        ...(options.command === undefined ? {} : { command: options.command }),
      });
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
    log.info({ cols, rows, command: options.command !== undefined }, 'terminal opened');
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
    for (const set of this.openByInstance.values()) for (const terminal of set) terminal.close('shutting_down', 'the server is shutting down');
    await Promise.allSettled([...this.cleanups]);
  }

  private endInstance(instanceId: string, why: EndReason): void {
    const set = this.openByInstance.get(instanceId);
    if (!set) return;
    for (const terminal of set) terminal.close('instance_stopped', `the instance is stopping: ${why.reason}`);
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
