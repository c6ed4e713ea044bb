// Code contexts: live interpreters in an instance that keep their state from one run to
// the next, as a notebook's kernel does. Each context is one interpreter
// (context-driver.ts) that this service starts, feeds runs one at a time, interrupts
// (a time limit, an interrupt request, a client gone) and ends (delete, restart, its
// instance stopping). Contexts live in this service's memory with their interpreters:
// a pause that keeps memory keeps them; an instance that stops, or a restart of the
// service, ends them. Images a run shows are written into the instance by a command of
// the room (core's commands), so they are listed in files_changed and linked exactly as
// a command's files are.
import { randomUUID } from 'node:crypto';
import { posix } from 'node:path';
import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import { AppError } from '../errors.ts';
import { HeadTailBuffer } from '../host/output.ts';
import { nowIso } from '../lib/time.ts';
import type { Commands } from './commands.ts';
import type { FileChange } from './command-schema.ts';
import { ContextDriver, type DriverEvent } from './context-driver.ts';
import { CONTEXT_LANGUAGES, type Context, type ContextLanguage, type ContextCreate, type ContextRunResult, type DisplayResult, type ExecutionError } from './context-schema.ts';
import { addressFacts, type InstanceAddress, isInstanceRef } from './instance-address.ts';
import { envOf } from './instance-options.ts';
import type { Instances } from './instances.ts';
import { noteFacts, noteOperation } from './operations.ts';

/** Most contexts one instance holds at once. */
export const MAX_CONTEXTS_PER_INSTANCE = 16;
/** How long an interrupted run has to stop before its interpreter is killed and started again. */
export const INTERRUPT_GRACE_MS = 3_000;
/** Most results a run's answer keeps (a display() in a loop); the rest are counted in stderr. */
export const MAX_RESULTS_PER_RUN = 100;
/** Where a run's images are written, relative to the home of the instance's user. */
export const CONTEXT_OUTPUTS_DIR = '.roomkit/outputs';

/** What happens during a run, as it happens (the stream's events). */
export type RunEvent =
  | { type: 'stdout' | 'stderr'; text: string }
  | { type: 'result'; result: DisplayResult }
  | { type: 'error'; error: ExecutionError };

interface ContextState {
  readonly id: string;
  readonly organizationId: string;
  readonly instanceId: string;
  readonly language: ContextLanguage;
  readonly cwd: string;
  readonly env: Record<string, string>;
  readonly createdAt: string;
  readonly home: string;
  driver: ContextDriver | undefined;
  /** The run under way and how to stop it. */
  running: { interrupt(): void } | undefined;
  /** Runs go one at a time, in the order asked. */
  queue: Promise<unknown>;
  deleted: boolean;
}

export class Contexts {
  private readonly instances: Instances;
  private readonly commands: Commands;
  private readonly log: Logger;
  private readonly maxOutputBytes: number;
  private readonly contexts = new Map<string, ContextState>();

  constructor(deps: { instances: Instances; commands: Commands; config: Config; log: Logger }) {
    this.instances = deps.instances;
    this.maxOutputBytes = deps.config.maxOutputBytes;
    this.commands = deps.commands;
    this.log = deps.log;
    // A context running code keeps its instance busy; an idle one lets it pause (with its memory, the interpreter stays).
    this.instances.addBusyCheck((instanceId) => [...this.contexts.values()].some((c) => c.instanceId === instanceId && c.running !== undefined));
    this.instances.onStopping((instanceId, _why, pause) => {
      if (pause?.keepsMemory) return;
      for (const context of this.contexts.values()) {
        if (context.instanceId !== instanceId) continue;
        context.deleted = true;
        this.contexts.delete(context.id);
      }
    });
  }

