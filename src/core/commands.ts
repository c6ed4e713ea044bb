// Commands: run a shell command in a room's instance and report its output, exit code
// and the files it changed, as the spec's CommandResult. Every command is recorded in
// the store (running, then how it ended), so a room's history can be listed.
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import { AppError } from '../errors.ts';
import type { FileChangeEntry } from '../runtimes/types.ts';
import type { Db } from '../store/db.ts';
import type { CommandRow } from '../store/schema.ts';
import type { Instances } from './instances.ts';
import type { Profiles } from './profiles.ts';
import { nowIso } from './time.ts';

/** Longest command accepted, in UTF-8 bytes (it travels as one argument to the instance). */
export const MAX_COMMAND_BYTES = 64 * 1024;
/** Environment variable names a request may not set: they mark the command's processes. */
export const RESERVED_ENV_PREFIX = 'ROOMKIT_';

export interface CommandInput {
  command: string;
  timeout_s?: number;
  cwd?: string;
  env?: Record<string, string>;
}

export interface FileChange {
  path: string;
  status: 'created' | 'modified' | 'deleted';
  size?: number;
  mime_type?: string;
  public_url?: string;
}

export interface CommandResult {
  instance_id: string;
  command: string;
  status: 'success' | 'error';
  result: {
    output: string;
    exit_code: number;
    files_changed: FileChange[];
    timed_out: boolean;
    output_truncated: boolean;
    output_bytes: number;
    files_changed_total: number;
    files_changed_truncated: boolean;
  };
  command_id: string;
  started_at: string;
  duration_ms: number;
}

export const COMMAND_STATES = ['running', 'exited', 'timed_out', 'interrupted', 'error'] as const;
export type CommandState = (typeof COMMAND_STATES)[number];

export interface CommandRecord {
  command_id: string;
  instance_id: string;
  command: string;
  state: CommandState;
  exit_code: number | null;
  output_bytes: number | null;
  files_changed: number | null;
  started_at: string;
  finished_at: string | null;
  duration_ms: number | null;
}

/** The unauthenticated URL of a file in an instance (the spec's public_url). */
export function publicUrl(instanceId: string, path: string): string {
  const encoded = path.replace(/^\/+/, '').split('/').map(encodeURIComponent).join('/');
  return `/vm/${instanceId}/file/${encoded}`;
}

export function toFileChanges(instanceId: string, entries: FileChangeEntry[]): FileChange[] {
  return entries.map((e) =>
    e.status === 'deleted'
      ? { path: e.path, status: e.status }
      : {
          path: e.path,
          status: e.status,
          ...(e.size === undefined ? {} : { size: e.size }),
          mime_type: e.mimeType ?? 'application/octet-stream',
          public_url: publicUrl(instanceId, e.path),
        },
  );
}

export class Commands {
  private readonly db: Db;
  private readonly instances: Instances;
  private readonly profiles: Profiles;
  private readonly config: Config;
  private readonly log: Logger;
  /** Commands running now, per instance. */
  private readonly running = new Map<string, number>();

  constructor(deps: { db: Db; instances: Instances; profiles: Profiles; config: Config; log: Logger }) {
    this.db = deps.db;
    this.instances = deps.instances;
    this.profiles = deps.profiles;
    this.config = deps.config;
    this.log = deps.log;
  }

  async run(organizationId: string, profileId: string, roomId: string, input: CommandInput): Promise<CommandResult> {
    validate(input);
    const { row: instance, spec } = await this.instances.requireReady(organizationId, profileId, roomId);
    const runtime = this.instances.activeRuntime();
    if (input.timeout_s !== undefined && input.timeout_s > spec.command_timeout_s) {
      throw new AppError(
        'validation_error',
        `timeout_s ${input.timeout_s} is more than the profile allows (command_timeout_s = ${spec.command_timeout_s}); ask for less, or raise the profile's command_timeout_s`,
      );
    }
    const busy = this.running.get(instance.id) ?? 0;
    if (busy >= this.config.maxCommandsPerInstance) {
      throw new AppError(
        'too_many_commands',
        `the instance is already running ${busy} commands, the most it runs at once; wait for one to finish (start long work in the background with nohup ... &)`,
      );
    }
    this.running.set(instance.id, busy + 1);

    const commandId = randomUUID();
    const startedAt = nowIso();
    const started = performance.now();
    await this.db
      .insertInto('commands')
      .values({
        id: commandId,
        organization_id: organizationId,
        instance_id: instance.id,
        profile_id: profileId,
        room_id: roomId,
        command: input.command,
        state: 'running',
        exit_code: null,
        output_bytes: null,
        files_changed: null,
        started_at: startedAt,
        finished_at: null,
        duration_ms: null,
      })
      .execute();
    const log = this.log.child({ instanceId: instance.id, commandId });
    try {
      const outcome = await runtime.runCommand(instance.id, {
        commandId,
        command: input.command,
        home: spec.home ?? `/home/${spec.user}`,
        ...(input.cwd === undefined ? {} : { cwd: input.cwd }),
        env: { ...spec.env, ...input.env },
        timeoutMs: (input.timeout_s ?? spec.command_timeout_s) * 1000,
        maxOutputBytes: this.config.maxOutputBytes,
        trackChanges: true,
      });
      const durationMs = Math.round(performance.now() - started);
      const changes = outcome.changes ?? [];
      const limit = this.config.filesChangedLimit;
      await this.finish(commandId, outcome.timedOut ? 'timed_out' : 'exited', {
        exit_code: outcome.exitCode,
        output_bytes: outcome.outputBytes,
        files_changed: changes.length,
        duration_ms: durationMs,
      });
      log.info({ exitCode: outcome.exitCode, timedOut: outcome.timedOut, durationMs, filesChanged: changes.length }, 'command finished');
      return {
        instance_id: instance.id,
        command: input.command,
        status: outcome.exitCode === 0 ? 'success' : 'error',
        result: {
          output: outcome.output,
          exit_code: outcome.exitCode,
          files_changed: toFileChanges(instance.id, changes.slice(0, limit)),
          timed_out: outcome.timedOut,
          output_truncated: outcome.outputTruncated,
          output_bytes: outcome.outputBytes,
          files_changed_total: changes.length,
          files_changed_truncated: changes.length > limit,
        },
        command_id: commandId,
        started_at: startedAt,
        duration_ms: durationMs,
      };
    } catch (err) {
      log.error({ err }, 'command could not run');
      await this.finish(commandId, 'error', { duration_ms: Math.round(performance.now() - started) });
      throw new AppError('command_failed', `the command could not be run in instance ${instance.id}: ${(err as Error).message}`);
    } finally {
      const left = (this.running.get(instance.id) ?? 1) - 1;
      if (left > 0) this.running.set(instance.id, left);
      else this.running.delete(instance.id);
    }
  }

