// Feeds the audit trail (core/audit.ts): every state-changing request under /api/
// (POST, PUT, PATCH, DELETE) by an authenticated caller becomes one record once the
// service has decided it; over /mcp, every tool call that changes state becomes one.
// What was done (the action, the ids, the command text, the path of a file) is what core
// said as it ran (core/operations.ts: the request runs inside an operation note); a route
// names the action it expects (its config's `auditAction`) for a request refused before
// core ran, and its path parameters stand in for the ids core did not get to. This file
// adds who (the key's id), when, from where, and what was decided, read from the
// response's status and Error code, so that any refusal (quota, rate limit) is recorded
// without knowing its source.
//
// Never recorded: the API key, request or response bodies as a whole, file contents,
// command output, environment values. Requests without a valid key belong to no
// organization and are not recorded (the log has them).
import { performance } from 'node:perf_hooks';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AuditRecord, AuditTrail } from '../core/audit.ts';
import type { AuditAction, AuditDecision, AuditFilesChanged, AuditVia } from '../core/audit-schema.ts';
import type { CommandSession } from '../core/commands.ts';
import { actionOf, newOperationNote, withOperationNote, type OperationFacts, type OperationNote } from '../core/operations.ts';
import { AppError, ERROR_STATUS, type ErrorCode } from '../errors.ts';
import { timeOrderedUuid } from '../lib/ids.ts';
import { requiresAuth } from './auth.ts';
import type { App } from './types.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** The audit record being gathered for a state-changing request; null for the rest. */
    audit: AuditNote | null;
  }
  interface FastifyContextConfig {
    /**
     * The action a state-changing route expects core to name: what a request refused
     * before core ran (validation, rate limits) is recorded as. Null: nothing unless core names one.
     */
    auditAction?: AuditAction | null;
    /** The adapter whose protocol the route speaks, when it is not the REST API (E2B's: `e2b`). */
    auditVia?: AuditVia;
  }
}

interface AuditNote {
  eventId: string;
  at: string;
  startMs: number;
  /**
   * The caller's address, read as the request arrives: a stream is recorded when its
   * connection has closed, and a closed socket has no remote address left to read.
   */
  clientAddress: string;
  /** What core says the request did, as it runs. */
  operation: OperationNote;
  /** The object the route answered with (before serialization). */
  payload?: unknown;
  errorCode?: string;
  /** A streamed command: its outcome, if it has ended when the stream does. */
  session?: CommandSession;
  /** Over /mcp: each tool call is a record of its own; the request itself is none. */
  perToolCall: boolean;
  settled: boolean;
}

const STATE_CHANGING: ReadonlySet<string> = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
const TERMINAL_ROUTE = '/api/profile/:profile_id/room/:room_id/terminal';
const PORT_ROUTE = '/api/profile/:profile_id/room/:room_id/ports/:port/*';
/** E2B's in-sandbox protocol reads with POST too: these of its calls change nothing. */
const READ_ONLY_RPC = /^\/e2b\/envd\/(?:process\.Process\/(?:List|Connect)|filesystem\.Filesystem\/(?:Stat|ListDir|WatchDir|CreateWatcher|GetWatcherEvents|RemoveWatcher))$/;

/**
 * Whether a request is one the audit trail records (when its caller is authenticated):
 * the state-changing ones, opening a terminal (a GET, but it starts a shell), and a
 * WebSocket into a port of an instance with the key (proxied GETs are not recorded).
 */
export function isAuditable(method: string, url: string, route?: string, upgrade = false): boolean {
  return (STATE_CHANGING.has(method) && requiresAuth(url) && !READ_ONLY_RPC.test(url.split('?')[0] ?? url)) || (method === 'GET' && (route === TERMINAL_ROUTE || (upgrade && route === PORT_ROUTE)));
}

export function installAudit(app: App, trail: AuditTrail): void {
  app.decorateRequest('audit', null);

  app.addHook('onRequest', async (request, reply) => {
    if (!isAuditable(request.method, request.url, request.routeOptions.url, request.headers.upgrade !== undefined)) return;
    // Work that cannot be recorded is refused rather than done unrecorded.
    if (!trail.accepting) {
      throw new AppError('audit_unavailable', 'the audit trail cannot keep up with its store right now; try again shortly', { retry_after_s: 5 });
    }
    const now = Date.now();
    const expected = request.routeOptions.config.auditAction;
    request.audit = {
      eventId: timeOrderedUuid(now),
      at: new Date(now).toISOString(),
      startMs: performance.now(),
      clientAddress: request.ip,
      operation: newOperationNote(expected === undefined ? 'other' : expected),
      perToolCall: false,
      settled: false,
    };
    // Streams write the response themselves (no onSend): they are recorded when it ends.
    reply.raw.once('close', () => settle(trail, request, reply));
  });

  // The handler (and core under it) runs inside the request's operation note. Entered
  // here, after the body is read, since reading it leaves the request's async context.
  app.addHook('preHandler', (request, _reply, done) => {
    if (request.audit) withOperationNote(request.audit.operation, done);
    else done();
  });

  app.addHook('preSerialization', async (request, _reply, payload) => {
    if (request.audit) request.audit.payload = payload;
    return payload;
  });

  app.addHook('onSend', async (request, reply, payload) => {
    const note = request.audit;
    if (note && reply.statusCode >= 400 && note.errorCode === undefined) note.errorCode = errorCodeOf(note.payload ?? payload);
    settle(trail, request, reply);
    return payload;
  });
}