  async createAt(address: InstanceAddress, input: ContextCreate): Promise<Context> {
    noteOperation('context.create', addressFacts(address));
    const language = (input.language ?? 'python') as ContextLanguage;
    if (!(CONTEXT_LANGUAGES as readonly string[]).includes(language)) {
      throw new AppError('validation_error', `unknown language "${language}": a context runs ${CONTEXT_LANGUAGES.map((l) => `"${l}"`).join(', ')}`);
    }
    const { row, spec } = await this.instances.requireReadyAt(address);
    noteFacts({ instanceId: row.id });
    const runtime = this.instances.activeRuntime();
    if (!runtime.capabilities.interactive) {
      throw new AppError('feature_unavailable', `the ${runtime.name} runtime cannot run code contexts: an interpreter needs its stdin kept open`);
    }
    const held = [...this.contexts.values()].filter((c) => c.instanceId === row.id).length;
    if (held >= MAX_CONTEXTS_PER_INSTANCE) {
      throw new AppError('too_many_contexts', `the instance already has ${held} code contexts, the most it holds; delete one first`);
    }
    const id = randomUUID();
    const context: ContextState = {
      id,
      organizationId: row.organization_id,
      instanceId: row.id,
      language,
      cwd: posix.resolve(spec.home, input.cwd ?? '.'),
      env: { ...spec.env, ...envOf(row), ...input.env },
      createdAt: nowIso(),
      home: spec.home,
      driver: undefined,
      running: undefined,
      queue: Promise.resolve(),
      deleted: false,
    };
    context.driver = await this.startDriver(context);
    this.contexts.set(id, context);
    return view(context);
  }

  async listAt(address: InstanceAddress): Promise<Context[]> {
    const row = await this.instances.requireLiveAt(address);
    return [...this.contexts.values()].filter((c) => c.instanceId === row.id).map(view);
  }

  async getAt(address: InstanceAddress, contextId: string): Promise<Context> {
    return view(await this.find(address, contextId));
  }

  async deleteAt(address: InstanceAddress, contextId: string): Promise<void> {
    noteOperation('context.delete', addressFacts(address));
    const context = await this.find(address, contextId);
    context.deleted = true;
    this.contexts.delete(context.id);
    context.running?.interrupt();
    await context.driver?.kill();
  }

  /** Ends the context's interpreter and starts a new one: its variables are gone. */
  async restartAt(address: InstanceAddress, contextId: string): Promise<Context> {
    noteOperation('context.restart', addressFacts(address));
    const context = await this.find(address, contextId);
    await this.instances.requireReadyAt(address);
    const old = context.driver;
    context.driver = undefined;
    await old?.kill();
    context.driver = await this.startDriver(context);
    return view(context);
  }

  async interruptAt(address: InstanceAddress, contextId: string): Promise<{ context_id: string; interrupted: boolean }> {
    noteOperation('context.interrupt', addressFacts(address));
    const context = await this.find(address, contextId);
    const running = context.running;
    running?.interrupt();
    return { context_id: context.id, interrupted: running !== undefined };
  }

  /**
   * Runs code in the context and answers once it ended, with what it printed and showed;
   * `onEvent` gets each piece as it comes. `signal` aborted (the client went away)
   * interrupts it, as its time limit does.
   */
  async runAt(
    address: InstanceAddress,
    contextId: string,
    input: { code: string; env?: Record<string, string>; timeout_s?: number },
    options: { onEvent?: (event: RunEvent) => void; signal?: AbortSignal } = {},
  ): Promise<ContextRunResult> {
    noteOperation('context.run', addressFacts(address));
    const context = await this.find(address, contextId);
    const { spec } = await this.instances.requireReadyAt(address);
    if (input.timeout_s !== undefined && input.timeout_s > spec.command_timeout_s) {
      throw new AppError('validation_error', `timeout_s ${input.timeout_s} is more than the profile allows (command_timeout_s = ${spec.command_timeout_s}); ask for less, or raise the profile's command_timeout_s`);
    }
    const timeoutMs = (input.timeout_s ?? spec.command_timeout_s) * 1000;
    const turn = context.queue.then(() => this.runNow(address, context, input, timeoutMs, options));
    context.queue = turn.catch(() => {});
    return turn;
  }

