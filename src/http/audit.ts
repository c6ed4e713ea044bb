// Feeds the audit trail (core/audit.ts): every state-changing request under /api/
// (POST, PUT, PATCH, DELETE) by an authenticated caller becomes one record once the
// service has decided it; over /mcp, every tool call that changes state becomes one.
// A record says who (the key's id), what (action, route, the ids it names, the command
// text, exit code and files_changed counts of a command, the path of a file written or
// deleted), when, from where, and what was decided, read from the response's status and
// Error code, so that any refusal (quota, rate limit) is recorded without knowing its source.
//
// Never recorded: the API key, request or response bodies as a whole, file contents,
// command output, environment values. Requests without a valid key belong to no
// organization and are not recorded (the log has them).
import { performance } from 'node:perf_hooks';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AuditRecord, AuditTrail } from '../core/audit.ts';
import type { AuditAction, AuditDecision, AuditFilesChanged } from '../core/audit-schema.ts';
import type { CommandSession } from '../core/commands.ts';
import { AppError, ERROR_STATUS, type ErrorCode } from '../errors.ts';
import { isUuid, timeOrderedUuid } from '../lib/ids.ts';
import { apiErrorOf } from '../adapters/tools/executor.ts';
import type { ToolName } from '../adapters/tools/definitions.ts';
import { requiresAuth } from './auth.ts';
import type { App } from './types.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** The audit record being gathered for a state-changing request; null for the rest. */
    audit: AuditNote | null;
  }
}

