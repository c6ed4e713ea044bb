// Commands: run a shell command in a room's instance and report its output, exit code
// and the files it changed, as the spec's CommandResult. Every command is recorded in
// the store (running, then how it ended and why: its end reason), so a room's history
// can be listed. Longer than most files: a command session's life (start, output,
// input, kill, status, retention) is one piece of state, and its changes stay together
// here; what is checked before a command starts is in command-input.ts.
import { templateWorkdirOf } from './template-instances.ts';
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import { AppError } from '../errors.ts';
import { CommandRecords, toRecord } from './command-records.ts';
import { type CommandEndReason, type CommandPage, type CommandResult, type CommandState, type CommandStatus, type FileChange, NO_STREAMS, type StdinWritten } from './command-schema.ts';
import { type CommandInput, decodeInput, OpenStdin, type StdinEncoding, validateCommandInput } from './command-input.ts';
import type { CommandOutcome, CommandSignal, FileChangeEntry } from '../runtimes/types.ts';
import type { Db } from '../store/db.ts';
import type { CommandRow } from '../store/schema.ts';
import type { Instances } from './instances.ts';
import { envOf } from './instance-options.ts';
import { apiPath } from '../lib/guest-names.ts';
import { OutputLog, StreamTexts, streamFields } from './output-log.ts';
import { appErrorOfRuntime } from './runtime-errors.ts';
import type { ServedFiles } from './served-files.ts';
import type { Profiles } from './profiles.ts';
import type { Quotas } from './quotas.ts';
import { nowIso } from '../lib/time.ts';
import type { Metrics } from '../metrics.ts';
import { noteFacts, noteOperation } from './operations.ts';
import { addressFacts, type InstanceAddress, isInstanceRef, roomRef } from './instance-address.ts';
import type { FileLinks } from './file-links.ts';

/** The API's files_changed entries of a runtime's list, each kept file with its link (public_url) where files are linked. */
export function toFileChanges(instanceId: string, entries: FileChangeEntry[], links: FileLinks): FileChange[] {
  return entries.map((e) => {
    const shown = apiPath(e.path);
    const path = shown.percentEncoded ? { path: shown.path, path_encoding: 'percent' as const } : { path: e.path };
    return e.status === 'deleted'
      ? { ...path, status: e.status }
      : {
          ...path,
          status: e.status,
          ...(e.size === undefined ? {} : { size: e.size }),
          mime_type: e.mimeType ?? 'application/octet-stream',
          ...linkOf(links, instanceId, e.path),
        };
  });
}

function linkOf(links: FileLinks, instanceId: string, path: string): { public_url?: string } {
  const url = links.urlOf(instanceId, path);
  return url === undefined ? {} : { public_url: url };
}

/** How long a kill request signals a command that has not started its processes yet, or waits for a killed one to end. */
const KILL_WAIT_MS = 10_000;
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref());

/** Longest a background command's answer waits for the command to start (it is answered either way). */
const START_WAIT_MS = 30_000;

/** How long a finished command's output stays readable by its id. */
const RETAIN_FINISHED_MS = 15 * 60_000;


/** A command the service runs or ran recently: its output as it comes, and how it ended. */
export interface CommandSession {
  readonly id: string;
  readonly organizationId: string;
  readonly profileId: string;
  readonly roomId: string;
  readonly instanceId: string;
  readonly command: string;
  readonly background: boolean;
  readonly startedAt: string;
  readonly output: OutputLog;
  /**
   * stdout and stderr apart while it runs: undefined until the command has started,
   * null when its runtime cannot tell them apart.
   */
  streams?: StreamTexts | null;
  /** Its open stdin (a command started with stdin_open). */
  readonly stdin: OpenStdin | undefined;
  /** Settles when the command has ended and been recorded; never rejects. */
  readonly done: Promise<void>;
  result?: CommandResult;
  error?: AppError;
  state: CommandState;
  finishedAt?: number;
  /** A kill request signalled its processes. */
  killRequested?: boolean;
}

export class Commands {
  private readonly records: CommandRecords;
  private readonly instances: Instances;
  private readonly profiles: Profiles;
  private readonly servedFiles: ServedFiles;
  private readonly config: Config;
  private readonly fileLinks: FileLinks;
  private readonly quotas: Quotas;
  private readonly log: Logger;
  private readonly metrics: Metrics | undefined;
  /** Commands running now and finished ones kept for a while, by id, oldest first. */
  private readonly sessions = new Map<string, CommandSession>();