  private async runNow(
    address: InstanceAddress,
    context: ContextState,
    input: { code: string; env?: Record<string, string> },
    timeoutMs: number,
    options: { onEvent?: (event: RunEvent) => void; signal?: AbortSignal },
  ): Promise<ContextRunResult> {
    if (context.deleted) throw contextNotFound(context.id);
    const started = performance.now();
    // An interpreter that ended (its instance paused without memory, a kill) is started again: state is lost, and the answer says so.
    let restarted = false;
    if (!context.driver || context.driver.exited) {
      restarted = context.driver !== undefined;
      context.driver = await this.startDriver(context);
    }
    const driver = context.driver;
    // Each stream is kept as a command's output is: its start and its end within ROOMKIT_MAX_OUTPUT_BYTES.
    const stdout = new HeadTailBuffer(this.maxOutputBytes);
    const stderr = new HeadTailBuffer(this.maxOutputBytes);
    const results: DisplayResult[] = [];
    let resultsDropped = 0;
    let error: ExecutionError | null = null;
    let executionCount = 0;
    let timedOut = false;
    let interrupted = false;
    let grace: NodeJS.Timeout | undefined;
    // A signal before the code runs (the cell still being parsed) would be ignored: it waits for `started`.
    let codeStarted = false;
    const sendInterrupt = (): void => {
      if (!codeStarted) return;
      void driver.interrupt();
    };
    const interrupt = (): void => {
      if (interrupted) return;
      interrupted = true;
      sendInterrupt();
      // Code that does not stop (a blocking call in C that ignores signals) costs its interpreter.
      grace = setTimeout(() => {
        this.log.warn({ contextId: context.id }, 'an interrupted code context did not stop: its interpreter is ended');
        restarted = true;
        void driver.kill();
      }, INTERRUPT_GRACE_MS);
    };
    context.running = { interrupt };
    const limit = setTimeout(() => {
      timedOut = true;
      interrupt();
    }, timeoutMs);
    const onAbort = () => interrupt();
    options.signal?.addEventListener('abort', onAbort);
    if (options.signal?.aborted) interrupt();
    const onEvent = (event: DriverEvent): void => {
      if (event.type === 'stdout') stdout.push(Buffer.from(event.text));
      else if (event.type === 'stderr') stderr.push(Buffer.from(event.text));
      else if (event.type === 'end') executionCount = event.execution_count;
      else if (event.type === 'started') {
        codeStarted = true;
        if (interrupted) sendInterrupt();
      }
      if (event.type === 'stdout' || event.type === 'stderr') options.onEvent?.({ type: event.type, text: event.text });
      else if (event.type === 'result') {
        const { type: _type, ...fields } = event;
        const result = fields as DisplayResult;
        if (results.length >= MAX_RESULTS_PER_RUN) {
          resultsDropped += 1;
          return;
        }
        results.push(result);
        options.onEvent?.({ type: 'result', result });
      } else if (event.type === 'error') {
        error = { name: event.name, value: event.value, traceback: event.traceback };
        options.onEvent?.({ type: 'error', error });
      }
    };
    let ended: boolean;
    try {
      ended = await driver.run(input, onEvent);
    } finally {
      clearTimeout(limit);
      clearTimeout(grace);
      options.signal?.removeEventListener('abort', onAbort);
      context.running = undefined;
      await this.instances.touch(context.instanceId).catch(() => {});
    }
    if (!ended) {
      restarted = true;
      if (context.driver === driver) context.driver = undefined;
      error ??= {
        name: interrupted ? 'KeyboardInterrupt' : 'ContextRestarted',
        value: interrupted
          ? `the code did not stop within ${INTERRUPT_GRACE_MS / 1000} s of its interrupt: the interpreter was ended, and the context starts a new one (its variables are gone)`
          : 'the interpreter ended during the run (out of memory, or the code ended it): the context starts a new one (its variables are gone)',
        traceback: '',
      };
      if (!interrupted) options.onEvent?.({ type: 'error', error });
    }
    const files = context.deleted ? [] : await this.writeImages(address, context, executionCount, results);
    if (resultsDropped > 0) stderr.push(Buffer.from(`[${resultsDropped} more results were shown than a run keeps (${MAX_RESULTS_PER_RUN}); they were left out]\n`));
    return {
      execution_count: executionCount,
      stdout: stdout.text(),
      stderr: stderr.text(),
      results,
      error,
      timed_out: timedOut,
      interrupted,
      restarted,
      files_changed: files,
      duration_ms: Math.round(performance.now() - started),
    };
  }

