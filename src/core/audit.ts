// The audit trail: an append-only record, per organization, of every state-changing
// request. The HTTP layer describes each request once the service has decided it
// (http/audit.ts) and hands the record here; it is queued in memory and written in
// batches, off the request's path, a few milliseconds later.
//
// Nothing is dropped silently: a failed write keeps its records and is retried with a
// growing delay; while more than MAX_PENDING records wait, `accepting` is false and the
// HTTP layer refuses state-changing requests with 503 audit_unavailable rather than do
// work it cannot record; a list waits for what is queued, so it sees every request
// answered before it; closing writes what is left, and what cannot be written then goes
// to the log, record by record. What a hard kill (SIGKILL, power loss) takes is at most
// the last FLUSH_DELAY_MS of records.
import type { Logger } from 'pino';
import { AppError } from '../errors.ts';
import type { Db } from '../store/db.ts';
import type { AuditEventRow } from '../store/schema.ts';
import type { AuditAction, AuditDecision, AuditEgress, AuditEvent, AuditFilesChanged, AuditPage, AuditVia } from './audit-schema.ts';
import { afterCursor, pageOf } from './page-cursor.ts';

/** How long a record waits before its batch is written. */
export const FLUSH_DELAY_MS = 50;
/** Records waiting to be written beyond which state-changing requests are refused. */
export const MAX_PENDING = 10_000;
/** Rows in one INSERT (SQLite binds at most 32,766 values; a row has 26). */
const INSERT_ROWS = 500;
/** Longest wait between retries of a failed write. */
const MAX_RETRY_DELAY_MS = 30_000;
/** Rows one prune statement deletes, so that a large backlog never holds the store long. */
const PRUNE_BATCH = 5_000;
/** How often records past the retention are removed. */
export const PRUNE_INTERVAL_MS = 60 * 60_000;

/** One record as the HTTP layer describes it; what the API shows plus whose it is. */
export interface AuditRecord {
  eventId: string;
  organizationId: string;
  at: string;
  durationMs: number;
  requestId: string;
  keyId: string;
  clientAddress: string;
  via: AuditVia;
  method: string;
  route: string;
  action: AuditAction;
  tool?: string | undefined;
  profileId?: string | undefined;
  roomId?: string | undefined;
  instanceId?: string | undefined;
  commandId?: string | undefined;
  command?: string | undefined;
  exitCode?: number | undefined;
  endReason?: string | undefined;
  filesChanged?: AuditFilesChanged | undefined;
  filePath?: string | undefined;
  signal?: string | undefined;
  targetKeyId?: string | undefined;
  status: number;
  decision: AuditDecision;
  error?: string | undefined;
  egress?: AuditEgress | undefined;
}

export interface AuditFilters {
  since?: string;
  until?: string;
  keyId?: string;
  instanceId?: string;
  profileId?: string;
  roomId?: string;
  action?: AuditAction;
  decision?: AuditDecision;
}

export class AuditTrail {
  private readonly db: Db;
  private readonly log: Logger;
  private readonly retentionDays: number;
  private pending: AuditRecord[] = [];
  private flushing: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private pruneTimer: NodeJS.Timeout | undefined;
  private retryDelayMs = 0;
  private closed = false;

  constructor(deps: { db: Db; log: Logger; retentionDays: number }) {
    this.db = deps.db;
    this.log = deps.log;
    this.retentionDays = deps.retentionDays;
  }

  /** Whether state-changing requests may go ahead: false while the store cannot keep up. */
  get accepting(): boolean {
    return this.pending.length < MAX_PENDING;
  }

  /** Records waiting to be written. */
  get backlog(): number {
    return this.pending.length;
  }

  /** Queues a record; it is written within FLUSH_DELAY_MS (later while the store fails). */
  record(record: AuditRecord): void {
    this.pending.push(record);
    if (this.closed) {
      // A request that ends after close (it cannot: the app closes first) still leaves a trace.
      void this.flush();
      return;
    }
    this.schedule(FLUSH_DELAY_MS);
  }