  constructor(deps: { db: Db; instances: Instances; profiles: Profiles; servedFiles: ServedFiles; fileLinks: FileLinks; quotas: Quotas; config: Config; log: Logger; metrics?: Metrics }) {
    this.quotas = deps.quotas;
    this.records = new CommandRecords(deps.db);
    this.instances = deps.instances;
    this.profiles = deps.profiles;
    this.servedFiles = deps.servedFiles;
    this.config = deps.config;
    this.fileLinks = deps.fileLinks;
    this.log = deps.log;
    this.metrics = deps.metrics;
    // An instance running a command is not idle, however long the command takes.
    this.instances.addBusyCheck((instanceId) => this.runningIn(instanceId) > 0);
  }

  /** Runs a command and answers when it has ended (the spec's command execution). */
  async run(organizationId: string, profileId: string, roomId: string, input: CommandInput): Promise<CommandResult> {
    return this.runAt(roomRef(organizationId, profileId, roomId), input);
  }

  async runAt(address: InstanceAddress, input: CommandInput): Promise<CommandResult> {
    const session = await this.startAt(address, input);
    await session.done;
    if (session.error) throw session.error;
    return session.result!;
  }

  /**
   * Starts a command and answers at once with its session, whose output can be
   * followed as it comes and whose `done` settles when it has ended. Errors that stop
   * the command from starting (validation, no ready instance, too many commands) are
   * thrown here.
   */
  async start(organizationId: string, profileId: string, roomId: string, input: CommandInput): Promise<CommandSession> {
    return this.startAt(roomRef(organizationId, profileId, roomId), input);
  }

