// One interpreter of a code context: an in-guest driver (images/guest/code-context.py,
// code-context.cjs for JavaScript, code-context-bash.py for bash)
// run through the runtime as a command of its own with its stdin kept open, as the
// instance's user and a child of the agent, so it lives across runs (and across a pause
// that keeps memory: the runtime attaches to it again). Requests go in as one JSON line
// on its stdin; its events come back as JSON lines on its stdout. It is not one of the
// room's commands (no record, no quota): it is the context's, and ends with it.
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { AppError } from '../errors.ts';
import { CODE_CONTEXT_BASH_DRIVER, CODE_CONTEXT_DRIVER, CODE_CONTEXT_JS_DRIVER } from '../images/guest-additions.ts';
import type { ContextLanguage } from './context-schema.ts';
import type { Runtime } from '../runtimes/types.ts';
import { appErrorOfRuntime } from './runtime-errors.ts';

/** An event of a run, as the driver sends it. */
export type DriverEvent =
  | { type: 'stdout' | 'stderr'; text: string }
  | { type: 'result'; [field: string]: unknown }
  | { type: 'error'; name: string; value: string; traceback: string }
  | { type: 'end'; execution_count: number }
  /** The code itself began to run: an interrupt reaches it from now on. */
  | { type: 'started' };

/** How long the driver has to say it is ready. */
const READY_WAIT_MS = 30_000;
/** What is kept of the driver's own stderr (its failures), for the message that says why it ended. */
const STDERR_KEPT = 4096;

/** The program each language's driver runs with (found on the PATH of the instance's user), its driver and what provides it. */
const INTERPRETERS: Record<ContextLanguage, { program: string; driver: string; needs: string }> = {
  python: { program: 'python3', driver: CODE_CONTEXT_DRIVER, needs: 'python3 (every Debian image has it)' },
  javascript: { program: 'node', driver: CODE_CONTEXT_JS_DRIVER, needs: 'node (Debian\'s nodejs package: add "nodejs" to the profile\'s packages)' },
  // A bash kept alive between runs by a python3 driver (bash has no line protocol of its own).
  bash: { program: 'python3', driver: CODE_CONTEXT_BASH_DRIVER, needs: 'python3 and bash (every Debian image has them)' },
};

export interface DriverStart {
  language: ContextLanguage;
  runtime: Runtime;
  instanceId: string;
  home: string;
  cwd: string;
  env: Record<string, string>;
  log: Logger;
}

export class ContextDriver {
  readonly commandId = randomUUID();
  private readonly runtime: Runtime;
  private readonly instanceId: string;
  private readonly log: Logger;
  private readonly language: ContextLanguage;
  private pending: Buffer = Buffer.alloc(0);
  private stderr = '';
  private listener: ((event: DriverEvent) => void) | undefined;
  /** Set once the driver's command has ended (or could not start). */
  exited = false;
  /** Settles when the driver's command has ended. */
  readonly ended: Promise<void>;
  private endListeners: (() => void)[] = [];

  private constructor(start: DriverStart) {
    this.runtime = start.runtime;
    this.instanceId = start.instanceId;
    this.log = start.log;
    this.language = start.language;
    this.ended = new Promise<void>((resolve) => this.endListeners.push(resolve));
  }