  /** Writes every queued record now; rejects if the store fails (the records stay queued). */
  async flush(): Promise<void> {
    // One write at a time, in order; a flush asked for during one follows it.
    while (this.flushing) await this.flushing.catch(() => {});
    if (this.pending.length === 0) return;
    const batch = this.pending;
    this.pending = [];
    this.flushing = this.write(batch).then(
      () => {
        this.retryDelayMs = 0;
      },
      (err: unknown) => {
        this.pending = [...batch, ...this.pending];
        throw err;
      },
    );
    try {
      await this.flushing;
    } finally {
      this.flushing = undefined;
    }
  }

  private schedule(delayMs: number): void {
    if (this.timer || this.closed) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.flush().then(
        () => {
          if (this.pending.length > 0) this.schedule(FLUSH_DELAY_MS);
        },
        (err: unknown) => {
          this.retryDelayMs = Math.min(MAX_RETRY_DELAY_MS, Math.max(500, this.retryDelayMs * 2));
          this.log.error({ err, pending: this.pending.length, retryInMs: this.retryDelayMs }, 'could not write audit records; they are kept and retried');
          this.schedule(this.retryDelayMs);
        },
      );
    }, delayMs);
  }

  private async write(batch: AuditRecord[]): Promise<void> {
    const rows = batch.map(toRow);
    await this.db.transaction().execute(async (trx) => {
      for (let i = 0; i < rows.length; i += INSERT_ROWS) {
        await trx.insertInto('audit_events').values(rows.slice(i, i + INSERT_ROWS)).execute();
      }
    });
  }

  /** The organization's events, newest first; waits for what is queued so nothing answered before is missing. */
  async list(organizationId: string, filters: AuditFilters, options: { limit: number; cursor?: string }): Promise<AuditPage> {
    try {
      await this.flush();
    } catch {
      throw new AppError('audit_unavailable', 'the audit trail cannot be written right now, so it would be incomplete; try again shortly', { retry_after_s: 5 });
    }
    let query = this.db
      .selectFrom('audit_events')
      .selectAll()
      .where('organization_id', '=', organizationId)
      .orderBy('at', 'desc')
      .orderBy('id', 'desc')
      .limit(options.limit + 1);
    if (filters.since !== undefined) query = query.where('at', '>=', normalizeTime(filters.since));
    if (filters.until !== undefined) query = query.where('at', '<', normalizeTime(filters.until));
    if (filters.keyId !== undefined) query = query.where('key_id', '=', filters.keyId.toLowerCase());
    if (filters.instanceId !== undefined) query = query.where('instance_id', '=', filters.instanceId.toLowerCase());
    if (filters.profileId !== undefined) query = query.where('profile_id', '=', filters.profileId.toLowerCase());
    // As the room was recorded: a NUL as U+FFFD (see storable).
    if (filters.roomId !== undefined) query = query.where('room_id', '=', filters.roomId.replaceAll('\u0000', '\uFFFD'));
    if (filters.action !== undefined) query = query.where('action', '=', filters.action);
    if (filters.decision !== undefined) query = query.where('decision', '=', filters.decision);
    if (options.cursor !== undefined) query = query.where(afterCursor(options.cursor, 'at'));
    const { page, nextCursor } = pageOf(await query.execute(), options.limit, (r) => r.at);
    return { events: page.map(toEvent), next_cursor: nextCursor };
  }

  /** Removes records older than the retention; answers how many. Nothing when the retention is 0 (keep forever). */
  async prune(now: number = Date.now()): Promise<number> {
    if (this.retentionDays === 0) return 0;
    const before = new Date(now - this.retentionDays * 86_400_000).toISOString();
    let removed = 0;
    for (;;) {
      const oldest = this.db.selectFrom('audit_events').select('id').where('at', '<', before).limit(PRUNE_BATCH);
      const result = await this.db.deleteFrom('audit_events').where('id', 'in', oldest).executeTakeFirst();
      const count = Number(result.numDeletedRows);
      removed += count;
      if (count < PRUNE_BATCH) return removed;
    }
  }

  /** Prunes now and then every PRUNE_INTERVAL_MS. */
  startPruning(intervalMs: number = PRUNE_INTERVAL_MS): void {
    if (this.retentionDays === 0 || this.pruneTimer) return;
    const run = () =>
      this.prune().then(
        (removed) => {
          if (removed > 0) this.log.info({ removed, retentionDays: this.retentionDays }, 'removed audit records past their retention');
        },
        (err: unknown) => this.log.error({ err }, 'could not remove audit records past their retention'),
      );
    void run();
    this.pruneTimer = setInterval(run, intervalMs);
    this.pruneTimer.unref();
  }

  /** Writes what is queued; what cannot be written goes to the log, so no record is lost unseen. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    clearInterval(this.pruneTimer);
    try {
      await this.flush();
    } catch (err) {
      this.log.error({ err, count: this.pending.length }, 'could not write audit records at shutdown; they follow in the log');
      for (const record of this.pending) this.log.error({ auditRecord: record }, 'unwritten audit record');
      this.pending = [];
    }
  }
}

/** A date-time as stored (ISO-8601 UTC with milliseconds), so text comparison orders it. */
function normalizeTime(value: string): string {
  const ms = Date.parse(value);
  if (Number.isNaN(ms)) throw new AppError('validation_error', `"${value}" is not a date-time`);
  return new Date(ms).toISOString();
}