  async startAt(address: InstanceAddress, input: CommandInput): Promise<CommandSession> {
    noteOperation('command.run', { ...addressFacts(address), command: typeof input.command === 'string' ? input.command : undefined });
    validateCommandInput(input);
    const background = input.background === true;
    const stdinOpen = input.stdin_open === true;
    if (stdinOpen && !background) {
      throw new AppError('validation_error', 'stdin_open applies only to a background command ("background": true)', undefined, { code: 'stdin_later' });
    }
    if (input.stdin_encoding !== undefined && input.stdin === undefined) throw new AppError('validation_error', 'stdin_encoding says how "stdin" is encoded, but there is no stdin');
    const stdin = input.stdin === undefined ? undefined : decodeInput(input.stdin, input.stdin_encoding, this.config.maxStdinBytes, 'stdin');
    const { row: instance, spec } = await this.instances.requireReadyAt(address);
    const { organization_id: organizationId, profile_id: profileId, room_id: roomId } = instance;
    if (input.keep_undo === true && spec.keep_undo !== true) {
      throw new AppError(
        'undo_unavailable',
        'this instance cannot keep undo points: its profile was created without keep_undo',
        undefined,
        { code: 'enable_keep_undo' },
      );
    }
    const keepUndo = input.keep_undo ?? spec.keep_undo === true;
    const runtime = this.instances.activeRuntime();
    if (stdinOpen && !runtime.capabilities.interactive) {
      throw new AppError('feature_unavailable', `the ${runtime.name} runtime cannot keep a command's stdin open; give the input at once with "stdin"`);
    }
    // A command the request waits for is bound by the profile's limit; one in the
    // background runs until it ends, is killed or the instance stops, unless it asks for a limit.
    if (!background && input.timeout_s !== undefined && input.timeout_s > spec.command_timeout_s) {
      throw new AppError(
        'validation_error',
        `timeout_s ${input.timeout_s} is more than the profile allows (command_timeout_s = ${spec.command_timeout_s}); ask for less, raise the profile's command_timeout_s, or start the work with "background": true`,
      );
    }
    const busy = this.runningIn(instance.id);
    if (busy >= this.config.maxCommandsPerInstance) {
      throw new AppError(
        'too_many_commands',
        `the instance is already running ${busy} commands, the most it runs at once`,
        undefined,
        { code: 'kill_a_command' },
      );
    }

    const commandId = randomUUID();
    const startedAt = nowIso();
    const started = performance.now();
    const output = new OutputLog(this.config.maxOutputBytes);
    let settle!: () => void;
    let markRunning!: () => void;
    const running = new Promise<void>((resolve) => (markRunning = resolve));
    const session: CommandSession = {
      id: commandId,
      organizationId,
      profileId,
      roomId,
      instanceId: instance.id,
      command: input.command,
      background,
      startedAt,
      output,
      stdin: stdinOpen ? new OpenStdin() : undefined,
      done: new Promise<void>((resolve) => (settle = resolve)),
      state: 'running',
    };
    noteFacts({ instanceId: instance.id, commandId });
    // Counted as running before the first await, so racing requests see it.
    this.sessions.set(commandId, session);
    try {
      // Counted against the organization's command quotas in the transaction that records it.
      await this.quotas.reserveCommand(organizationId, (trx) => this.records.insertRunning(session, trx));
    } catch (err) {
      this.sessions.delete(commandId);
      throw err;
    }
    const log = this.log.child({ instanceId: instance.id, commandId });
    const timeoutS = input.timeout_s ?? (background ? 0 : spec.command_timeout_s);
    // As with the time limit, a background command (a server that prints nothing while it
    // waits) has no silence limit unless it asks for one.
    const idleOutputS = input.idle_output_timeout_s ?? (background ? 0 : spec.command_idle_output_timeout_s);
    this.metrics?.commandStarted();
    void (async () => {
      try {
        const outcome = await runtime.runCommand(instance.id, {
          commandId,
          command: input.command,
          ...(input.argv === undefined ? {} : { argv: input.argv }),
          home: spec.home,
          // The command's directory, else its template's WORKDIR, else the home.
          ...cwdOf(input.cwd ?? templateWorkdirOf(spec)),
          // The profile's, then the instance's create's, then the command's own: the last wins.
          env: { ...spec.env, ...envOf(instance), ...input.env },
          timeoutMs: timeoutS * 1000,
          idleOutputTimeoutMs: idleOutputS * 1000,
          maxOutputBytes: this.config.maxOutputBytes,
          onOutput: (chunk, stream) => {
            output.append(chunk, stream);
            if (stream !== 'output') session.streams?.push(chunk, stream);
          },
          onStarted: ({ streamsApart }) => {
            session.streams = streamsApart ? new StreamTexts(this.config.maxOutputBytes) : null;
            markRunning();
          },
          ...(stdin === undefined ? {} : { stdin }),
          ...(stdinOpen ? { stdinOpen: true } : {}),
          trackChanges: true,
          ...(keepUndo ? { keepUndo: true } : {}),
        });
        output.flush();
        const durationMs = Math.round(performance.now() - started);
        const changes = outcome.changes ?? [];
        const limit = this.config.filesChangedLimit;
        // A command cut off by its instance stopping did not end on its own (one that went
        // on across a pause with memory may end while its instance is still resuming).
        const stopped =
          session.state !== 'killed' && !outcome.timedOut && (outcome.instanceGone === true || !(await this.instances.isRunning(instance.id)));
        const state: CommandState = outcome.timedOut ? 'timed_out' : session.state === 'killed' ? 'killed' : stopped ? 'interrupted' : 'exited';
        const endReason = endReasonOf(outcome, state, session.killRequested === true);
        await this.records.finish(commandId, state, {
          end_reason: endReason,
          exit_code: outcome.exitCode,
          output_bytes: outcome.outputBytes,
          files_changed: changes.length,
          duration_ms: durationMs,
        });
        log.info({ exitCode: outcome.exitCode, state, endReason, durationMs, filesChanged: changes.length }, 'command finished');
        // What the result lists is what a `raw_files: changed` profile serves publicly.
        await this.servedFiles
          .record(instance.id, changes.slice(0, limit))
          .catch((err: unknown) => log.error({ err }, 'could not record the files the command listed'));
        session.state = state;
        session.result = {
          instance_id: instance.id,
          command: input.command,
          status: outcome.exitCode === 0 ? 'success' : 'error',
          result: {
            output: outcome.output,
            exit_code: outcome.exitCode,
            files_changed: toFileChanges(instance.id, changes.slice(0, limit), this.fileLinks),
            timed_out: outcome.timedOut,
            output_truncated: outcome.outputTruncated,
            output_bytes: outcome.outputBytes,
            ...(outcome.streams ? streamFields(outcome.streams) : NO_STREAMS),
            files_changed_total: changes.length,
            files_changed_truncated: changes.length > limit || outcome.changesIncomplete === true,
            ...(outcome.changesMethod ? { files_changed_method: outcome.changesMethod } : {}),
            end_reason: endReason,
          },
          command_id: commandId,
          started_at: startedAt,
          duration_ms: durationMs,
        };
      } catch (err) {
        output.flush();
        log.error({ err }, 'command could not run');
        session.state = 'error';
        session.error = appErrorOfRuntime(err) ?? new AppError('command_failed', `the command could not be run in instance ${instance.id}: ${(err as Error).message}`);
        await this.records.finish(commandId, 'error', { end_reason: 'error', duration_ms: Math.round(performance.now() - started) }).catch((e: unknown) =>
          log.error({ err: e }, 'could not record the command\'s end'),
        );
      } finally {
        // The idle limit counts from the end of the last command, not its start.
        await this.instances.touch(instance.id).catch(() => {});
        this.metrics?.commandEnded(session.state, (performance.now() - started) / 1000);
        session.finishedAt = Date.now();
        session.streams = undefined;
        this.forgetOld();
        settle();
      }
    })();
    // A background command is answered once it runs, so that its status says whether its
    // streams come apart, and input sent at once reaches it; one that could not take its
    // input open is refused.
    if (background) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([running, session.done, new Promise<void>((resolve) => (timer = setTimeout(resolve, START_WAIT_MS)))]);
      clearTimeout(timer);
      if (session.error?.code === 'feature_unavailable') throw session.error;
    }
    return session;
  }

  /** A command of the room, running or finished: its record, its output from `offset` and, once ended, its outcome. */
  async status(
    organizationId: string,
    profileId: string,
    roomId: string,
    commandId: string,
    options: { offset?: number; maxBytes?: number } = {},
  ): Promise<CommandStatus> {
    return this.statusAt(roomRef(organizationId, profileId, roomId), commandId, options);
  }

  async statusAt(address: InstanceAddress, commandId: string, options: { offset?: number; maxBytes?: number } = {}): Promise<CommandStatus> {
    const row = await this.findRow(address, commandId);
    const session = this.sessions.get(commandId);
    const record = toRecord(row);
    const read = session?.output.read(options.offset ?? 0, options.maxBytes ?? this.config.maxOutputBytes);
    const result = session?.result?.result;
    const printed = session?.output.total ?? row.output_bytes ?? 0;
    const streams = result ? pickStreams(result) : (session?.streams?.fields() ?? NO_STREAMS);
    return {
      command_id: record.command_id,
      instance_id: record.instance_id,
      command: record.command,
      state: record.state,
      background: row.background === 1,
      exit_code: record.exit_code,
      started_at: record.started_at,
      finished_at: record.finished_at,
      duration_ms: record.duration_ms,
      end_reason: session?.result?.result.end_reason ?? record.end_reason,
      output: read?.data ?? '',
      output_offset: read?.offset ?? Math.min(options.offset ?? 0, printed),
      next_offset: read?.end ?? printed,
      output_bytes: printed,
      output_available: session !== undefined,
      ...streams,
      stdin_open: session?.stdin !== undefined && !session.stdin.closed && session.finishedAt === undefined,
      timed_out: result ? result.timed_out : record.state === 'running' ? null : record.state === 'timed_out',
      files_changed: result ? result.files_changed : null,
      files_changed_total: result ? result.files_changed_total : record.files_changed_total,
      files_changed_truncated: result ? result.files_changed_truncated : null,
      result: session?.result ?? null,
    };
  }

  /** The session of a running or recently finished command of the room (for following its output). */
  async session(organizationId: string, profileId: string, roomId: string, commandId: string): Promise<CommandSession | undefined> {
    return this.sessionAt(roomRef(organizationId, profileId, roomId), commandId);
  }

  async sessionAt(address: InstanceAddress, commandId: string): Promise<CommandSession | undefined> {
    await this.findRow(address, commandId);
    return this.sessions.get(commandId);
  }

  /** Sends a signal to every process of a running command of the room. */
  async kill(organizationId: string, profileId: string, roomId: string, commandId: string, signal: CommandSignal = 'KILL'): Promise<CommandStatus> {
    return this.killAt(roomRef(organizationId, profileId, roomId), commandId, signal);
  }

  async killAt(address: InstanceAddress, commandId: string, signal: CommandSignal = 'KILL'): Promise<CommandStatus> {
    noteOperation('command.kill', { ...addressFacts(address), commandId, signal });
    const row = await this.findRow(address, commandId);
    noteFacts({ instanceId: row.instance_id });
    const session = this.sessions.get(commandId);
    if (row.state !== 'running' || !session || session.state !== 'running') {
      throw new AppError('command_not_running', `command ${commandId} is not running (it is ${session?.state ?? row.state}); there is nothing to kill`);
    }
    // A command that goes on across a pause with memory is still running: its instance is
    // resumed for the signal, as for any request that needs it.
    await this.instances.wakeById(row.instance_id);
    if (signal === 'KILL') session.state = 'killed';
    session.killRequested = true;
    const runtime = this.instances.activeRuntime();
    // A command asked to stop right after it started may have no process yet: signal
    // again until one was hit (other signals) or the command has ended (KILL), so the
    // answer says how it ended rather than "running".
    const deadline = Date.now() + KILL_WAIT_MS;
    for (;;) {
      const hit = await runtime.killCommand(row.instance_id, commandId, signal);
      if (signal !== 'KILL' && hit > 0) break;
      await Promise.race([session.done, sleep(hit > 0 ? 1000 : 100)]);
      if (session.finishedAt !== undefined || Date.now() > deadline) break;
    }
    return this.statusAt(address, commandId, { offset: session.output.total });
  }

  /**
   * Writes input to a running command started with stdin_open, and/or closes its
   * stdin; answers once the command's side has taken it (a command that does not read
   * holds the answer until it reads or ends).
   */
  async writeStdin(
    organizationId: string,
    profileId: string,
    roomId: string,
    commandId: string,
    input: { data?: string; encoding?: StdinEncoding; close?: boolean },
  ): Promise<StdinWritten> {
    return this.writeStdinAt(roomRef(organizationId, profileId, roomId), commandId, input);
  }

  async writeStdinAt(address: InstanceAddress, commandId: string, input: { data?: string; encoding?: StdinEncoding; close?: boolean }): Promise<StdinWritten> {
    noteOperation('command.stdin', { ...addressFacts(address), commandId });
    // Another organization's command is not found, whatever the body says.
    const row = await this.findRow(address, commandId);
    noteFacts({ instanceId: row.instance_id });
    if (input.data === undefined && input.close !== true) {
      throw new AppError('validation_error', 'nothing to do: send "data" to write input, "close": true to end it, or both');
    }
    const data = decodeInput(input.data ?? '', input.encoding, this.config.maxStdinBytes, 'data');
    const session = this.sessions.get(commandId);
    const notRunning = () =>
      new AppError('command_not_running', `command ${commandId} is not running (it is ${session?.state ?? row.state}); it takes no more input`);
    if (row.state !== 'running' || !session || session.finishedAt !== undefined) throw notRunning();
    if (!session.stdin) {
      throw new AppError(
        'stdin_not_open',
        `command ${commandId} was not started with "stdin_open": true, so its stdin is not open; start it with "background": true and "stdin_open": true to send it input while it runs`,
      );
    }
    // Input for a command that goes on across a pause with memory resumes its instance;
    // the runtime hands it over once the command is attached again.
    await this.instances.wakeById(row.instance_id);
    const runtime = this.instances.activeRuntime();
    const taken = await session.stdin.write(data, input.close === true, (bytes) => runtime.sendInput(row.instance_id, commandId, bytes));
    if (!taken) throw notRunning();
    return { command_id: commandId, bytes: data.length, total_bytes: session.stdin.total, closed: session.stdin.closed };
  }

  /** Commands running in an instance now. */
  runningIn(instanceId: string): number {
    let n = 0;
    for (const session of this.sessions.values()) if (session.instanceId === instanceId && session.finishedAt === undefined) n++;
    return n;
  }

  /** Drops finished commands' output past its retention, and the oldest beyond the memory budget. */
  private forgetOld(now = Date.now()): void {
    let kept = 0;
    const finished = [...this.sessions.values()].filter((s) => s.finishedAt !== undefined);
    for (const session of finished.reverse()) {
      const result = session.result?.result;
      kept += session.output.size + Buffer.byteLength(result?.output ?? '') + Buffer.byteLength(result?.stdout ?? '') + Buffer.byteLength(result?.stderr ?? '');
      if (now - session.finishedAt! > RETAIN_FINISHED_MS || kept > this.config.commandOutputRetainBytes) this.sessions.delete(session.id);
    }
  }

  /** A command of the addressed room or instance; command_not_found when it has none with this id (another organization's included). */
  private async findRow(address: InstanceAddress, commandId: string): Promise<CommandRow> {
    this.forgetOld();
    // Another organization's profile is not found, like a missing one.
    if (!isInstanceRef(address)) await this.profiles.get(address.organizationId, address.profileId);
    const row = await this.records.findAt(address, commandId);
    if (!row) throw commandNotFound(address, commandId);
    return row;
  }

  /** The room's commands, newest first. */
  async list(
    organizationId: string,
    profileId: string,
    roomId: string,
    options: { limit: number; cursor?: string },
  ): Promise<CommandPage> {
    // Another organization's profile is not found, like a missing one.
    await this.profiles.get(organizationId, profileId);
    return this.records.list(organizationId, profileId, roomId, options);
  }

  /**
   * Called at start, after the instances were reconciled: commands that were running
   * when the service stopped are recorded as interrupted, and whatever they left
   * running in instances that were adopted is killed, so no half-done work goes on
   * unseen.
   */
  async recover(): Promise<number> {
    // Only this node's: the others' commands run on their own hosts.
    const rows = await this.records.running(this.instances.nodeId);
    for (const row of rows) {
      if (row.instance_state === 'ready') {
        try {
          await this.instances.activeRuntime().killCommand(row.instance_id, row.id);
        } catch (err) {
          this.log.warn({ instanceId: row.instance_id, commandId: row.id, err }, 'could not end an interrupted command');
        }
      }
      await this.records.finish(row.id, 'interrupted', { end_reason: 'service_stopped' });
    }
    return rows.length;
  }

}

