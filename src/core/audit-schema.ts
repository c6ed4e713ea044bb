// The shape of the audit trail as the API shows it: one event per state-changing request
// (or per state-changing tool call of an MCP request), and the filters GET /api/audit
// takes. These TypeBox schemas are the one source of the fields: the route validates and
// documents with them, core/audit.ts builds values of the types derived here.
import Type from 'typebox';

/** What a request did, whichever way it came (the API, POST …/tools/call, /mcp). */
export const AUDIT_ACTIONS = [
  'instance.create',
  /** A create that gave the room an instance from its profile's warm pool. */
  'instance.claim',
  'instance.delete',
  'instance.pause',
  'instance.resume',
  /** A snapshot taken (POST …/snapshots); `instance_id` is the instance it was taken of. */
  'snapshot.create',
  'snapshot.delete',
  /** A fork of an instance into other rooms (POST …/fork). */
  'instance.fork',
  'instance.keepalive',
  /** The instance's egress policy changed at run time (PUT …/network). */
  'instance.network',
  'command.run',
  'command.kill',
  'command.revert',
  /** Input written to a running command, or its stdin closed (never the input itself). */
  'command.stdin',
  /** A code context made, deleted, restarted, given code to run, interrupted (never the code itself). */
  'context.create',
  'context.delete',
  'context.restart',
  'context.run',
  'context.interrupt',
  'file.write',
  'file.delete',
  /** A terminal opened (GET …/terminal upgraded to a WebSocket); what it carried is never recorded. */
  'terminal.open',
  /** A ticket to open a terminal without the Authorization header (POST …/terminal/ticket). */
  'terminal.ticket',
  /** A signed URL of a port made (POST …/ports/{port}/url); what it is used for is not recorded. */
  'port.url',
  /** A state-changing request (POST, PUT, PATCH, DELETE) proxied to a port with the API key; never its body. */
  'port.request',
  /** A WebSocket into a port opened with the API key; what it carried is never recorded. */
  'port.websocket',
  /** A template build started (POST /api/templates), or a Dockerfile refused by its first step. */
  'template.build',
  'template.delete',
  'profile.create',
  'profile.update',
  'profile.delete',
  'key.create',
  'key.revoke',
  /** The web console signed in with a key (POST /console/session), or signed out; `key_id` is that key. */
  'console.sign_in',
  'console.sign_out',
  /** A tool call the service could not tell the effect of (an unknown tool name). */
  'tool.call',
  /** A state-changing route without an action of its own; `method` and `route` say which. */
  'other',
  /** A question an allowlisted instance asked the egress resolver (`egress` says which name, and what was decided). */
  'egress.dns',
  /** A connection an allowlisted instance made through the egress proxy (`egress` says to what, and what was decided). */
  'egress.connect',
] as const;
export type AuditAction = (typeof AUDIT_ACTIONS)[number];

/**
 * What the service decided: `allowed` (it did what was asked: 2xx, or a tool result that
 * is not an error), `denied_quota` (`quota_exceeded`), `rate_limited` (a 429 code),
 * `error` (any other refusal or failure; `error` names its code), or `denied_egress`
 * (an egress decision that refused).
 */
export const AUDIT_DECISIONS = ['allowed', 'denied_quota', 'rate_limited', 'error', 'denied_egress'] as const;
export type AuditDecision = (typeof AUDIT_DECISIONS)[number];

export const AUDIT_VIAS = ['api', 'tools', 'mcp', 'e2b', 'egress'] as const;
export type AuditVia = (typeof AUDIT_VIAS)[number];

const nullable = <T extends Type.TSchema>(schema: T, description?: string) =>
  Type.Union([schema, Type.Null()], description === undefined ? {} : { description });

export const AuditFilesChanged = Type.Object(
  {
    total: Type.Integer({ description: 'Every regular file the command created, modified or deleted' }),
    created: nullable(Type.Integer(), 'null when the result listed only part of the files (files_changed_truncated)'),
    modified: nullable(Type.Integer()),
    deleted: nullable(Type.Integer()),
  },
  { title: 'AuditFilesChanged' },
);
export type AuditFilesChanged = Type.Static<typeof AuditFilesChanged>;