/**
 * A NUL character becomes U+FFFD in every text of a record: PostgreSQL's text cannot hold
 * one, and one record it refused would hold back every record written with it. What a
 * refused request carried (a command, a path) is still recorded, the same on both stores.
 */
function storable(row: AuditEventRow): AuditEventRow {
  const clean = Object.entries(row).map(([name, value]) => [name, typeof value === 'string' ? value.replaceAll('\u0000', '\uFFFD') : value]);
  return Object.fromEntries(clean) as AuditEventRow;
}

function toRow(r: AuditRecord): AuditEventRow {
  return storable({
    id: r.eventId,
    organization_id: r.organizationId,
    at: r.at,
    duration_ms: r.durationMs,
    request_id: r.requestId,
    key_id: r.keyId,
    client_address: r.clientAddress,
    via: r.via,
    method: r.method,
    route: r.route,
    action: r.action,
    tool: r.tool ?? null,
    profile_id: r.profileId ?? null,
    room_id: r.roomId ?? null,
    instance_id: r.instanceId ?? null,
    command_id: r.commandId ?? null,
    command: r.command ?? null,
    exit_code: r.exitCode ?? null,
    end_reason: r.endReason ?? null,
    files_changed: r.filesChanged === undefined ? null : JSON.stringify(r.filesChanged),
    file_path: r.filePath ?? null,
    signal: r.signal ?? null,
    target_key_id: r.targetKeyId ?? null,
    status: r.status,
    decision: r.decision,
    error: r.error ?? null,
    egress: r.egress === undefined ? null : JSON.stringify(r.egress),
  });
}

function toEvent(row: AuditEventRow): AuditEvent {
  return {
    event_id: row.id,
    at: row.at,
    duration_ms: row.duration_ms,
    request_id: row.request_id,
    key_id: row.key_id,
    client_address: row.client_address,
    via: row.via as AuditVia,
    method: row.method,
    route: row.route,
    action: row.action as AuditAction,
    tool: row.tool,
    profile_id: row.profile_id,
    room_id: row.room_id,
    instance_id: row.instance_id,
    command_id: row.command_id,
    command: row.command,
    exit_code: row.exit_code,
    end_reason: row.end_reason,
    files_changed: row.files_changed === null ? null : (JSON.parse(row.files_changed) as AuditFilesChanged),
    file_path: row.file_path,
    signal: row.signal,
    target_key_id: row.target_key_id,
    status: row.status,
    decision: row.decision as AuditDecision,
    error: row.error,
    egress: row.egress === null ? null : (JSON.parse(row.egress) as AuditEgress),
  };
}