  /** Writes each png or jpeg result into the instance by a command of the room: files_changed is that command's. */
  private async writeImages(address: InstanceAddress, context: ContextState, executionCount: number, results: DisplayResult[]): Promise<FileChange[]> {
    const changed: FileChange[] = [];
    let n = 0;
    for (const result of results) {
      const [extension, data] = result.png !== undefined ? ['png', result.png] : result.jpeg !== undefined ? ['jpg', result.jpeg] : [];
      if (extension === undefined || data === undefined) continue;
      n += 1;
      const name = `${context.id.slice(0, 8)}-${executionCount}-${n}.${extension}`;
      try {
        const ran = await this.commands.runAt(address, {
          command: `mkdir -p ${CONTEXT_OUTPUTS_DIR} && cat > ${CONTEXT_OUTPUTS_DIR}/${name}`,
          stdin: data,
          stdin_encoding: 'base64',
        });
        if (ran.result.exit_code !== 0) throw new Error(ran.result.output.trim());
        result.path = posix.join(context.home, CONTEXT_OUTPUTS_DIR, name);
        changed.push(...ran.result.files_changed);
      } catch (err) {
        // The image is still in the answer; only its file is missing (a full disk, input over ROOMKIT_MAX_STDIN_BYTES).
        this.log.warn({ contextId: context.id, err }, 'could not write a code context\'s image into the instance');
      }
    }
    return changed;
  }

  private async startDriver(context: Pick<ContextState, 'id' | 'language' | 'instanceId' | 'home' | 'cwd' | 'env'>): Promise<ContextDriver> {
    return ContextDriver.start({
      language: context.language,
      runtime: this.instances.activeRuntime(),
      instanceId: context.instanceId,
      home: context.home,
      cwd: context.cwd,
      env: context.env,
      log: this.log.child({ instanceId: context.instanceId, contextId: context.id }),
    });
  }

  /** A context of the addressed instance; context_not_found otherwise (another organization's included). */
  private async find(address: InstanceAddress, contextId: string): Promise<ContextState> {
    const row = await this.instances.requireLiveAt(address);
    const context = this.contexts.get(contextId);
    if (!context || context.instanceId !== row.id || context.organizationId !== address.organizationId) throw contextNotFound(contextId, address);
    noteFacts({ instanceId: row.id });
    return context;
  }

  /** Ends every context's interpreter (the service stopping). */
  async close(): Promise<void> {
    const all = [...this.contexts.values()];
    this.contexts.clear();
    await Promise.all(all.map((c) => c.driver?.kill()));
  }
}

function view(context: ContextState): Context {
  return { context_id: context.id, language: context.language, cwd: context.cwd, created_at: context.createdAt };
}

export function contextNotFound(contextId: string, address?: InstanceAddress): AppError {
  const where = address === undefined ? '' : isInstanceRef(address) ? ` in instance ${address.instanceId}` : ` in room "${address.roomId}" of profile ${address.profileId}`;
  return new AppError('context_not_found', `no code context ${contextId}${where}`, { context_id: contextId });
}