  /** The room's commands, newest first. */
  async list(
    organizationId: string,
    profileId: string,
    roomId: string,
    options: { limit: number; cursor?: string },
  ): Promise<{ commands: CommandRecord[]; next_cursor: string | null }> {
    // Another organization's profile is not found, like a missing one.
    await this.profiles.get(organizationId, profileId);
    let query = this.db
      .selectFrom('commands')
      .selectAll()
      .where('organization_id', '=', organizationId)
      .where('profile_id', '=', profileId)
      .where('room_id', '=', roomId)
      .orderBy('started_at', 'desc')
      .orderBy('id', 'desc')
      .limit(options.limit + 1);
    if (options.cursor !== undefined) {
      const [startedAt, id] = decodeCursor(options.cursor);
      query = query.where((eb) => eb.or([eb('started_at', '<', startedAt), eb.and([eb('started_at', '=', startedAt), eb('id', '<', id)])]));
    }
    const rows = await query.execute();
    const page = rows.slice(0, options.limit);
    const last = page.at(-1);
    return {
      commands: page.map(toRecord),
      next_cursor: rows.length > options.limit && last ? Buffer.from(JSON.stringify([last.started_at, last.id])).toString('base64url') : null,
    };
  }

  /**
   * Called at start, after the instances were reconciled: commands that were running
   * when the service stopped are recorded as interrupted, and whatever they left
   * running in instances that were adopted is killed, so no half-done work goes on
   * unseen.
   */
  async recover(): Promise<number> {
    const rows = await this.db
      .selectFrom('commands')
      .innerJoin('instances', 'instances.id', 'commands.instance_id')
      .select(['commands.id as id', 'commands.instance_id as instance_id', 'instances.state as instance_state'])
      .where('commands.state', '=', 'running')
      .execute();
    for (const row of rows) {
      if (row.instance_state === 'ready') {
        try {
          await this.instances.activeRuntime().killCommand(row.instance_id, row.id);
        } catch (err) {
          this.log.warn({ instanceId: row.instance_id, commandId: row.id, err }, 'could not end an interrupted command');
        }
      }
      await this.finish(row.id, 'interrupted', {});
    }
    return rows.length;
  }

  private async finish(
    commandId: string,
    state: CommandState,
    fields: { exit_code?: number; output_bytes?: number; files_changed?: number; duration_ms?: number },
  ): Promise<void> {
    await this.db.updateTable('commands').set({ state, finished_at: nowIso(), ...fields }).where('id', '=', commandId).execute();
  }
}

function validate(input: CommandInput): void {
  if (input.command.trim() === '') throw new AppError('validation_error', 'command is empty; send the shell command to run, e.g. {"command": "ls -la"}');
  if (Buffer.byteLength(input.command) > MAX_COMMAND_BYTES) {
    throw new AppError(
      'validation_error',
      `command is ${Buffer.byteLength(input.command)} bytes, more than the ${MAX_COMMAND_BYTES} accepted; write long scripts to a file with PUT .../file/{path} and run that`,
    );
  }
  if (input.command.includes('\0')) throw new AppError('validation_error', 'command contains a NUL character, which a shell command cannot carry');
  for (const name of Object.keys(input.env ?? {})) {
    if (name.startsWith(RESERVED_ENV_PREFIX)) throw new AppError('validation_error', `env ${name}: names starting with ${RESERVED_ENV_PREFIX} are reserved`);
  }
  if (input.cwd?.includes('\0')) throw new AppError('validation_error', 'cwd contains a NUL character');
}

function toRecord(row: CommandRow): CommandRecord {
  return {
    command_id: row.id,
    instance_id: row.instance_id,
    command: row.command,
    state: (COMMAND_STATES as readonly string[]).includes(row.state) ? (row.state as CommandState) : 'error',
    exit_code: row.exit_code,
    output_bytes: row.output_bytes,
    files_changed: row.files_changed,
    started_at: row.started_at,
    finished_at: row.finished_at,
    duration_ms: row.duration_ms,
  };
}

function decodeCursor(cursor: string): [string, string] {
  try {
    const value: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (Array.isArray(value) && value.length === 2 && value.every((v) => typeof v === 'string')) return [value[0] as string, value[1] as string];
  } catch {
    // fall through
  }
  throw new AppError('invalid_cursor', 'cursor is not one this server gave out; start again without it');
}