/** A streamed command's session, so that its record carries the outcome when the stream ends after it. */
export function auditCommandSession(request: FastifyRequest, session: CommandSession): void {
  if (request.audit) request.audit.session = session;
}

/** The instance a request reached, for its record, when its answer does not name it (a proxied request). */
export function auditInstance(request: FastifyRequest, instanceId: string): void {
  if (request.audit) request.audit.payload = { instance_id: instanceId };
}

/**
 * A request answered by a WebSocket (a terminal): recorded as the upgrade happens, with
 * the instance it reached, since no HTTP answer follows.
 */
export function auditUpgraded(request: FastifyRequest, trail: AuditTrail, answer: { instance_id: string }): void {
  if (!request.audit) return;
  request.audit.payload = answer;
  settle(trail, request, undefined, 101);
}

/** How a tool call over MCP ended: its structured result, or the API error code it failed with. */
export interface ToolCallOutcome {
  structured?: unknown;
  errorCode?: string;
}

/**
 * For /mcp: the request is not a record, each tool call that changes state is. Answers
 * the hook the MCP server calls as a tool call starts: the note to run the call in, and
 * what to call as it ends.
 */
export function auditToolCalls(request: FastifyRequest, trail: AuditTrail) {
  if (request.audit) request.audit.perToolCall = true;
  // Read now: a call may end after the connection has closed.
  const clientAddress = request.audit?.clientAddress ?? request.ip;
  return () => {
    const startMs = performance.now();
    const now = Date.now();
    const eventId = timeOrderedUuid(now);
    // An unknown tool is a call whose effect the service cannot tell.
    const operation = newOperationNote('tool.call');
    const ended = (outcome: ToolCallOutcome): void => {
      const caller = request.caller;
      if (!caller) return;
      const action = actionOf(operation);
      if (action === null) return;
      const errorCode = outcome.errorCode ?? apiErrorCode(outcome.structured);
      trail.record({
        ...factsOf(operation, {}, objectOf(outcome.structured)),
        ...(action === 'command.run' ? commandOutcome(outcome.structured) : {}),
        action,
        tool: operation.tool?.slice(0, 128),
        eventId,
        organizationId: caller.organizationId,
        at: new Date(now).toISOString(),
        durationMs: Math.round(performance.now() - startMs),
        requestId: request.id,
        keyId: caller.keyId,
        clientAddress,
        via: 'mcp',
        method: request.method,
        route: '/mcp',
        status: 200,
        decision: decide(200, errorCode),
        error: errorCode,
      });
    };
    return { operation, ended };
  };
}

function settle(trail: AuditTrail, request: FastifyRequest, reply: FastifyReply | undefined, upgradedStatus?: number): void {
  const note = request.audit;
  if (!note || note.settled) return;
  note.settled = true;
  const caller = request.caller;
  if (note.perToolCall || !caller) return;
  const route = request.routeOptions.url ?? request.url.split('?')[0] ?? request.url;
  const status = upgradedStatus ?? reply?.raw.statusCode ?? 500;
  const facts = describe(request, note);
  if (!facts) return;
  const errorCode = note.errorCode ?? facts.toolError ?? note.session?.error?.code;
  trail.record({
    ...facts.record,
    eventId: note.eventId,
    organizationId: caller.organizationId,
    at: note.at,
    durationMs: Math.round(performance.now() - note.startMs),
    requestId: request.id,
    keyId: caller.keyId,
    clientAddress: note.clientAddress,
    method: request.method,
    route,
    status,
    decision: decide(status, errorCode),
    error: errorCode,
  });
}

type Facts = Omit<AuditRecord, 'eventId' | 'organizationId' | 'at' | 'durationMs' | 'requestId' | 'keyId' | 'clientAddress' | 'method' | 'route' | 'status' | 'decision' | 'error'>;

/**
 * What a request did: the action and objects core named, else what the route expected
 * and the ids its parameters and answer name; undefined for a call that changed nothing
 * (a read-only tool call).
 */