export const AuditEgress = Type.Object(
  {
    name: nullable(Type.String(), 'The name asked for (DNS) or read from the TLS SNI or HTTP Host (proxy)'),
    address: nullable(Type.String(), 'The address dialled, or the one asked for when refused before a dial'),
    port: nullable(Type.Integer()),
    rule: Type.String({ description: 'The entry that decided (`allow example.com`, `deny 203.0.113.0/24`), or why: `default` (no entry allows it), `ip_literal`, `no_sni`, `host_mismatch`, `blocked <range>`, …' }),
    count: Type.Integer({ description: 'How many such decisions this record stands for: the first is recorded at once, repeats within a minute in one record after it' }),
  },
  { title: 'AuditEgress' },
);
export type AuditEgress = Type.Static<typeof AuditEgress>;

export const AuditEvent = Type.Object(
  {
    event_id: Type.String({ format: 'uuid', description: 'Time-ordered (UUID version 7)' }),
    at: Type.String({ format: 'date-time', description: 'When the request (or the MCP tool call) arrived' }),
    duration_ms: Type.Integer({ description: 'Until the service decided (answered, or ended the tool call)' }),
    request_id: Type.String({ description: 'The X-Request-Id of the request; the service log carries the same id' }),
    key_id: Type.String({ format: 'uuid', description: 'The API key that made the request (its id; the key itself is never recorded)' }),
    client_address: Type.String({ description: 'Address of the client the connection came from' }),
    via: Type.Enum(AUDIT_VIAS, { description: '`api`: an endpoint; `tools`: POST …/tools/call; `mcp`: a tool call over /mcp; `e2b`: a call of E2B\'s API (/e2b); `egress`: a decision of the egress resolver or proxy (no request: `key_id` is the nil UUID)' }),
    method: Type.String(),
    route: Type.String({ description: 'The route pattern, e.g. /api/profile/:profile_id/room/:room_id/command' }),
    action: Type.Enum(AUDIT_ACTIONS),
    tool: nullable(Type.String(), 'The tool name, for tool calls'),
    profile_id: nullable(Type.String()),
    room_id: nullable(Type.String()),
    instance_id: nullable(Type.String({ format: 'uuid' })),
    command_id: nullable(Type.String({ format: 'uuid' })),
    command: nullable(Type.String(), 'The command text (command.run); environment values and output are never recorded'),
    exit_code: nullable(Type.Integer(), 'Known when the request waited for the command; a background command\'s outcome is in its own record'),
    end_reason: nullable(Type.String(), 'Why the command ended (its `end_reason`: `exited`, `time_limit`, `no_output`, …), when the request waited for it'),
    files_changed: nullable(AuditFilesChanged),
    file_path: nullable(Type.String(), 'file.write and file.delete: the path (absolute once the instance resolved it); never the content'),
    signal: nullable(Type.String(), 'command.kill: the signal sent'),
    target_key_id: nullable(Type.String({ format: 'uuid' }), 'key.create and key.revoke: the key made or revoked'),
    status: Type.Integer({ description: 'HTTP status of the response (200 for tool calls, whose errors are results)' }),
    decision: Type.Enum(AUDIT_DECISIONS),
    error: nullable(Type.String(), 'The error code, when the decision is not `allowed`'),
    egress: nullable(AuditEgress, 'egress.dns and egress.connect: what was asked and decided'),
  },
  { title: 'AuditEvent' },
);
export type AuditEvent = Type.Static<typeof AuditEvent>;

export const AuditPage = Type.Object(
  { events: Type.Array(AuditEvent, { description: 'Newest first' }), next_cursor: Type.Union([Type.String(), Type.Null()]) },
  { title: 'AuditPage' },
);
export type AuditPage = Type.Static<typeof AuditPage>;

export const AuditQuery = Type.Object(
  {
    since: Type.Optional(Type.String({ format: 'date-time', description: 'Events at or after this time' })),
    until: Type.Optional(Type.String({ format: 'date-time', description: 'Events before this time' })),
    key_id: Type.Optional(Type.String({ format: 'uuid', description: 'Events of this API key' })),
    instance_id: Type.Optional(Type.String({ format: 'uuid' })),
    profile_id: Type.Optional(Type.String({ format: 'uuid' })),
    room_id: Type.Optional(Type.String({ maxLength: 128 })),
    action: Type.Optional(Type.Enum(AUDIT_ACTIONS)),
    decision: Type.Optional(Type.Enum(AUDIT_DECISIONS)),
    limit: Type.Optional(Type.String({ pattern: '^(200|1[0-9]{2}|[1-9][0-9]?)$', description: '1-200, default 50' })),
    cursor: Type.Optional(Type.String({ maxLength: 512 })),
  },
  { additionalProperties: false },
);
export type AuditQuery = Type.Static<typeof AuditQuery>;
