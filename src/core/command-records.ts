// The store's record of commands: one row per command, written when it starts (state
// `running`) and again when it ends, kept after its output is gone. A room's history
// pages through these rows; crash recovery finds the ones still marked running.
import type { Db } from '../store/db.ts';
import type { CommandRow } from '../store/schema.ts';
import { nowIso } from '../lib/time.ts';
import { COMMAND_END_REASONS, COMMAND_STATES, type CommandEndReason, type CommandPage, type CommandRecord, type CommandState } from './command-schema.ts';
import { afterCursor, pageOf } from './page-cursor.ts';
import { type InstanceAddress, isInstanceRef } from './instance-address.ts';
import { isUuid } from '../lib/ids.ts';

export interface StartedCommand {
  id: string;
  organizationId: string;
  profileId: string;
  roomId: string;
  instanceId: string;
  command: string;
  background: boolean;
  startedAt: string;
}

/** What a command's end records; a command cut off by a restart has only its end reason. */
export interface CommandEnd {
  end_reason: CommandEndReason;
  exit_code?: number;
  output_bytes?: number;
  files_changed?: number;
  duration_ms?: number;
}

export class CommandRecords {
  private readonly db: Db;

  constructor(db: Db) {
    this.db = db;
  }

  /** Records a command as running; `db` is the transaction that counted it against the quotas. */
  async insertRunning(c: StartedCommand, db: Db = this.db): Promise<void> {
    await db
      .insertInto('commands')
      .values({
        id: c.id,
        organization_id: c.organizationId,
        instance_id: c.instanceId,
        profile_id: c.profileId,
        room_id: c.roomId,
        command: c.command,
        state: 'running',
        background: c.background ? 1 : 0,
        exit_code: null,
        output_bytes: null,
        files_changed: null,
        started_at: c.startedAt,
        finished_at: null,
        duration_ms: null,
        end_reason: null,
      })
      .execute();
  }

  async finish(commandId: string, state: CommandState, end: CommandEnd): Promise<void> {
    await this.db.updateTable('commands').set({ state, finished_at: nowIso(), ...end }).where('id', '=', commandId).execute();
  }

  /** The room's command with this id, as the organization sees it. */
  async find(organizationId: string, profileId: string, roomId: string, commandId: string): Promise<CommandRow | undefined> {
    return this.db
      .selectFrom('commands')
      .selectAll()
      .where('id', '=', commandId)
      .where('organization_id', '=', organizationId)
      .where('profile_id', '=', profileId)
      .where('room_id', '=', roomId)
      .executeTakeFirst();
  }

  /** The command with this id of the addressed room or instance, as the organization sees it. */
  async findAt(address: InstanceAddress, commandId: string): Promise<CommandRow | undefined> {
    if (!isUuid(commandId)) return undefined;
    if (!isInstanceRef(address)) return this.find(address.organizationId, address.profileId, address.roomId, commandId);
    return isUuid(address.instanceId) ? this.findOfInstance(address.organizationId, address.instanceId, commandId) : undefined;
  }

  /** The instance's command with this id, as the organization sees it. */
  private async findOfInstance(organizationId: string, instanceId: string, commandId: string): Promise<CommandRow | undefined> {
    return this.db
      .selectFrom('commands')
      .selectAll()
      .where('id', '=', commandId)
      .where('organization_id', '=', organizationId)
      .where('instance_id', '=', instanceId)
      .executeTakeFirst();
  }

  /** The room's commands, newest first. */
  async list(organizationId: string, profileId: string, roomId: string, options: { limit: number; cursor?: string }): Promise<CommandPage> {
    let query = this.db
      .selectFrom('commands')
      .selectAll()
      .where('organization_id', '=', organizationId)
      .where('profile_id', '=', profileId)
      .where('room_id', '=', roomId)
      .orderBy('started_at', 'desc')
      .orderBy('id', 'desc')
      .limit(options.limit + 1);
    if (options.cursor !== undefined) query = query.where(afterCursor(options.cursor, 'started_at'));
    const { page, nextCursor } = pageOf(await query.execute(), options.limit, (r) => r.started_at);
    return { commands: page.map(toRecord), next_cursor: nextCursor };
  }

  /** Commands recorded as running, with the state of their instance. */
  async running(nodeId: string): Promise<{ id: string; instance_id: string; instance_state: string }[]> {
    return this.db
      .selectFrom('commands')
      .innerJoin('instances', 'instances.id', 'commands.instance_id')
      .select(['commands.id as id', 'commands.instance_id as instance_id', 'instances.state as instance_state'])
      .where('instances.node_id', '=', nodeId)
      .where('commands.state', '=', 'running')
      .execute();
  }
}

export function toRecord(row: CommandRow): CommandRecord {
  return {
    command_id: row.id,
    instance_id: row.instance_id,
    command: row.command,
    state: (COMMAND_STATES as readonly string[]).includes(row.state) ? (row.state as CommandState) : 'error',
    exit_code: row.exit_code,
    output_bytes: row.output_bytes,
    files_changed_total: row.files_changed,
    started_at: row.started_at,
    finished_at: row.finished_at,
    duration_ms: row.duration_ms,
    // A reason this build does not know (written by a newer one) reads as unknown.
    end_reason: (COMMAND_END_REASONS as readonly (string | null)[]).includes(row.end_reason) ? (row.end_reason as CommandEndReason) : null,
  };
}