/** command_not_found for a command the addressed room or instance does not have (or another organization's). */
export function commandNotFound(address: InstanceAddress, commandId: string): AppError {
  if (isInstanceRef(address)) {
    return new AppError('command_not_found', `no command ${commandId} in instance ${address.instanceId}`, { instance_id: address.instanceId, command_id: commandId });
  }
  const { profileId, roomId } = address;
  return new AppError('command_not_found', `no command ${commandId} in room "${roomId}" of profile ${profileId}`, undefined, { code: 'list_commands', profile_id: profileId, room_id: roomId });
}

/** The stream fields of a result. */
function pickStreams(result: CommandResult['result']) {
  const { stdout, stderr, stdout_bytes, stderr_bytes, stdout_truncated, stderr_truncated } = result;
  return { stdout, stderr, stdout_bytes, stderr_bytes, stdout_truncated, stderr_truncated };
}

/** Highest signal number; an exit code of 128+n up to it says the shell died of signal n. */
const MAX_SIGNAL = 64;

/**
 * Why a command ended, most specific first: roomkit's own doing (its silence or time limit, a
 * kill request, the memory guard, its instance going), then what the command's own
 * end shows (a full disk behind a failure, a signal, an exit).
 */
export function endReasonOf(outcome: CommandOutcome, state: CommandState, killRequested: boolean): CommandEndReason {
  if (outcome.noOutput) return 'no_output';
  if (outcome.timedOut) return 'time_limit';
  if (state === 'killed' || (killRequested && outcome.exitCode > 128)) return 'killed';
  if (outcome.outOfMemory) return 'out_of_memory';
  if (state === 'interrupted') return 'instance_stopped';
  if (outcome.exitCode !== 0 && outcome.diskFull) return 'disk_full';
  if (outcome.exitCode > 128 && outcome.exitCode <= 128 + MAX_SIGNAL) return 'signal';
  return 'exited';
}

function cwdOf(cwd: string | undefined): { cwd?: string } {
  return cwd === undefined ? {} : { cwd };
}