  /** Starts the driver and waits until it is ready; a cwd that does not exist is a validation_error. */
  static async start(start: DriverStart): Promise<ContextDriver> {
    const driver = new ContextDriver(start);
    let readyResolve!: () => void;
    let readyReject!: (err: Error) => void;
    const ready = new Promise<void>((resolve, reject) => {
      readyResolve = resolve;
      readyReject = reject;
    });
    driver.listener = (event) => {
      const e = event as unknown as { type: string; reason?: string; message?: string };
      if (e.type === 'ready') readyResolve();
      else if (e.type === 'failed') {
        readyReject(
          e.reason === 'cwd'
            ? new AppError('validation_error', `cwd ${e.message ?? ''}: the context's working directory must exist in the instance`)
            : new AppError('command_failed', `the code context could not start: ${e.message ?? ''}`),
        );
      }
    };
    void start.runtime
      .runCommand(start.instanceId, {
        commandId: driver.commandId,
        command: `${INTERPRETERS[start.language].program} ${INTERPRETERS[start.language].driver}`,
        argv: [INTERPRETERS[start.language].program, INTERPRETERS[start.language].driver, start.cwd],
        home: start.home,
        env: start.env,
        timeoutMs: 0,
        maxOutputBytes: 64 * 1024,
        stdinOpen: true,
        trackChanges: false,
        onOutput: (chunk, stream) => (stream === 'stderr' ? driver.keepStderr(chunk) : driver.take(chunk)),
      })
      .then(
        (outcome) => {
          driver.log.info({ exitCode: outcome.exitCode }, 'code context interpreter ended');
          readyReject(driver.endedError(`it exited with ${outcome.exitCode}`));
        },
        (err: unknown) => {
          driver.log.warn({ err }, 'code context interpreter could not run');
          readyReject(appErrorOfRuntime(err) ?? driver.endedError((err as Error).message));
        },
      )
      .finally(() => driver.markEnded());
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        ready,
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new AppError('command_failed', `the code context's interpreter did not start within ${READY_WAIT_MS / 1000} s`)), READY_WAIT_MS);
        }),
      ]);
    } catch (err) {
      await driver.kill();
      throw err;
    } finally {
      clearTimeout(timer);
    }
    driver.listener = undefined;
    return driver;
  }

  /** Why the driver is gone, in words: its own last words when it printed any. */
  private endedError(why: string): AppError {
    const said = this.stderr.trim();
    if (/can't open file|Cannot find module|executable file not found|not found/.test(said + why)) {
      const { needs } = INTERPRETERS[this.language];
      return new AppError(
        'feature_unavailable',
        `this instance cannot run a ${this.language} code context: its image needs ${needs} and roomkit's context driver (every image built by this version of roomkit has it)`,
      );
    }
    return new AppError('command_failed', `the code context's interpreter ended (${why})${said ? `: ${said.slice(-1000)}` : ''}`);
  }

  private markEnded(): void {
    this.exited = true;
    for (const listener of this.endListeners) listener();
    this.endListeners = [];
  }

  private keepStderr(chunk: Buffer): void {
    this.stderr = (this.stderr + chunk.toString('utf8')).slice(-STDERR_KEPT);
  }

  /** Splits what the driver printed into its JSON lines and hands each to the run listening. */
  private take(chunk: Buffer): void {
    this.pending = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk]);
    for (;;) {
      const at = this.pending.indexOf(10);
      if (at < 0) return;
      const line = this.pending.subarray(0, at).toString('utf8');
      this.pending = this.pending.subarray(at + 1);
      let event: DriverEvent;
      try {
        event = JSON.parse(line) as DriverEvent;
      } catch {
        this.log.warn({ line: line.slice(0, 200) }, 'code context interpreter printed a line that is not an event');
        continue;
      }
      this.listener?.(event);
    }
  }

  /**
   * Sends a run and passes its events to `onEvent` until its `end`; resolves false when
   * the driver ended first (or could not take the request).
   */
  async run(request: { code: string; env?: Record<string, string> }, onEvent: (event: DriverEvent) => void): Promise<boolean> {
    if (this.exited) return false;
    let finish!: (ended: boolean) => void;
    const done = new Promise<boolean>((resolve) => (finish = resolve));
    this.listener = (event) => {
      onEvent(event);
      if (event.type === 'end') finish(true);
    };
    void this.ended.then(() => finish(false));
    try {
      const line = Buffer.from(`${JSON.stringify({ type: 'run', code: request.code, env: request.env ?? {} })}\n`);
      if (!(await this.runtime.sendInput(this.instanceId, this.commandId, line))) finish(false);
      return await done;
    } finally {
      this.listener = undefined;
    }
  }

  /** Sends SIGINT to the interpreter (and whatever the code started): the run raises KeyboardInterrupt. */
  async interrupt(): Promise<void> {
    if (this.exited) return;
    await this.runtime.killCommand(this.instanceId, this.commandId, 'INT').catch((err: unknown) => this.log.warn({ err }, 'could not interrupt a code context'));
  }

  /** Ends the interpreter and everything it started; resolves once it has ended (or after a few seconds). */
  async kill(): Promise<void> {
    if (this.exited) return;
    // Its stdin closed first: an interpreter between runs exits by itself.
    await this.runtime.sendInput(this.instanceId, this.commandId, null).catch(() => false);
    await this.runtime.killCommand(this.instanceId, this.commandId, 'KILL').catch((err: unknown) => this.log.warn({ err }, 'could not end a code context'));
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.ended, new Promise<void>((resolve) => (timer = setTimeout(resolve, 5_000)))]);
    clearTimeout(timer);
  }
}