interface AuditNote {
  eventId: string;
  at: string;
  startMs: number;
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
const TOOLS_CALL_ROUTE = '/api/profile/:profile_id/room/:room_id/tools/call';
const TERMINAL_ROUTE = '/api/profile/:profile_id/room/:room_id/terminal';
const PORT_ROUTE = '/api/profile/:profile_id/room/:room_id/ports/:port/*';

/** The action of each state-changing API route; a route missing here is recorded as `other`. */
export const ROUTE_ACTIONS: Readonly<Record<string, AuditAction>> = {
  'POST /api/keys': 'key.create',
  'DELETE /api/keys/:key_id': 'key.revoke',
  'POST /api/profiles': 'profile.create',
  'PATCH /api/profiles/:profile_id': 'profile.update',
  'DELETE /api/profiles/:profile_id': 'profile.delete',
  'POST /api/profile/:profile_id/room/:room_id': 'instance.create',
  'DELETE /api/profile/:profile_id/room/:room_id': 'instance.delete',
  'POST /api/profile/:profile_id/room/:room_id/pause': 'instance.pause',
  'POST /api/profile/:profile_id/room/:room_id/resume': 'instance.resume',
  'POST /api/profile/:profile_id/room/:room_id/snapshots': 'snapshot.create',
  'POST /api/profile/:profile_id/room/:room_id/fork': 'instance.fork',
  'DELETE /api/snapshots/:snapshot_id': 'snapshot.delete',
  'POST /api/profile/:profile_id/room/:room_id/keepalive': 'instance.keepalive',
  'POST /api/profile/:profile_id/room/:room_id/command': 'command.run',
  'POST /api/profile/:profile_id/room/:room_id/commands/:command_id/kill': 'command.kill',
  'POST /api/profile/:profile_id/room/:room_id/commands/:command_id/revert': 'command.revert',
  'POST /api/profile/:profile_id/room/:room_id/commands/:command_id/stdin': 'command.stdin',
  'PUT /api/profile/:profile_id/room/:room_id/file/*': 'file.write',
  'DELETE /api/profile/:profile_id/room/:room_id/file/*': 'file.delete',
  [`GET ${TERMINAL_ROUTE}`]: 'terminal.open',
  [`POST ${TERMINAL_ROUTE}/ticket`]: 'terminal.ticket',
  [`POST ${TOOLS_CALL_ROUTE}`]: 'tool.call',
  'POST /api/profile/:profile_id/room/:room_id/ports/:port/url': 'port.url',
  [`GET ${PORT_ROUTE}`]: 'port.websocket',
  ...Object.fromEntries(['POST', 'PUT', 'PATCH', 'DELETE'].map((method) => [`${method} ${PORT_ROUTE}`, 'port.request' as const])),
};

/** The action of each tool that changes state; the read-only tools (null) are not recorded. */
export const TOOL_ACTIONS: Readonly<Record<ToolName, AuditAction | null>> = {
  run_command: 'command.run',
  kill_command: 'command.kill',
  revert_command: 'command.revert',
  write_file: 'file.write',
  delete_file: 'file.delete',
  create_instance: 'instance.create',
  delete_instance: 'instance.delete',
  command_output: null,
  read_file: null,
  list_files: null,
  get_instance: null,
};

/**
 * Whether a request is one the audit trail records (when its caller is authenticated):
 * the state-changing ones, opening a terminal (a GET, but it starts a shell), and a
 * WebSocket into a port of an instance with the key (proxied GETs are not recorded).
 */
export function isAuditable(method: string, url: string, route?: string, upgrade = false): boolean {
  return (STATE_CHANGING.has(method) && requiresAuth(url)) || (method === 'GET' && (route === TERMINAL_ROUTE || (upgrade && route === PORT_ROUTE)));
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
    request.audit = { eventId: timeOrderedUuid(now), at: new Date(now).toISOString(), startMs: performance.now(), perToolCall: false, settled: false };
    // Streams write the response themselves (no onSend): they are recorded when it ends.
    reply.raw.once('close', () => settle(trail, request, reply));
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

/**
 * For /mcp: the request is not a record, each tool call that changes state is. Answers
 * the hook the MCP server calls as a tool call starts; it returns what to call as it ends.
 */
export function auditToolCalls(request: FastifyRequest, trail: AuditTrail) {
  if (request.audit) request.audit.perToolCall = true;
  return (name: string, args: unknown) => {
    const startMs = performance.now();
    const now = Date.now();
    const eventId = timeOrderedUuid(now);
    return (outcome: { structured?: unknown; error?: unknown }): void => {
      const caller = request.caller;
      if (!caller) return;
      const facts = toolFacts(name, args, outcome.structured);
      if (!facts) return;
      const errorCode = outcome.error === undefined ? apiErrorCode(outcome.structured) : (apiErrorOf(outcome.error)?.error ?? 'internal_error');
      trail.record({
        ...facts,
        eventId,
        organizationId: caller.organizationId,
        at: new Date(now).toISOString(),
        durationMs: Math.round(performance.now() - startMs),
        requestId: request.id,
        keyId: caller.keyId,
        clientAddress: request.ip,
        via: 'mcp',
        method: request.method,
        route: '/mcp',
        status: 200,
        decision: decide(200, errorCode),
        error: errorCode,
      });
    };
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
  const facts = describe(request, route, note, status);
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
    clientAddress: request.ip,
    method: request.method,
    route,
    status,
    decision: decide(status, errorCode),
    error: errorCode,
  });
}

type Facts = Omit<AuditRecord, 'eventId' | 'organizationId' | 'at' | 'durationMs' | 'requestId' | 'keyId' | 'clientAddress' | 'method' | 'route' | 'status' | 'decision' | 'error'>;

/** What a request did, from its route, parameters, body and answer; undefined for a read-only tool call. */
function describe(request: FastifyRequest, route: string, note: AuditNote, status: number): { record: Facts; toolError?: string | undefined } | undefined {
  const params = (request.params ?? {}) as Record<string, unknown>;
  const body = objectOf(request.body);
  const payload = objectOf(note.payload);
  const text = (value: unknown) => (typeof value === 'string' ? value : undefined);
  const base = { profileId: text(params.profile_id), roomId: text(params.room_id) };

  if (route === TOOLS_CALL_ROUTE && request.method === 'POST') {
    const name = text(body.name) ?? '';
    const facts = toolFacts(name, body.arguments, payload.structured_content);
    if (!facts) return undefined;
    return { record: { ...facts, ...base, via: 'tools' }, toolError: apiErrorCode(payload.structured_content) };
  }

  let action = ROUTE_ACTIONS[`${request.method} ${route}`] ?? 'other';
  // A create that gave the room an instance from its profile's warm pool (201 with claimed_at; a 200 returns the room's own).
  if (action === 'instance.create' && status === 201 && typeof payload.claimed_at === 'string') action = 'instance.claim';
  const record: Facts = {
    via: 'api',
    action,
    ...base,
    profileId: base.profileId ?? (action.startsWith('profile.') ? text(payload.profile_id) : undefined),
    instanceId: text(payload.instance_id),
    commandId: text(params.command_id) ?? text(payload.command_id),
  };
  if (action === 'command.run') {
    record.command = text(body.command);
    Object.assign(record, commandOutcome(note.session?.result ?? note.payload));
    if (note.session && record.commandId === undefined) record.commandId = note.session.id;
    if (note.session && record.instanceId === undefined) record.instanceId = note.session.instanceId;
  }
  if (action === 'command.kill') record.signal = text(body.signal) ?? 'KILL';
  if (action === 'command.revert') Object.assign(record, commandOutcome(note.payload));
  if (action === 'terminal.open') record.command = text(objectOf(request.query).command);
  if (action === 'file.write' || action === 'file.delete') record.filePath = text(payload.file_path) ?? text(params['*']);
  if (action === 'key.create') record.targetKeyId = text(payload.key_id);
  if (action === 'key.revoke') record.targetKeyId = text(params.key_id);
  return { record };
}

/** What a tool call did, from its name, arguments and result; undefined for a read-only tool. */
function toolFacts(name: string, rawArgs: unknown, structured: unknown): Facts | undefined {
  const action = Object.hasOwn(TOOL_ACTIONS, name) ? TOOL_ACTIONS[name as ToolName] : 'tool.call';
  if (action === null) return undefined;
  const args = objectOf(typeof rawArgs === 'string' ? parseJson(rawArgs) : rawArgs);
  const result = objectOf(structured);
  const text = (value: unknown) => (typeof value === 'string' ? value : undefined);
  const profile = text(args.profile);
  const facts: Facts = {
    via: 'tools',
    action,
    tool: name.slice(0, 128),
    profileId: profile !== undefined && isUuid(profile) ? profile.toLowerCase() : text(result.profile_id),
    roomId: text(args.room) ?? text(result.room_id),
    instanceId: text(result.instance_id),
    commandId: text(args.command_id) ?? text(result.command_id),
  };
  if (action === 'command.run') {
    facts.command = text(args.command);
    Object.assign(facts, commandOutcome(structured));
  }
  if (action === 'command.kill') facts.signal = text(args.signal) ?? 'KILL';
  if (action === 'file.write' || action === 'file.delete') facts.filePath = text(result.file_path) ?? text(args.path);
  return facts;
}

/** Exit code and files_changed counts of a CommandResult (or a CommandStatus that has them). */
function commandOutcome(value: unknown): { exitCode?: number; filesChanged?: AuditFilesChanged } {
  const outer = objectOf(value);
  const result = objectOf(outer.result ?? outer);
  const exitCode = typeof result.exit_code === 'number' ? result.exit_code : undefined;
  const listed = Array.isArray(result.files_changed) ? (result.files_changed as { status?: unknown }[]) : undefined;
  const total = typeof result.files_changed_total === 'number' ? result.files_changed_total : undefined;
  if (total === undefined || listed === undefined) return exitCode === undefined ? {} : { exitCode };
  const complete = result.files_changed_truncated !== true;
  const count = (status: string) => (complete ? listed.filter((f) => f.status === status).length : null);
  return {
    ...(exitCode === undefined ? {} : { exitCode }),
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