function describe(request: FastifyRequest, note: AuditNote): { record: Facts; toolError?: string | undefined } | undefined {
  const operation = note.operation;
  const action = actionOf(operation);
  if (action === null) return undefined;
  const params = objectOf(request.params);
  const body = objectOf(request.body);
  const payload = objectOf(note.payload);
  if (operation.tool !== undefined) {
    // POST …/tools/call: the tool's result is the answer's structured content.
    const structured = payload.structured_content;
    const record: Facts = {
      ...factsOf(operation, { profileId: text(params.profile_id), roomId: text(params.room_id) }, objectOf(structured)),
      ...(action === 'command.run' ? commandOutcome(structured) : {}),
      via: 'tools',
      action,
      tool: operation.tool.slice(0, 128),
    };
    return { record, toolError: apiErrorCode(structured) };
  }
  const record: Facts = {
    ...factsOf(
      operation,
      {
        profileId: text(params.profile_id),
        roomId: text(params.room_id),
        commandId: text(params.command_id),
        targetKeyId: action === 'key.revoke' ? text(params.key_id) : undefined,
        command: action === 'terminal.open' ? text(objectOf(request.query).command) : action === 'command.run' ? text(body.command) : undefined,
        signal: action === 'command.kill' ? text(body.signal) : undefined,
        filePath: action === 'file.write' || action === 'file.delete' ? text(params['*']) : undefined,
      },
      payload,
    ),
    via: request.routeOptions.config.auditVia ?? 'api',
    action,
  };
  if (record.profileId === undefined && action.startsWith('profile.')) record.profileId = text(payload.profile_id);
  if (action === 'key.create') record.targetKeyId ??= text(payload.key_id);
  if (action === 'command.run') {
    Object.assign(record, commandOutcome(note.session?.result ?? note.payload));
    if (note.session) {
      record.commandId ??= note.session.id;
      record.instanceId ??= note.session.instanceId;
    }
  }
  if (action === 'command.kill') record.signal ??= 'KILL';
  if (action === 'command.revert') Object.assign(record, commandOutcome(note.payload));
  return { record };
}

/** The objects of a record: what core named, else what the answer names, else what the request asked for. */
function factsOf(operation: OperationNote, asked: OperationFacts, answer: Record<string, unknown>): OperationFacts {
  const fromAnswer: OperationFacts = {
    instanceId: text(answer.instance_id),
    commandId: text(answer.command_id),
    filePath: text(answer.file_path),
    profileId: text(answer.profile_id),
    roomId: text(answer.room_id),
  };
  const facts: OperationFacts = {};
  for (const source of [operation.facts, fromAnswer, operation.asked, asked]) {
    for (const [key, value] of Object.entries(source) as [keyof OperationFacts, string | undefined][]) {
      if (value !== undefined && facts[key] === undefined) facts[key] = value;
    }
  }
  return facts;
}

/** Exit code, end reason and files_changed counts of a CommandResult (or a CommandStatus that has them). */
function commandOutcome(value: unknown): { exitCode?: number; endReason?: string; filesChanged?: AuditFilesChanged } {
  const outer = objectOf(value);
  const result = objectOf(outer.result ?? outer);
  const exitCode = typeof result.exit_code === 'number' ? result.exit_code : undefined;
  const endReason = typeof result.end_reason === 'string' ? result.end_reason : undefined;
  const ended = { ...(exitCode === undefined ? {} : { exitCode }), ...(endReason === undefined ? {} : { endReason }) };
  const listed = Array.isArray(result.files_changed) ? (result.files_changed as { status?: unknown }[]) : undefined;
  const total = typeof result.files_changed_total === 'number' ? result.files_changed_total : undefined;
  if (total === undefined || listed === undefined) return ended;
  const complete = result.files_changed_truncated !== true;
  const count = (status: string) => (complete ? listed.filter((f) => f.status === status).length : null);
  return {
    ...ended,
    filesChanged: { total, created: count('created'), modified: count('modified'), deleted: count('deleted') },
  };
}

/** The decision a status and an error code make: the code names the refusal wherever it came from. */
export function decide(status: number, errorCode: string | undefined): AuditDecision {
  if (errorCode === 'quota_exceeded') return 'denied_quota';
  const codeStatus = errorCode !== undefined && Object.hasOwn(ERROR_STATUS, errorCode) ? ERROR_STATUS[errorCode as ErrorCode] : undefined;
  if (status === 429 || codeStatus === 429) return 'rate_limited';
  if (errorCode !== undefined || status >= 400) return 'error';
  return 'allowed';
}

/** The `error` of an Error body, as an object or as its JSON text. */
function errorCodeOf(payload: unknown): string | undefined {
  if (typeof payload === 'string' && payload.length < 64 * 1024) return apiErrorCode(parseJson(payload)) ?? undefined;
  if (Buffer.isBuffer(payload) && payload.length < 64 * 1024) return apiErrorCode(parseJson(payload.toString('utf8')));
  return apiErrorCode(payload);
}

function apiErrorCode(value: unknown): string | undefined {
  const error = objectOf(value).error;
  return typeof error === 'string' && error.length <= 64 ? error : undefined;
}

function text(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

function objectOf(value: unknown): Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value) && !Buffer.isBuffer(value) ? (value as Record<string, unknown>) : {};
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}
