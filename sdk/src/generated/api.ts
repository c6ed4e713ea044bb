// Types of the roomkit HTTP API, generated from the server's /openapi.json by
// scripts/generate-sdk.ts. Do not edit: change the route schemas, then run
// `npm run sdk:generate`.

/** The API version these types were generated from. */
export const API_VERSION = '1.0.0';

/** Every error code the server defines (the `error` field of an error body). */
export type KnownErrorCode =
  | 'validation_error'
  | 'invalid_json'
  | 'invalid_cursor'
  | 'invalid_url'
  | 'invalid_path'
  | 'is_a_directory'
  | 'not_a_directory'
  | 'unknown_tool'
  | 'invalid_arguments'
  | 'undo_unavailable'
  | 'invalid_port'
  | 'missing_api_key'
  | 'invalid_api_key'
  | 'invalid_operator_token'
  | 'invalid_terminal_ticket'
  | 'invalid_preview_token'
  | 'invalid_node_credential'
  | 'preview_url_expired'
  | 'permission_denied'
  | 'raw_file_not_served'
  | 'quota_exceeded'
  | 'invalid_csrf_token'
  | 'not_found'
  | 'profile_not_found'
  | 'instance_not_found'
  | 'key_not_found'
  | 'organization_not_found'
  | 'file_not_found'
  | 'command_not_found'
  | 'terminal_not_found'
  | 'snapshot_not_found'
  | 'context_not_found'
  | 'template_not_found'
  | 'instance_lost'
  | 'instance_on_another_node'
  | 'method_not_allowed'
  | 'profile_in_use'
  | 'profile_name_taken'
  | 'instance_not_ready'
  | 'instance_state_conflict'
  | 'instance_options_conflict'
  | 'idempotency_key_in_use'
  | 'command_not_running'
  | 'stdin_not_open'
  | 'feature_unavailable'
  | 'file_changed'
  | 'no_undo_point'
  | 'revert_conflict'
  | 'room_occupied'
  | 'snapshot_unusable'
  | 'template_busy'
  | 'template_unusable'
  | 'body_too_large'
  | 'file_too_large'
  | 'stdin_too_large'
  | 'uri_too_long'
  | 'unsupported_media_type'
  | 'range_not_satisfiable'
  | 'idempotency_key_reused'
  | 'upgrade_required'
  | 'too_many_commands'
  | 'too_many_file_reads'
  | 'too_many_terminals'
  | 'too_many_contexts'
  | 'commands_rate_exceeded'
  | 'rate_limited'
  | 'auth_throttled'
  | 'too_many_port_connections'
  | 'instance_start_failed'
  | 'instance_pause_failed'
  | 'instance_resume_failed'
  | 'snapshot_failed'
  | 'internal_error'
  | 'command_failed'
  | 'port_not_listening'
  | 'port_connection_failed'
  | 'port_timeout'
  | 'runtime_unavailable'
  | 'not_ready'
  | 'audit_unavailable'
  | 'shutting_down'
  | 'capacity_exhausted'
  | 'node_unreachable'
  | 'node_not_found'
  | 'node_not_active'
  | 'no_space';

export interface ApiKey {
  key_id: string;
  name: string | null;
  /** The first characters of the key, to recognise it */
  prefix: string;
  env: 'live' | 'test';
  created_at: string;
  /** Last authenticated request, to the minute */
  last_used_at: string | null;
}

export interface AuditEgress {
  /** The name asked for (DNS) or read from the TLS SNI or HTTP Host (proxy) */
  name: string | null;
  /** The address dialled, or the one asked for when refused before a dial */
  address: string | null;
  port: number | null;
  /** The entry that decided (`allow example.com`, `deny 203.0.113.0/24`), or why: `default` (no entry allows it), `ip_literal`, `no_sni`, `host_mismatch`, `blocked <range>`, … */
  rule: string;
  /** How many such decisions this record stands for: the first is recorded at once, repeats within a minute in one record after it */
  count: number;
}

export interface AuditEvent {
  /** Time-ordered (UUID version 7) */
  event_id: string;
  /** When the request (or the MCP tool call) arrived */
  at: string;
  /** Until the service decided (answered, or ended the tool call) */
  duration_ms: number;
  /** The X-Request-Id of the request; the service log carries the same id */
  request_id: string;
  /** The API key that made the request (its id; the key itself is never recorded) */
  key_id: string;
  /** Address of the client the connection came from */
  client_address: string;
  /** `api`: an endpoint; `tools`: POST …/tools/call; `mcp`: a tool call over /mcp; `e2b`: a call of E2B's API (/e2b); `egress`: a decision of the egress resolver or proxy (no request: `key_id` is the nil UUID) */
  via: 'api' | 'tools' | 'mcp' | 'e2b' | 'egress';
  method: string;
  /** The route pattern, e.g. /api/profile/:profile_id/room/:room_id/command */
  route: string;
  action: 'instance.create' | 'instance.claim' | 'instance.delete' | 'instance.pause' | 'instance.resume' | 'snapshot.create' | 'snapshot.delete' | 'instance.fork' | 'instance.keepalive' | 'instance.network' | 'command.run' | 'command.kill' | 'command.revert' | 'command.stdin' | 'context.create' | 'context.delete' | 'context.restart' | 'context.run' | 'context.interrupt' | 'file.write' | 'file.delete' | 'terminal.open' | 'terminal.ticket' | 'port.url' | 'port.request' | 'port.websocket' | 'template.build' | 'template.delete' | 'profile.create' | 'profile.update' | 'profile.delete' | 'key.create' | 'key.revoke' | 'console.sign_in' | 'console.sign_out' | 'tool.call' | 'other' | 'egress.dns' | 'egress.connect';
  /** The tool name, for tool calls */
  tool: string | null;
  profile_id: string | null;
  room_id: string | null;
  instance_id: string | null;
  command_id: string | null;
  /** The command text (command.run); environment values and output are never recorded */
  command: string | null;
  /** Known when the request waited for the command; a background command's outcome is in its own record */
  exit_code: number | null;
  /** Why the command ended (its `end_reason`: `exited`, `time_limit`, `no_output`, …), when the request waited for it */
  end_reason: string | null;
  files_changed: AuditFilesChanged | null;
  /** file.write and file.delete: the path (absolute once the instance resolved it); never the content */
  file_path: string | null;
  /** command.kill: the signal sent */
  signal: string | null;
  /** key.create and key.revoke: the key made or revoked */
  target_key_id: string | null;
  /** HTTP status of the response (200 for tool calls, whose errors are results) */
  status: number;
  decision: 'allowed' | 'denied_quota' | 'rate_limited' | 'error' | 'denied_egress';
  /** The error code, when the decision is not `allowed` */
  error: string | null;
  /** egress.dns and egress.connect: what was asked and decided */
  egress: AuditEgress | null;
}

export interface AuditFilesChanged {
  /** Every regular file the command created, modified or deleted */
  total: number;
  /** null when the result listed only part of the files (files_changed_truncated) */
  created: number | null;
  modified: number | null;
  deleted: number | null;
}

export interface AuditPage {
  /** Newest first */
  events: AuditEvent[];
  next_cursor: string | null;
}

export interface ChartData {
  /** `line`, `scatter`, `bar`, `pie`, `box_and_whisker`, `superchart` (a figure of several plots: `elements` are their charts) or `unknown` */
  type: string;
  title: string | null;
  x_label?: string | null;
  y_label?: string | null;
  x_unit?: string | null;
  y_unit?: string | null;
  /** Line and scatter: matplotlib's scale (`linear`, `log`, `symlog`, `logit`, …), or `datetime` and `categorical` by the axis's values */
  x_scale?: string;
  y_scale?: string;
  /** Line and scatter: tick positions (dates as ISO 8601 text, categories as their text) */
  x_ticks?: (number | string)[];
  y_ticks?: (number | string)[];
  /** Line and scatter: the ticks' text as drawn */
  x_tick_labels?: string[];
  y_tick_labels?: string[];
  /** line and scatter: `{label, points: [[x, y], …]}` per series; bar: `{label, group, value}` per bar; pie: `{label, angle, radius}` per wedge; box_and_whisker: `{label, min, first_quartile, median, third_quartile, max, outliers}` per box; superchart: a chart per plot */
  elements: unknown[];
}

export interface CommandRecord {
  command_id: string;
  instance_id: string;
  command: string;
  /** `interrupted`: the service stopped while it ran; `error`: it could not be run */
  state: 'running' | 'exited' | 'timed_out' | 'killed' | 'interrupted' | 'error';
  exit_code: number | null;
  output_bytes: number | null;
  /** How many files it changed (a CommandResult's files_changed_total); null while it runs. The list itself is in GET .../commands/{id} while kept */
  files_changed_total: number | null;
  started_at: string;
  finished_at: string | null;
  duration_ms: number | null;
  /** Why it ended: `exited` (it ended on its own), `signal` (it ended on a signal it did not get from roomkit: exit code 128+n), `time_limit` (killed at its time limit), `no_output` (killed at its silence limit, `idle_output_timeout_s`: it printed nothing for that long), `killed` (a kill request), `out_of_memory` (the instance reached its memory size and roomkit killed a process of this command), `disk_full` (it failed with the instance's disk full), `instance_stopped` (its instance stopped or its machine ended while it ran), `service_stopped` (the service stopped while it ran), `error` (it could not be run). Null while it runs, and for commands recorded before end reasons were kept */
  end_reason: 'exited' | 'signal' | 'time_limit' | 'no_output' | 'killed' | 'out_of_memory' | 'disk_full' | 'instance_stopped' | 'service_stopped' | 'error' | null;
}

export interface CommandResult {
  instance_id: string;
  command: string;
  /** `success` when exit_code is 0, else `error` */
  status: 'success' | 'error';
  result: {
    /** stdout and stderr interleaved as produced; the middle is cut beyond the output limit */
    output: string;
    /** 128+n when killed by signal n; 124 when the time limit killed it */
    exit_code: number;
    /** Regular files created, modified or deleted while the command ran, sorted by path */
    files_changed: FileChange[];
    timed_out: boolean;
    output_truncated: boolean;
    /** Bytes the command printed, all of them */
    output_bytes: number;
    /** What the command wrote to stdout (lossy UTF-8), the middle cut beyond the output limit like `output`; null when the instance cannot keep stdout and stderr apart */
    stdout: string | null;
    /** What it wrote to stderr, as `stdout` */
    stderr: string | null;
    /** Bytes written to stdout, all of them */
    stdout_bytes: number | null;
    /** Bytes written to stderr, all of them */
    stderr_bytes: number | null;
    /** Whether `stdout` lost its middle to the output limit */
    stdout_truncated: boolean | null;
    /** Whether `stderr` lost its middle to the output limit */
    stderr_truncated: boolean | null;
    files_changed_total: number;
    files_changed_truncated: boolean;
    /** How files_changed was made: from the paths the kernel reported touched, or by walking the whole writable layer (the fallback); absent when the runtime does not say */
    files_changed_method?: 'fanotify' | 'walk';
    /** Why it ended: `exited` (it ended on its own), `signal` (it ended on a signal it did not get from roomkit: exit code 128+n), `time_limit` (killed at its time limit), `no_output` (killed at its silence limit, `idle_output_timeout_s`: it printed nothing for that long), `killed` (a kill request), `out_of_memory` (the instance reached its memory size and roomkit killed a process of this command), `disk_full` (it failed with the instance's disk full), `instance_stopped` (its instance stopped or its machine ended while it ran), `service_stopped` (the service stopped while it ran), `error` (it could not be run) */
    end_reason: 'exited' | 'signal' | 'time_limit' | 'no_output' | 'killed' | 'out_of_memory' | 'disk_full' | 'instance_stopped' | 'service_stopped' | 'error';
  };
  command_id: string;
  started_at: string;
  duration_ms: number;
}

export interface CommandStatus {
  command_id: string;
  instance_id: string;
  command: string;
  /** `running` until it ends; `killed`: ended by a kill request */
  state: 'running' | 'exited' | 'timed_out' | 'killed' | 'interrupted' | 'error';
  background: boolean;
  /** null while running */
  exit_code: number | null;
  started_at: string;
  finished_at: string | null;
  duration_ms: number | null;
  /** Why it ended: `exited` (it ended on its own), `signal` (it ended on a signal it did not get from roomkit: exit code 128+n), `time_limit` (killed at its time limit), `no_output` (killed at its silence limit, `idle_output_timeout_s`: it printed nothing for that long), `killed` (a kill request), `out_of_memory` (the instance reached its memory size and roomkit killed a process of this command), `disk_full` (it failed with the instance's disk full), `instance_stopped` (its instance stopped or its machine ended while it ran), `service_stopped` (the service stopped while it ran), `error` (it could not be run). Null while it runs, and for commands recorded before end reasons were kept */
  end_reason: 'exited' | 'signal' | 'time_limit' | 'no_output' | 'killed' | 'out_of_memory' | 'disk_full' | 'instance_stopped' | 'service_stopped' | 'error' | null;
  /** Output from output_offset to next_offset (stdout and stderr interleaved) */
  output: string;
  /** Byte offset where `output` starts: more than asked for when older output was no longer kept */
  output_offset: number;
  /** Byte offset to ask for next (`?offset=`) to get only newer output */
  next_offset: number;
  /** Bytes printed so far */
  output_bytes: number;
  /** false once the output is no longer kept (15 minutes after the end, or a server restart) */
  output_available: boolean;
  /** What the command wrote to stdout (lossy UTF-8), the middle cut beyond the output limit like `output`; null when the instance cannot keep stdout and stderr apart */
  stdout: string | null;
  /** What it wrote to stderr, as `stdout` */
  stderr: string | null;
  /** Bytes written to stdout, all of them */
  stdout_bytes: number | null;
  /** Bytes written to stderr, all of them */
  stderr_bytes: number | null;
  /** Whether `stdout` lost its middle to the output limit */
  stdout_truncated: boolean | null;
  /** Whether `stderr` lost its middle to the output limit */
  stderr_truncated: boolean | null;
  /** Whether the command takes more input now (started with `stdin_open`, not yet closed, still running) */
  stdin_open: boolean;
  timed_out: boolean | null;
  /** Once ended and while kept, as in a CommandResult */
  files_changed: FileChange[] | null;
  files_changed_total: number | null;
  files_changed_truncated: boolean | null;
  /** Once it has ended, while its output is kept: its CommandResult, the very shape a foreground command answers with (so a background command's outcome reads like any other); null while it runs and once the output is no longer kept */
  result: CommandResult | null;
}

export interface Context {
  context_id: string;
  /** The interpreter it runs: `python`, `javascript` or `bash` */
  language: string;
  /** Its working directory (absolute) */
  cwd: string;
  created_at: string;
}

export interface ContextCreate {
  /** The interpreter: `python` (the default), `javascript`, `bash` */
  language?: string;
  /** Working directory of the interpreter, absolute or relative to the home (default: the home); it must exist */
  cwd?: string;
  /** Environment variables of the interpreter, over the profile's and the instance's */
  env?: Record<string, string>;
}

export interface ContextInterrupted {
  context_id: string;
  /** A run was running and was sent the interrupt; false when none was */
  interrupted: boolean;
}

export interface ContextList {
  /** The instance's contexts, oldest first */
  contexts: Context[];
}

export interface ContextRunRequest {
  /** The code to run, like a notebook cell: its last expression's value is the main result; at most 1048576 bytes */
  code: string;
  /** Environment variables for this run only (os.environ has them while it runs) */
  env?: Record<string, string>;
  /** Time limit, seconds; default and maximum: the profile's command_timeout_s. At the limit the code is interrupted */
  timeout_s?: number;
  /** Answer with Server-Sent Events as the code runs (as `Accept: text/event-stream` does) */
  stream?: boolean;
}

export interface ContextRunResult {
  /** The run's number in its context (from 1; a restart starts again) */
  execution_count: number;
  stdout: string;
  stderr: string;
  /** In the order they were shown */
  results: DisplayResult[];
  /** The exception the code ended with; null when it ran through */
  error: ExecutionError | null;
  /** Its time limit interrupted it */
  timed_out: boolean;
  /** It was interrupted (its time limit, POST …/interrupt, or the client going away) */
  interrupted: boolean;
  /** The interpreter did not stop when interrupted, or ended during the run, and was started again: the context's state is lost */
  restarted: boolean;
  /** The image files the run wrote (under ~/.roomkit/outputs), with their public_url where files are linked */
  files_changed: FileChange[];
  duration_ms: number;
}

export interface CreatedApiKey {
  key_id: string;
  name: string | null;
  /** The first characters of the key, to recognise it */
  prefix: string;
  env: 'live' | 'test';
  created_at: string;
  /** Last authenticated request, to the minute */
  last_used_at: string | null;
  /** The key itself. Shown only in this response: store it now. */
  api_key: string;
}

export interface DisplayResult {
  /** The value of the cell's last expression (else a display() call or a figure) */
  is_main_result: boolean;
  /** Its repr() */
  text?: string;
  html?: string;
  markdown?: string;
  svg?: string;
  /** Base64 */
  png?: string;
  /** Base64 */
  jpeg?: string;
  latex?: string;
  json?: unknown;
  javascript?: string;
  chart?: ChartData;
  /** Where the run wrote its image in the instance (png or jpeg results): also in the run's files_changed */
  path?: string;
}

export interface ErrorBody {
  /** Stable error code */
  error: string;
  /** What went wrong and, where possible, how to fix it */
  message: string;
  /** With a hint: the message without its advice (what went wrong alone), for a client that words the advice itself */
  problem?: string;
  /** The advice as data: its code and the values its wording needs (e.g. profile_id, room_id) */
  hint?: {
    /** What the caller can do next, as a stable code (the advice at the end of message, as data) */
    code: string;
    [key: string]: unknown;
  };
  details?: Record<string, unknown>;
  /** The request's id, as in the X-Request-Id header and the server log: quote it when reporting a problem */
  request_id?: string;
}

export interface ExecutionError {
  /** The exception's class, e.g. `ZeroDivisionError`; `KeyboardInterrupt` for an interrupted run */
  name: string;
  /** Its message */
  value: string;
  /** The traceback as Python prints it, frames of the run's code only */
  traceback: string;
}

export interface FileChange {
  /** Absolute path in the instance (percent-escaped when `path_encoding` says so) */
  path: string;
  /** Only on names that are not valid UTF-8: the path is percent-escaped (`%` as `%25`, each byte that is not UTF-8 as `%XX`); its public_url and the file endpoints take the same bytes percent-encoded */
  path_encoding?: 'percent';
  status: 'created' | 'modified' | 'deleted';
  /** Bytes (created and modified files) */
  size?: number;
  mime_type?: string;
  /** Relative URL of the file's raw content, no authentication needed */
  public_url?: string;
}

export interface FileContent {
  /** Absolute path of the file in the instance */
  file_path: string;
  /** Only on names that are not valid UTF-8: the path is percent-escaped (`%` as `%25`, each byte that is not UTF-8 as `%XX`); its public_url and the file endpoints take the same bytes percent-encoded */
  path_encoding?: 'percent';
  /** The content: text when `encoding` is utf-8, else base64 */
  content: string;
  instance_id: string;
  /** `utf-8` when the bytes are valid UTF-8 without NUL, else `base64` */
  encoding: 'utf-8' | 'base64';
  size: number;
  mime_type: string;
}

export interface FileWritten {
  file_path: string;
  /** Only on names that are not valid UTF-8: the path is percent-escaped (`%` as `%25`, each byte that is not UTF-8 as `%XX`); its public_url and the file endpoints take the same bytes percent-encoded */
  path_encoding?: 'percent';
  instance_id: string;
  status: 'created' | 'modified';
  size: number;
}

export interface ForkResult {
  /** One per room, in the order asked: `ready`, or `failed` with its `failure_reason` when that copy could not start */
  instances: Instance[];
  /** The snapshot the copies were made from, with `keep_snapshot`; null otherwise */
  snapshot: Snapshot | null;
}

export interface Instance {
  instance_id: string;
  profile_id: string;
  room_id: string;
  state: 'active' | 'network_allocated' | 'ftap_created' | 'image_generated' | 'vm_started' | 'vm_booted' | 'ready' | 'pausing' | 'paused' | 'resuming' | 'stopping' | 'stopped' | 'failed' | 'lost';
  /** Every state the instance has been in, oldest first, with when it got there */
  state_history: {
    state: 'active' | 'network_allocated' | 'ftap_created' | 'image_generated' | 'vm_started' | 'vm_booted' | 'ready' | 'pausing' | 'paused' | 'resuming' | 'stopping' | 'stopped' | 'failed' | 'lost';
    at: string;
    /** Why it got to this state, in words */
    reason?: string;
    /** Why the instance got to this state. On `pausing` and `paused` entries: `paused` (a pause request; `key_id` names the key), `idle` (its idle limit, with the profile's `idle_action: pause`), `timeout` (its deadline, likewise), `memory_pressure` (idle while the host needed its memory for another instance, or to keep its reserve free; it resumes on its next request), `service_stopped` (settled as paused when the service started again after it stopped during a pause or resume). On `resuming` and `ready` entries after a pause: `resumed` (a resume request), `auto_resumed` (a command, file or terminal request woke it), `memory_lost` (resumed, but the memory its pause kept could not be restored: it was booted over its files, its processes from before the pause are gone; the reason says why); on a `paused` entry after `resuming`: `resume_failed`. On the `vm_started` entry of an instance started from a snapshot with memory: `memory_restored` (its machine was restored from that memory: the snapshot's processes go on), or `memory_lost` (that memory could not be restored: it was booted over the snapshot's files; the reason says why). On `stopping`, `stopped` and `failed`: `retention` (paused longer than the profile's `paused_retention_s`), `pause_failed` (a pause could not finish), `deleted` (a DELETE; `key_id` names the key), `idle` (its idle limit), `lifetime` (its lifetime limit), `out_of_memory` (its machine was killed for memory by the host), `sandbox_exited` (its machine ended by itself), `host_lost` (found gone or not answering when the service started), `provision_failed` (it could not be started), `service_stopped` (the service shut down, or stopped while it was starting), `timeout` (its deadline passed: the `timeout_s` of its create, moved by keep-alives; paused or stopped as the profile's `idle_action` says), `teardown_failed` (what it held could not all be removed), `pool_retired` (a warm pool instance no room had taken, removed because its profile changed or was deleted, the pool shrank, or a create needed what it held); on a second `ready` entry, `claimed` (a room took the instance from its profile's warm pool: the entries before it are when it was made). On `lost`: `node_lost` (the node whose host ran it stopped heartbeating and another node declared it lost; the reason names the node) */
    reason_code?: 'deleted' | 'idle' | 'lifetime' | 'out_of_memory' | 'sandbox_exited' | 'host_lost' | 'provision_failed' | 'service_stopped' | 'teardown_failed' | 'pool_retired' | 'claimed' | 'paused' | 'resumed' | 'auto_resumed' | 'resume_failed' | 'memory_lost' | 'memory_restored' | 'pause_failed' | 'retention' | 'timeout' | 'memory_pressure' | 'node_lost';
    /** The API key whose request caused this step (a delete) */
    key_id?: string;
  }[];
  /** Why it failed, when state is `failed` */
  failure_reason: string | null;
  /** What provisioning is doing right now when a step takes long, e.g. building the image; null otherwise */
  progress: string | null;
  /** The runtime the instance runs on, e.g. `gvisor` */
  runtime: string;
  resources: {
    memory_mb: number;
    vcpus: number;
    disk_mb: number;
  };
  /** While the instance is paused (or resuming): when, what the pause kept, and when it is removed; null otherwise */
  pause: {
    paused_at: string;
    /** Whether its memory and processes were saved and come back at resume (running processes, their memory, listening sockets; established TCP connections are dropped); false: its processes ended and only its files (the writable layer) were kept (a pause asked with `memory: false`, or a runtime that cannot save memory: see the API reference) */
    memory_kept: boolean;
    /** When it is removed if not resumed before (the profile's `paused_retention_s`); null: never */
    remove_after: string | null;
  } | null;
  /** When the room took this instance from its profile's warm pool (booted before the room asked); null when it was made for the room */
  claimed_at: string | null;
  /** The snapshot the instance started from (`snapshot_id` in the create body, or a fork); null when it started from its profile's image */
  snapshot_id: string | null;
  /** The names of the variables its create set (`env`), sorted; their values are not shown */
  env_names: string[];
  /** Its labels (`metadata` of its create); `{}` when none */
  metadata: Record<string, string>;
  /** The `timeout_s` of its create; null when none was given */
  timeout_s: number | null;
  /** When its deadline passes (its create's `timeout_s`, moved by keep-alives and restarted by a resume); null when it has none. The profile's idle and lifetime limits apply besides. */
  expires_at: string | null;
  created_at: string;
  updated_at: string;
}

export interface PortUrl {
  /** The URL to open: host_url when the server has a preview domain (ROOMKIT_PREVIEW_DOMAIN), else path_url */
  url: string;
  /** The port under this server's own address, /p/{token}/…: works on any host; for browsers, its pages run sandboxed (an origin of their own) */
  path_url: string;
  /** The port at a host name of its own, {port}-{instance_id}.{ROOMKIT_PREVIEW_DOMAIN}, with the token once in the query (a cookie of that host carries it after): for web apps in browsers. Absent when the server has no preview domain */
  host_url?: string;
  /** The instance the URL reaches; it stops working when the instance ends */
  instance_id: string;
  port: number;
  /** When the URL stops working */
  expires_at: string;
}

export interface PortUrlRequest {
  /** How long the URL works, in seconds: default 3600 (1 hour), at most the server's ROOMKIT_PREVIEW_URL_MAX_EXPIRY_S (default 86400, 24 hours) */
  expires_in_s?: number;
}

export interface Profile {
  profile_id: string;
  /** Unique within the organization. */
  name: string;
  /** Base image of the root filesystem: `debian:bookworm`, `debian:trixie`, `template:NAME` for a template of the organization built from a Dockerfile, or `oci:<name>[:<tag>]` for an OCI image layout the operator put in the server's OCI directory. */
  image: string;
  /** Distribution packages installed into the image, e.g. `["nodejs", "jq"]`. */
  packages: string[];
  /** Memory of each instance, MiB. */
  memory_mb: number;
  /** CPUs each instance may use. */
  vcpus: number;
  /** Size of the writable filesystem layer of each instance, MiB. */
  disk_mb: number;
  /** Unprivileged user that commands run as (not `root`). */
  user: string;
  /** Home and working directory of the user; defaults to `/home/<user>`. */
  home: string;
  /** Environment variables set for every command. */
  env: Record<string, string>;
  /** Time limit of a command, seconds: the default, and the most a command may ask for. */
  command_timeout_s: number;
  /** Silence limit of a command, seconds: one that prints nothing (stdout nor stderr) for this long is ended as at its time limit, with the end reason `no_output`. The default of a command's `idle_output_timeout_s`, but for background commands (none unless they ask); 0 = none. */
  command_idle_output_timeout_s: number;
  /** Pause or stop (idle_action) an instance after this long without a command or file request; 0 = never. */
  idle_timeout_s: number;
  /** What happens to an instance idle for idle_timeout_s: `pause` (its machine stops, its files are kept, and the next request resumes it; removed after paused_retention_s) or `stop` (removed with everything in it). A runtime that cannot pause stops. */
  idle_action: 'pause' | 'stop';
  /** How long a paused instance is kept, seconds from its pause; then it is removed with its files (state history: `retention`). At most 7776000 (90 days). */
  paused_retention_s: number;
  /** Stop an instance this long after it was created, whatever it is doing; 0 = never. */
  max_lifetime_s: number;
  /** Egress policy of the instances. */
  network: {
    /** `internet`: outbound traffic to public addresses; `none`: no route out; `allowlist`: only what `allow` names (less what `deny` names), through roomkit's resolver and egress proxy (docs/api.md, "Egress allowlists"). */
    egress: 'none' | 'internet' | 'allowlist';
    /** With egress `allowlist`: what instances may reach. Each entry a domain (`example.com`; `*.example.com` for its subdomains), reached on ports 80 and 443 through the egress proxy, or an IPv4 address or range (`203.0.113.0/24`), reached directly over TCP; either with an optional `:port`. Private, loopback, link-local and metadata ranges are never reachable. At most 100 entries; empty for other egress modes. */
    allow: string[];
    /** With egress `allowlist`: entries (as in `allow`) never reached, even when `allow` names them. At most 100; empty for other egress modes. */
    deny: string[];
  };
  /** Free-form organization-specific JSON, stored and returned as given (at most 16384 bytes). */
  settings: Record<string, unknown>;
  /** What the unauthenticated raw endpoint GET /vm/{instance_id}/file/{path} serves of this profile's instances: `all` (the specification's behaviour: any file the instance's user can read, to anyone holding the instance id), `changed` (only files a command listed in files_changed as created or modified, and not deleted since), or `off` (nothing). Takes effect at once for live instances. The authenticated read (…/file/{path}?raw=1) is not affected. */
  raw_files: 'all' | 'changed' | 'off';
  /** Instances of this profile kept booted and unassigned, so that a create in a new room takes one at once instead of starting a machine (refilled in the background after each one is taken). Pooled instances count against the organization's quotas like any other; a change to any other field of the profile replaces them. 0: no pool. */
  warm_pool: number;
  /** Keep each command's undo point, so that POST .../commands/{command_id}/revert can put back the files it changed. Instances get a btrfs writable layer (about 0.2 s more to create) that can keep undo points; a command may then also opt out (`"keep_undo": false`). Undo points are bounded per instance (ROOMKIT_UNDO_MAX_POINTS, ROOMKIT_UNDO_MAX_MB; the oldest dropped first). Takes effect for instances created after the change. */
  keep_undo: boolean;
  /** The instances the profile's warm pool holds now (made from its current fields) */
  warm_pool_instances: {
    /** Pooled instances booted and waiting for a room */
    ready: number;
    /** Pooled instances still being made */
    starting: number;
  };
  created_at: string;
  updated_at: string;
}

export interface RevertResult {
  /** The command whose changes were put back */
  command_id: string;
  instance_id: string;
  /** Regular files the revert created, modified or deleted, sorted by path (as a command's files_changed) */
  files_changed: FileChange[];
  files_changed_total: number;
  files_changed_truncated: boolean;
  /** How files_changed was made, as for a command */
  files_changed_method?: 'fanotify' | 'walk';
  /** Whether it was forced over later commands that changed the same files */
  forced: boolean;
  duration_ms: number;
}

export interface Snapshot {
  snapshot_id: string;
  /** The name given when it was taken; null when none was */
  name: string | null;
  /** `creating` while its files are copied (a POST answers once it is `ready`), then `ready` */
  state: 'creating' | 'ready';
  /** The instance it was taken of */
  instance_id: string;
  /** The profile of that instance */
  profile_id: string;
  /** The room of that instance */
  room_id: string;
  /** The image its files sit on; an instance started from it runs on the same image */
  image: string;
  /** Size of its writable layer; an instance started from it has this disk size */
  disk_mb: number;
  /** Bytes of host disk it holds: the blocks its writable layer uses (the image is shared, not copied) */
  disk_bytes: number;
  /** Whether its memory and processes were saved too: an instance started from it goes on running them (at its own address; established TCP connections are not kept). False: its files only (asked with `memory: false`, a paused instance whose pause kept files only, or a runtime that cannot save memory) */
  memory_kept: boolean;
  created_at: string;
}

export interface StdinWritten {
  command_id: string;
  /** Bytes of this request's data written */
  bytes: number;
  /** Bytes written to the command's stdin so far, through every request */
  total_bytes: number;
  /** Whether its stdin is closed now (the command reads end of input once it has read the rest) */
  closed: boolean;
}

export interface Template {
  template_id: string;
  name: string;
  /** `building` while a build runs, then `ready` or `failed` (with `reason`) */
  state: 'building' | 'ready' | 'failed';
  /** Why the latest build failed; null otherwise */
  reason: string | null;
  /** The latest build */
  build_id: string;
  build: TemplateBuild;
  /** What the last build that succeeded made: new instances of `template:NAME` start from it (while a rebuild runs, or after one failed, too); null until a build has succeeded */
  image: TemplateImage | null;
  created_at: string;
  updated_at: string;
}

export interface TemplateBuild {
  build_id: string;
  /** `building` while a build runs, then `ready` or `failed` (with `reason`) */
  state: 'building' | 'ready' | 'failed';
  /** Why it failed; null otherwise */
  reason: string | null;
  /** Instructions after FROM */
  steps: number;
  /** Steps whose result was found in the cache (not run again) */
  cached_steps: number;
  created_at: string;
  finished_at: string | null;
}

export interface TemplateBuildStarted {
  template_id: string;
  name: string;
  build_id: string;
  /** `building` while a build runs, then `ready` or `failed` (with `reason`) */
  state: 'building' | 'ready' | 'failed';
}

export interface TemplateImage {
  /** The Debian image its files sit on (`debian:bookworm` or `debian:trixie`) */
  base_image: string;
  /** ENV: the environment of commands in its instances */
  env: Record<string, string>;
  /** WORKDIR: where commands start when they name no directory; null: the user's home */
  workdir: string | null;
  /** USER, as the Dockerfile set it last; null when it set none */
  user: string | null;
  /** ENTRYPOINT and CMD together, as a program and its arguments (a shell form as `sh -c`); null when neither was set */
  start_command: string[] | null;
  /** HEALTHCHECK CMD, as a program and its arguments: run in a new instance after the start command until it succeeds, before the instance is ready; null when none was set */
  ready_check: string[] | null;
  /** EXPOSE, as written (recorded only) */
  expose: string[];
  /** LABEL */
  labels: Record<string, string>;
  /** Bytes of host disk its last layer holds (the image below is shared) */
  disk_bytes: number;
}

export interface TerminalTicket {
  /** Give it as ?ticket= on GET …/terminal of this room, once */
  ticket: string;
  /** When it can no longer be used (30 s after it was made) */
  expires_at: string;
}

export interface ToolCallResult {
  name: string;
  /** What the model reads, in order */
  content: ({
    type: 'text';
    text: string;
  } | {
    type: 'image';
    /** base64 */
    data: string;
    mime_type: string;
  })[];
  /** A non-zero exit code, or an error the arguments caused (file not found, ...) */
  is_error: boolean;
  /** The JSON the tool's endpoint answers (its Error body when is_error comes from an error; for read_file without `content`) */
  structured_content: unknown;
}

export interface ToolEndpoint {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  /** `{path}` stands for the `path` argument */
  path: string;
  /** Arguments sent as query parameters */
  query?: string[];
  /** Arguments sent as JSON body fields */
  body?: string[];
}

export interface ToolSet {
  format: 'roomkit' | 'openai' | 'anthropic' | 'mcp';
  profile_id: string;
  room_id: string;
  /** Where any of these tools is run by name */
  call: {
    method: 'POST';
    path: string;
  };
  /** `roomkit`: {name, title, description, input_schema, annotations, endpoint}; `openai`: Chat Completions function tools {type: "function", function: {name, description, parameters}}; `anthropic`: Messages API tools {name, description, input_schema}; `mcp`: MCP Tool objects {name, title, description, inputSchema, annotations} */
  tools: unknown[];
  /** The API endpoint each tool maps to, by tool name */
  endpoints: Record<string, ToolEndpoint>;
}

export interface Usage {
  organization_id: string;
  quotas: {
    /** Live instances (every state but stopped and failed) */
    instances: {
      limit: number;
      used: number;
      /** `default`: the service's configured default; `organization`: set by the operator for this organization */
      source: 'default' | 'organization';
    };
    /** memory_mb of the live instances, together */
    memory_mb: {
      limit: number;
      used: number;
      /** `default`: the service's configured default; `organization`: set by the operator for this organization */
      source: 'default' | 'organization';
    };
    /** vcpus of the live instances, together */
    vcpus: {
      limit: number;
      used: number;
      /** `default`: the service's configured default; `organization`: set by the operator for this organization */
      source: 'default' | 'organization';
    };
    /** Disk the organization holds: the writable layers (disk_mb) of its live instances */
    disk_mb: {
      limit: number;
      used: number;
      /** `default`: the service's configured default; `organization`: set by the operator for this organization */
      source: 'default' | 'organization';
    };
    /** Commands running at once, in all of its instances */
    concurrent_commands: {
      limit: number;
      used: number;
      /** `default`: the service's configured default; `organization`: set by the operator for this organization */
      source: 'default' | 'organization';
    };
    /** Commands started in the last 60 seconds, in all of its instances */
    commands_per_minute: {
      limit: number;
      used: number;
      /** `default`: the service's configured default; `organization`: set by the operator for this organization */
      source: 'default' | 'organization';
    };
    /** Snapshots it keeps (made by POST …/snapshots; a fork's own snapshot counts while the fork runs) */
    snapshots: {
      limit: number;
      used: number;
      /** `default`: the service's configured default; `organization`: set by the operator for this organization */
      source: 'default' | 'organization';
    };
  };
  /** Host memory the running instances use now, measured (one starting at its runtime's estimate); not a quota: host admission counts it, and idle instances may be paused when the host needs memory. Absent where no runtime runs (`roomkit orgs usage` on the data directory) */
  memory_in_use_mb?: number;
}

/** Every route: its path and query parameters, JSON body, and responses by status. */
export interface Paths {
  '/api/keys': {
    /** List API keys */
    get: {
      params: Record<string, never>;
      query: Record<string, never>;
      body: undefined;
      responses: {
        200: {
          keys: ApiKey[];
        };
        401: ErrorBody;
      };
    };
    /** Create an API key */
    post: {
      params: Record<string, never>;
      query: Record<string, never>;
      body: {
        env?: 'live' | 'test';
        /** A label for the key */
        name?: string;
      };
      responses: {
        201: CreatedApiKey;
        400: ErrorBody;
        401: ErrorBody;
      };
    };
  };
  '/api/keys/{key_id}': {
    /** Revoke an API key */
    delete: {
      params: {
        /** API key id (UUID), as listed by GET /api/keys */
        key_id: string;
      };
      query: Record<string, never>;
      body: undefined;
      responses: {
        204: undefined;
        400: ErrorBody;
        401: ErrorBody;
        404: ErrorBody;
      };
    };
  };
  '/api/profiles': {
    /** List profiles */
    get: {
      params: Record<string, never>;
      query: Record<string, never>;
      body: undefined;
      responses: {
        200: {
          profiles: Profile[];
        };
        401: ErrorBody;
      };
    };
    /** Create a profile */
    post: {
      params: Record<string, never>;
      query: Record<string, never>;
      body: {
        /** Unique within the organization. */
        name: string;
        /** Base image of the root filesystem: `debian:bookworm`, `debian:trixie`, `template:NAME` for a template of the organization built from a Dockerfile, or `oci:<name>[:<tag>]` for an OCI image layout the operator put in the server's OCI directory. */
        image?: string;
        /** Distribution packages installed into the image, e.g. `["nodejs", "jq"]`. */
        packages?: string[];
        /** Memory of each instance, MiB. */
        memory_mb?: number;
        /** CPUs each instance may use. */
        vcpus?: number;
        /** Size of the writable filesystem layer of each instance, MiB. */
        disk_mb?: number;
        /** Unprivileged user that commands run as (not `root`). */
        user?: string;
        /** Home and working directory of the user; defaults to `/home/<user>`. */
        home?: string;
        /** Environment variables set for every command. */
        env?: Record<string, string>;
        /** Time limit of a command, seconds: the default, and the most a command may ask for. */
        command_timeout_s?: number;
        /** Silence limit of a command, seconds: one that prints nothing (stdout nor stderr) for this long is ended as at its time limit, with the end reason `no_output`. The default of a command's `idle_output_timeout_s`, but for background commands (none unless they ask); 0 = none. */
        command_idle_output_timeout_s?: number;
        /** Pause or stop (idle_action) an instance after this long without a command or file request; 0 = never. */
        idle_timeout_s?: number;
        /** What happens to an instance idle for idle_timeout_s: `pause` (its machine stops, its files are kept, and the next request resumes it; removed after paused_retention_s) or `stop` (removed with everything in it). A runtime that cannot pause stops. */
        idle_action?: 'pause' | 'stop';
        /** How long a paused instance is kept, seconds from its pause; then it is removed with its files (state history: `retention`). At most 7776000 (90 days). */
        paused_retention_s?: number;
        /** Stop an instance this long after it was created, whatever it is doing; 0 = never. */
        max_lifetime_s?: number;
        /** Egress policy of the instances. */
        network?: {
          /** `internet`: outbound traffic to public addresses; `none`: no route out; `allowlist`: only what `allow` names (less what `deny` names), through roomkit's resolver and egress proxy (docs/api.md, "Egress allowlists"). */
          egress?: 'none' | 'internet' | 'allowlist';
          /** With egress `allowlist`: what instances may reach. Each entry a domain (`example.com`; `*.example.com` for its subdomains), reached on ports 80 and 443 through the egress proxy, or an IPv4 address or range (`203.0.113.0/24`), reached directly over TCP; either with an optional `:port`. Private, loopback, link-local and metadata ranges are never reachable. At most 100 entries; empty for other egress modes. */
          allow?: string[];
          /** With egress `allowlist`: entries (as in `allow`) never reached, even when `allow` names them. At most 100; empty for other egress modes. */
          deny?: string[];
        };
        /** Free-form organization-specific JSON, stored and returned as given (at most 16384 bytes). */
        settings?: Record<string, unknown>;
        /** What the unauthenticated raw endpoint GET /vm/{instance_id}/file/{path} serves of this profile's instances: `all` (the specification's behaviour: any file the instance's user can read, to anyone holding the instance id), `changed` (only files a command listed in files_changed as created or modified, and not deleted since), or `off` (nothing). Takes effect at once for live instances. The authenticated read (…/file/{path}?raw=1) is not affected. */
        raw_files?: 'all' | 'changed' | 'off';
        /** Instances of this profile kept booted and unassigned, so that a create in a new room takes one at once instead of starting a machine (refilled in the background after each one is taken). Pooled instances count against the organization's quotas like any other; a change to any other field of the profile replaces them. 0: no pool. */
        warm_pool?: number;
        /** Keep each command's undo point, so that POST .../commands/{command_id}/revert can put back the files it changed. Instances get a btrfs writable layer (about 0.2 s more to create) that can keep undo points; a command may then also opt out (`"keep_undo": false`). Undo points are bounded per instance (ROOMKIT_UNDO_MAX_POINTS, ROOMKIT_UNDO_MAX_MB; the oldest dropped first). Takes effect for instances created after the change. */
        keep_undo?: boolean;
      };
      responses: {
        201: Profile;
        400: ErrorBody;
        401: ErrorBody;
        409: ErrorBody;
      };
    };
  };
  '/api/profiles/{profile_id}': {
    /** Get a profile */
    get: {
      params: {
        /** Profile id (UUID), or the profile's name */
        profile_id: string;
      };
      query: Record<string, never>;
      body: undefined;
      responses: {
        200: Profile;
        400: ErrorBody;
        401: ErrorBody;
        404: ErrorBody;
      };
    };
    /** Delete a profile */
    delete: {
      params: {
        /** Profile id (UUID), or the profile's name */
        profile_id: string;
      };
      query: Record<string, never>;
      body: undefined;
      responses: {
        204: undefined;
        400: ErrorBody;
        401: ErrorBody;
        404: ErrorBody;
        409: ErrorBody;
      };
    };
    /** Change a profile */
    patch: {
      params: {
        /** Profile id (UUID), or the profile's name */
        profile_id: string;
      };
      query: Record<string, never>;
      body: {
        /** Unique within the organization. */
        name?: string;
        /** Base image of the root filesystem: `debian:bookworm`, `debian:trixie`, `template:NAME` for a template of the organization built from a Dockerfile, or `oci:<name>[:<tag>]` for an OCI image layout the operator put in the server's OCI directory. */
        image?: string;
        /** Distribution packages installed into the image, e.g. `["nodejs", "jq"]`. */
        packages?: string[];
        /** Memory of each instance, MiB. */
        memory_mb?: number;
        /** CPUs each instance may use. */
        vcpus?: number;
        /** Size of the writable filesystem layer of each instance, MiB. */
        disk_mb?: number;
        /** Unprivileged user that commands run as (not `root`). */
        user?: string;
        /** Home and working directory of the user; defaults to `/home/<user>`. */
        home?: string;
        /** Environment variables set for every command. */
        env?: Record<string, string>;
        /** Time limit of a command, seconds: the default, and the most a command may ask for. */
        command_timeout_s?: number;
        /** Silence limit of a command, seconds: one that prints nothing (stdout nor stderr) for this long is ended as at its time limit, with the end reason `no_output`. The default of a command's `idle_output_timeout_s`, but for background commands (none unless they ask); 0 = none. */
        command_idle_output_timeout_s?: number;
        /** Pause or stop (idle_action) an instance after this long without a command or file request; 0 = never. */
        idle_timeout_s?: number;
        /** What happens to an instance idle for idle_timeout_s: `pause` (its machine stops, its files are kept, and the next request resumes it; removed after paused_retention_s) or `stop` (removed with everything in it). A runtime that cannot pause stops. */
        idle_action?: 'pause' | 'stop';
        /** How long a paused instance is kept, seconds from its pause; then it is removed with its files (state history: `retention`). At most 7776000 (90 days). */
        paused_retention_s?: number;
        /** Stop an instance this long after it was created, whatever it is doing; 0 = never. */
        max_lifetime_s?: number;
        /** Egress policy of the instances. */
        network?: {
          /** `internet`: outbound traffic to public addresses; `none`: no route out; `allowlist`: only what `allow` names (less what `deny` names), through roomkit's resolver and egress proxy (docs/api.md, "Egress allowlists"). */
          egress?: 'none' | 'internet' | 'allowlist';
          /** With egress `allowlist`: what instances may reach. Each entry a domain (`example.com`; `*.example.com` for its subdomains), reached on ports 80 and 443 through the egress proxy, or an IPv4 address or range (`203.0.113.0/24`), reached directly over TCP; either with an optional `:port`. Private, loopback, link-local and metadata ranges are never reachable. At most 100 entries; empty for other egress modes. */
          allow?: string[];
          /** With egress `allowlist`: entries (as in `allow`) never reached, even when `allow` names them. At most 100; empty for other egress modes. */
          deny?: string[];
        };
        /** Free-form organization-specific JSON, stored and returned as given (at most 16384 bytes). */
        settings?: Record<string, unknown>;
        /** What the unauthenticated raw endpoint GET /vm/{instance_id}/file/{path} serves of this profile's instances: `all` (the specification's behaviour: any file the instance's user can read, to anyone holding the instance id), `changed` (only files a command listed in files_changed as created or modified, and not deleted since), or `off` (nothing). Takes effect at once for live instances. The authenticated read (…/file/{path}?raw=1) is not affected. */
        raw_files?: 'all' | 'changed' | 'off';
        /** Instances of this profile kept booted and unassigned, so that a create in a new room takes one at once instead of starting a machine (refilled in the background after each one is taken). Pooled instances count against the organization's quotas like any other; a change to any other field of the profile replaces them. 0: no pool. */
        warm_pool?: number;
        /** Keep each command's undo point, so that POST .../commands/{command_id}/revert can put back the files it changed. Instances get a btrfs writable layer (about 0.2 s more to create) that can keep undo points; a command may then also opt out (`"keep_undo": false`). Undo points are bounded per instance (ROOMKIT_UNDO_MAX_POINTS, ROOMKIT_UNDO_MAX_MB; the oldest dropped first). Takes effect for instances created after the change. */
        keep_undo?: boolean;
      };
      responses: {
        200: Profile;
        400: ErrorBody;
        401: ErrorBody;
        404: ErrorBody;
        409: ErrorBody;
      };
    };
  };
  '/api/profile/{profile_id}/room/{room_id}': {
    /** Get the room's instance */
    get: {
      params: {
        /** Profile id (UUID), or the profile's name */
        profile_id: string;
        /** Caller-chosen room name: 1-128 characters of A-Z a-z 0-9 . _ - (not `.` or `..`) */
        room_id: string;
      };
      query: Record<string, never>;
      body: undefined;
      responses: {
        200: Instance;
        400: ErrorBody;
        401: ErrorBody;
        404: ErrorBody;
      };
    };
    /** Create the room's instance */
    post: {
      params: {
        /** Profile id (UUID), or the profile's name */
        profile_id: string;
        /** Caller-chosen room name: 1-128 characters of A-Z a-z 0-9 . _ - (not `.` or `..`) */
        room_id: string;
      };
      query: Record<string, never>;
      body: {
        /** Wait until the instance is ready (default true) */
        wait?: boolean;
        /** Start from this snapshot of the organization (POST …/snapshots) instead of the profile's image */
        snapshot_id?: string;
        /** Environment variables for every command, background command and terminal of this instance: set over the profile's `env`, under a command's own `env`. At most 100 names (`[A-Za-z_][A-Za-z0-9_]*`, not starting with ROOMKIT_), values of up to 4096 characters, 65536 bytes in all. Values are never answered back (they are often secrets): the instance shows `env_names`. */
        env?: Record<string, string>;
        /** Labels of the instance, e.g. `{"user": "u-42", "app": "grader"}`: shown on the instance, and GET /api/instances?metadata=… filters by them. At most 50; keys of 1-64 characters `[A-Za-z0-9._/-]` (starting with a letter or digit), values of up to 256 characters. */
        metadata?: Record<string, string>;
        /** Seconds the instance may run from its create (or its last keep-alive): when they have passed it is paused or stopped as the profile's `idle_action` says (state history: `timeout`). At most the profile's `max_lifetime_s` when that is not 0. POST …/keepalive moves the deadline. */
        timeout_s?: number;
        /** This instance's egress policy, over the profile's `network` (fields left out are the profile's); PUT …/network changes it while it runs. */
        network?: {
          /** `internet`: outbound traffic to public addresses; `none`: no route out; `allowlist`: only what `allow` names (less what `deny` names), through roomkit's resolver and egress proxy (docs/api.md, "Egress allowlists"). */
          egress?: 'none' | 'internet' | 'allowlist';
          /** With egress `allowlist`: what instances may reach. Each entry a domain (`example.com`; `*.example.com` for its subdomains), reached on ports 80 and 443 through the egress proxy, or an IPv4 address or range (`203.0.113.0/24`), reached directly over TCP; either with an optional `:port`. Private, loopback, link-local and metadata ranges are never reachable. At most 100 entries; empty for other egress modes. */
          allow?: string[];
          /** With egress `allowlist`: entries (as in `allow`) never reached, even when `allow` names them. At most 100; empty for other egress modes. */
          deny?: string[];
        };
      };
      responses: {
        200: Instance;
        201: Instance;
        202: Instance;
        400: ErrorBody;
        401: ErrorBody;
        403: ErrorBody;
        404: ErrorBody;
        409: ErrorBody;
        422: ErrorBody;
        500: ErrorBody;
        503: ErrorBody;
      };
    };
    /** Delete the room's instance */
    delete: {
      params: {
        /** Profile id (UUID), or the profile's name */
        profile_id: string;
        /** Caller-chosen room name: 1-128 characters of A-Z a-z 0-9 . _ - (not `.` or `..`) */
        room_id: string;
      };
      query: Record<string, never>;
      body: undefined;
      responses: {
        200: Instance;
        400: ErrorBody;
        401: ErrorBody;
        404: ErrorBody;
      };
    };
  };
  '/api/profile/{profile_id}/room/{room_id}/pause': {
    /** Pause the room's instance */
    post: {
      params: {
        /** Profile id (UUID), or the profile's name */
        profile_id: string;
        /** Caller-chosen room name: 1-128 characters of A-Z a-z 0-9 . _ - (not `.` or `..`) */
        room_id: string;
      };
      query: Record<string, never>;
      body: {
        /** Keep the instance's memory and processes (true, where the runtime can: `pause.memory_kept` in the answer says whether it did), or only its files (false: its processes end, and a resume boots it over its files) */
        memory?: boolean;
      };
      responses: {
        200: Instance;
        400: ErrorBody;
        401: ErrorBody;
        404: ErrorBody;
        409: ErrorBody;
        500: ErrorBody;
        503: ErrorBody;
      };
    };
  };
  '/api/profile/{profile_id}/room/{room_id}/resume': {
    /** Resume the room's paused instance */
    post: {
      params: {
        /** Profile id (UUID), or the profile's name */
        profile_id: string;
        /** Caller-chosen room name: 1-128 characters of A-Z a-z 0-9 . _ - (not `.` or `..`) */
        room_id: string;
      };
      query: Record<string, never>;
      body: undefined;
      responses: {
        200: Instance;
        400: ErrorBody;
        401: ErrorBody;
        403: ErrorBody;
        404: ErrorBody;
        409: ErrorBody;
        500: ErrorBody;
        503: ErrorBody;
      };
    };
  };
  '/api/profile/{profile_id}/room/{room_id}/keepalive': {
    /** Keep the room's instance alive */
    post: {
      params: {
        /** Profile id (UUID), or the profile's name */
        profile_id: string;
        /** Caller-chosen room name: 1-128 characters of A-Z a-z 0-9 . _ - (not `.` or `..`) */
        room_id: string;
      };
      query: Record<string, never>;
      body: {
        /** Seconds from now to the new deadline, at most the profile's `max_lifetime_s` when that is not 0 (default: the instance's `timeout_s`; without either, only the idle limit is reset) */
        timeout_s?: number;
      };
      responses: {
        200: Instance;
        400: ErrorBody;
        401: ErrorBody;
        404: ErrorBody;
      };
    };
  };
  '/api/instances': {
    /** List instances */
    get: {
      params: Record<string, never>;
      query: {
        profile_id?: string;
        state?: 'active' | 'network_allocated' | 'ftap_created' | 'image_generated' | 'vm_started' | 'vm_booted' | 'ready' | 'pausing' | 'paused' | 'resuming' | 'stopping' | 'stopped' | 'failed' | 'lost';
        /** Only instances carrying all these labels: `key=value` pairs joined by `&`, the whole URL-encoded as one parameter, e.g. `metadata=user%3Du-42%26app%3Dgrader` for `user=u-42&app=grader` (the form of E2B's list). Keys and values inside are URL-encoded too; exact match, case-sensitive. */
        metadata?: string;
        /** 1-200, default 50 */
        limit?: string;
        cursor?: string;
      };
      body: undefined;
      responses: {
        200: {
          instances: Instance[];
          next_cursor: string | null;
        };
        400: ErrorBody;
        401: ErrorBody;
      };
    };
  };
  '/api/profile/{profile_id}/room/{room_id}/network': {
    /** Change the egress policy of the room's instance */
    put: {
      params: {
        /** Profile id (UUID), or the profile's name */
        profile_id: string;
        /** Caller-chosen room name: 1-128 characters of A-Z a-z 0-9 . _ - (not `.` or `..`) */
        room_id: string;
      };
      query: Record<string, never>;
      body: {
        /** `internet`: outbound traffic to public addresses; `none`: no route out; `allowlist`: only what `allow` names (less what `deny` names), through roomkit's resolver and egress proxy (docs/api.md, "Egress allowlists"). */
        egress: 'none' | 'internet' | 'allowlist';
        /** With egress `allowlist`: what instances may reach. Each entry a domain (`example.com`; `*.example.com` for its subdomains), reached on ports 80 and 443 through the egress proxy, or an IPv4 address or range (`203.0.113.0/24`), reached directly over TCP; either with an optional `:port`. Private, loopback, link-local and metadata ranges are never reachable. At most 100 entries; empty for other egress modes. */
        allow?: string[];
        /** With egress `allowlist`: entries (as in `allow`) never reached, even when `allow` names them. At most 100; empty for other egress modes. */
        deny?: string[];
      };
      responses: {
        200: {
          /** `internet`: outbound traffic to public addresses; `none`: no route out; `allowlist`: only what `allow` names (less what `deny` names), through roomkit's resolver and egress proxy (docs/api.md, "Egress allowlists"). */
          egress: 'none' | 'internet' | 'allowlist';
          /** With egress `allowlist`: what instances may reach. Each entry a domain (`example.com`; `*.example.com` for its subdomains), reached on ports 80 and 443 through the egress proxy, or an IPv4 address or range (`203.0.113.0/24`), reached directly over TCP; either with an optional `:port`. Private, loopback, link-local and metadata ranges are never reachable. At most 100 entries; empty for other egress modes. */
          allow: string[];
          /** With egress `allowlist`: entries (as in `allow`) never reached, even when `allow` names them. At most 100; empty for other egress modes. */
          deny: string[];
        };
        400: ErrorBody;
        401: ErrorBody;
        404: ErrorBody;
        409: ErrorBody;
      };
    };
  };
  '/api/profile/{profile_id}/room/{room_id}/snapshots': {
    /** Take a snapshot of the room's instance */
    post: {
      params: {
        /** Profile id (UUID), or the profile's name */
        profile_id: string;
        /** Caller-chosen room name: 1-128 characters of A-Z a-z 0-9 . _ - (not `.` or `..`) */
        room_id: string;
      };
      query: Record<string, never>;
      body: {
        /** A name of yours for it (not unique) */
        name?: string;
        /** Save the instance's memory and processes too (where the runtime can; a paused instance's only when its pause kept them): instances started from it go on running them. false: its files only */
        memory?: boolean;
      };
      responses: {
        201: Snapshot;
        400: ErrorBody;
        401: ErrorBody;
        403: ErrorBody;
        404: ErrorBody;
        409: ErrorBody;
        422: ErrorBody;
        500: ErrorBody;
        503: ErrorBody;
        507: ErrorBody;
      };
    };
  };
  '/api/profile/{profile_id}/room/{room_id}/fork': {
    /** Fork the room's instance into other rooms */
    post: {
      params: {
        /** Profile id (UUID), or the profile's name */
        profile_id: string;
        /** Caller-chosen room name: 1-128 characters of A-Z a-z 0-9 . _ - (not `.` or `..`) */
        room_id: string;
      };
      query: Record<string, never>;
      body: {
        /** Rooms of the same profile to start the copies in, 1-20; none may have a live instance */
        rooms: string[];
        /** Copy the instance's memory and processes into each copy (where the runtime can): they go on running there, the source goes on running too. false: files only, each copy boots over them */
        memory?: boolean;
        /** Keep the snapshot the fork was made from (answered as `snapshot`); by default it is deleted once every copy has started */
        keep_snapshot?: boolean;
      };
      responses: {
        201: ForkResult;
        400: ErrorBody;
        401: ErrorBody;
        403: ErrorBody;
        404: ErrorBody;
        409: ErrorBody;
        422: ErrorBody;
        500: ErrorBody;
        503: ErrorBody;
        507: ErrorBody;
      };
    };
  };
  '/api/snapshots': {
    /** List snapshots */
    get: {
      params: Record<string, never>;
      query: {
        /** Only snapshots taken of this instance */
        instance_id?: string;
        /** 1-200, default 50 */
        limit?: string;
        cursor?: string;
      };
      body: undefined;
      responses: {
        200: {
          snapshots: Snapshot[];
          next_cursor: string | null;
        };
        400: ErrorBody;
        401: ErrorBody;
      };
    };
  };
  '/api/snapshots/{snapshot_id}': {
    /** Get a snapshot */
    get: {
      params: {
        snapshot_id: string;
      };
      query: Record<string, never>;
      body: undefined;
      responses: {
        200: Snapshot;
        400: ErrorBody;
        401: ErrorBody;
        404: ErrorBody;
      };
    };
    /** Delete a snapshot */
    delete: {
      params: {
        snapshot_id: string;
      };
      query: Record<string, never>;
      body: undefined;
      responses: {
        200: Snapshot;
        400: ErrorBody;
        401: ErrorBody;
        404: ErrorBody;
        503: ErrorBody;
      };
    };
  };
  '/api/templates': {
    /** List templates */
    get: {
      params: Record<string, never>;
      query: Record<string, never>;
      body: undefined;
      responses: {
        200: {
          templates: Template[];
        };
        401: ErrorBody;
      };
    };
    /** Build a template from a Dockerfile */
    post: {
      params: Record<string, never>;
      query: Record<string, never>;
      body: {
        /** The template's name in the organization (profiles use it as `template:NAME`): lower-case letters, digits, `.`, `_`, `-`; at most 63 */
        name: string;
        /** The Dockerfile's text */
        dockerfile: string;
        /** The build context: each file's path (relative, `/`-separated) and its bytes in base64, for COPY and ADD. At most 1000 files and 16 MiB decoded */
        files?: Record<string, string>;
      };
      responses: {
        202: TemplateBuildStarted;
        400: ErrorBody;
        401: ErrorBody;
        409: ErrorBody;
        413: ErrorBody;
      };
    };
  };
  '/api/templates/{name_or_id}': {
    /** Get a template */
    get: {
      params: {
        /** The template's name or its template_id */
        name_or_id: string;
      };
      query: Record<string, never>;
      body: undefined;
      responses: {
        200: Template;
        400: ErrorBody;
        401: ErrorBody;
        404: ErrorBody;
      };
    };
    /** Delete a template */
    delete: {
      params: {
        /** The template's name or its template_id */
        name_or_id: string;
      };
      query: Record<string, never>;
      body: undefined;
      responses: {
        200: Template;
        400: ErrorBody;
        401: ErrorBody;
        404: ErrorBody;
      };
    };
  };
  '/api/templates/{name_or_id}/builds/{build_id}/logs': {
    /** Read a build's log */
    get: {
      params: {
        /** The template's name or its template_id */
        name_or_id: string;
        build_id: string;
      };
      query: Record<string, never>;
      body: undefined;
      responses: {
        200: undefined;
        400: ErrorBody;
        401: ErrorBody;
        404: ErrorBody;
      };
    };
  };
  '/api/profile/{profile_id}/room/{room_id}/command': {
    /** Run a command */
    post: {
      params: {
        /** Profile id (UUID), or the profile's name */
        profile_id: string;
        /** Caller-chosen room name: 1-128 characters of A-Z a-z 0-9 . _ - (not `.` or `..`) */
        room_id: string;
      };
      query: Record<string, never>;
      body: {
        /** Shell command, at most 65536 bytes */
        command: string;
        /** Time limit, seconds; default and maximum: the profile's command_timeout_s */
        timeout_s?: number;
        /** Silence limit, seconds: a command that prints nothing (stdout nor stderr) for this long is ended as at its time limit (its whole process tree killed, `timed_out` true), with the end reason `no_output`. Default: the profile's command_idle_output_timeout_s (none for a background command); 0 = none */
        idle_output_timeout_s?: number;
        /** Working directory, absolute or relative to the home */
        cwd?: string;
        /** Extra environment variables, over the profile's */
        env?: Record<string, string>;
        /** Answer with Server-Sent Events as the command prints (as `Accept: text/event-stream` does) */
        stream?: boolean;
        /** With a stream: kill the command when the client goes away (default false: it runs on, readable by its id) */
        kill_on_disconnect?: boolean;
        /** Answer 202 at once; no time limit unless timeout_s is given (the profile's ceiling does not apply) */
        background?: boolean;
        /** Input for the command's stdin, which is closed after it; at most 1048576 bytes once decoded (ROOMKIT_MAX_STDIN_BYTES) */
        stdin?: string;
        /** How `stdin` is given: `utf8` text (the default) or `base64` for any bytes */
        stdin_encoding?: 'utf8' | 'base64';
        /** Keep this command's undo point, so that POST .../commands/{command_id}/revert can put back the files it changes (default: the profile's keep_undo). true needs an instance of a profile with keep_undo (400 undo_unavailable otherwise); false skips it on such a profile */
        keep_undo?: boolean;
        /** Background commands only: keep stdin open (after `stdin`, if given) for POST .../commands/{command_id}/stdin. 409 feature_unavailable while the agent in the instance does not answer */
        stdin_open?: boolean;
      };
      responses: {
        200: CommandResult;
        202: CommandStatus;
        400: ErrorBody;
        401: ErrorBody;
        404: ErrorBody;
        409: ErrorBody;
        413: ErrorBody;
        422: ErrorBody;
        429: ErrorBody;
        500: ErrorBody;
        503: ErrorBody;
      };
    };
  };
  '/api/profile/{profile_id}/room/{room_id}/commands/{command_id}': {
    /** A command's state and output */
    get: {
      params: {
        /** Profile id (UUID), or the profile's name */
        profile_id: string;
        /** Caller-chosen room name: 1-128 characters of A-Z a-z 0-9 . _ - (not `.` or `..`) */
        room_id: string;
        /** Command id, from a CommandResult, a CommandStatus or the room's command list */
        command_id: string;
      };
      query: {
        /** Byte offset to read the output from */
        offset?: string;
      };
      body: undefined;
      responses: {
        200: CommandStatus;
        400: ErrorBody;
        401: ErrorBody;
        404: ErrorBody;
      };
    };
  };
  '/api/profile/{profile_id}/room/{room_id}/commands/{command_id}/kill': {
    /** Signal a running command */
    post: {
      params: {
        /** Profile id (UUID), or the profile's name */
        profile_id: string;
        /** Caller-chosen room name: 1-128 characters of A-Z a-z 0-9 . _ - (not `.` or `..`) */
        room_id: string;
        /** Command id, from a CommandResult, a CommandStatus or the room's command list */
        command_id: string;
      };
      query: Record<string, never>;
      body: {
        /** Default KILL */
        signal?: 'TERM' | 'KILL' | 'INT' | 'HUP';
      };
      responses: {
        200: CommandStatus;
        400: ErrorBody;
        401: ErrorBody;
        404: ErrorBody;
        409: ErrorBody;
      };
    };
  };
  '/api/profile/{profile_id}/room/{room_id}/commands/{command_id}/revert': {
    /** Revert the file changes of one command */
    post: {
      params: {
        /** Profile id (UUID), or the profile's name */
        profile_id: string;
        /** Caller-chosen room name: 1-128 characters of A-Z a-z 0-9 . _ - (not `.` or `..`) */
        room_id: string;
        /** Command id, from a CommandResult, a CommandStatus or the room's command list */
        command_id: string;
      };
      query: Record<string, never>;
      body: {
        /** Revert even when later commands changed some of the same files (their changes to those files are undone too) */
        force?: boolean;
      };
      responses: {
        200: RevertResult;
        400: ErrorBody;
        401: ErrorBody;
        404: ErrorBody;
        409: ErrorBody;
      };
    };
  };
  '/api/profile/{profile_id}/room/{room_id}/commands/{command_id}/stdin': {
    /** Write to a running command's stdin */
    post: {
      params: {
        /** Profile id (UUID), or the profile's name */
        profile_id: string;
        /** Caller-chosen room name: 1-128 characters of A-Z a-z 0-9 . _ - (not `.` or `..`) */
        room_id: string;
        /** Command id, from a CommandResult, a CommandStatus or the room's command list */
        command_id: string;
      };
      query: Record<string, never>;
      body: {
        /** Input to write; at most 1048576 bytes once decoded (ROOMKIT_MAX_STDIN_BYTES) */
        data?: string;
        /** How `data` is given: `utf8` text (the default) or `base64` for any bytes */
        encoding?: 'utf8' | 'base64';
        /** Close the command's stdin after `data` (it then reads end of input) */
        close?: boolean;
      };
      responses: {
        200: StdinWritten;
        400: ErrorBody;
        401: ErrorBody;
        404: ErrorBody;
        409: ErrorBody;
        413: ErrorBody;
      };
    };
  };
  '/api/profile/{profile_id}/room/{room_id}/commands': {
    /** List the room's commands */
    get: {
      params: {
        /** Profile id (UUID), or the profile's name */
        profile_id: string;
        /** Caller-chosen room name: 1-128 characters of A-Z a-z 0-9 . _ - (not `.` or `..`) */
        room_id: string;
      };
      query: {
        /** 1-200, default 50 */
        limit?: string;
        cursor?: string;
      };
      body: undefined;
      responses: {
        200: {
          commands: CommandRecord[];
          next_cursor: string | null;
        };
        400: ErrorBody;
        401: ErrorBody;
        404: ErrorBody;
      };
    };
  };
  '/api/profile/{profile_id}/room/{room_id}/contexts': {
    /** List code contexts */
    get: {
      params: {
        /** Profile id (UUID), or the profile's name */
        profile_id: string;
        /** Caller-chosen room name: 1-128 characters of A-Z a-z 0-9 . _ - (not `.` or `..`) */
        room_id: string;
      };
      query: Record<string, never>;
      body: undefined;
      responses: {
        200: ContextList;
        401: ErrorBody;
        404: ErrorBody;
      };
    };
    /** Make a code context */
    post: {
      params: {
        /** Profile id (UUID), or the profile's name */
        profile_id: string;
        /** Caller-chosen room name: 1-128 characters of A-Z a-z 0-9 . _ - (not `.` or `..`) */
        room_id: string;
      };
      query: Record<string, never>;
      body: ContextCreate;
      responses: {
        201: Context;
        400: ErrorBody;
        401: ErrorBody;
        404: ErrorBody;
        409: ErrorBody;
        429: ErrorBody;
        500: ErrorBody;
        503: ErrorBody;
      };
    };
  };
  '/api/profile/{profile_id}/room/{room_id}/contexts/{context_id}': {
    /** Get a code context */
    get: {
      params: {
        /** Profile id (UUID), or the profile's name */
        profile_id: string;
        /** Caller-chosen room name: 1-128 characters of A-Z a-z 0-9 . _ - (not `.` or `..`) */
        room_id: string;
        /** Context id, from POST …/contexts or the list */
        context_id: string;
      };
      query: Record<string, never>;
      body: undefined;
      responses: {
        200: Context;
        401: ErrorBody;
        404: ErrorBody;
      };
    };
    /** Delete a code context */
    delete: {
      params: {
        /** Profile id (UUID), or the profile's name */
        profile_id: string;
        /** Caller-chosen room name: 1-128 characters of A-Z a-z 0-9 . _ - (not `.` or `..`) */
        room_id: string;
        /** Context id, from POST …/contexts or the list */
        context_id: string;
      };
      query: Record<string, never>;
      body: undefined;
      responses: {
        204: undefined;
        401: ErrorBody;
        404: ErrorBody;
      };
    };
  };
  '/api/profile/{profile_id}/room/{room_id}/contexts/{context_id}/restart': {
    /** Restart a code context */
    post: {
      params: {
        /** Profile id (UUID), or the profile's name */
        profile_id: string;
        /** Caller-chosen room name: 1-128 characters of A-Z a-z 0-9 . _ - (not `.` or `..`) */
        room_id: string;
        /** Context id, from POST …/contexts or the list */
        context_id: string;
      };
      query: Record<string, never>;
      body: undefined;
      responses: {
        200: Context;
        401: ErrorBody;
        404: ErrorBody;
        409: ErrorBody;
        500: ErrorBody;
      };
    };
  };
  '/api/profile/{profile_id}/room/{room_id}/contexts/{context_id}/interrupt': {
    /** Interrupt a code context's run */
    post: {
      params: {
        /** Profile id (UUID), or the profile's name */
        profile_id: string;
        /** Caller-chosen room name: 1-128 characters of A-Z a-z 0-9 . _ - (not `.` or `..`) */
        room_id: string;
        /** Context id, from POST …/contexts or the list */
        context_id: string;
      };
      query: Record<string, never>;
      body: Record<string, never>;
      responses: {
        200: ContextInterrupted;
        401: ErrorBody;
        404: ErrorBody;
      };
    };
  };
  '/api/profile/{profile_id}/room/{room_id}/contexts/{context_id}/run': {
    /** Run code in a code context */
    post: {
      params: {
        /** Profile id (UUID), or the profile's name */
        profile_id: string;
        /** Caller-chosen room name: 1-128 characters of A-Z a-z 0-9 . _ - (not `.` or `..`) */
        room_id: string;
        /** Context id, from POST …/contexts or the list */
        context_id: string;
      };
      query: Record<string, never>;
      body: ContextRunRequest;
      responses: {
        200: ContextRunResult;
        400: ErrorBody;
        401: ErrorBody;
        404: ErrorBody;
        409: ErrorBody;
        500: ErrorBody;
        503: ErrorBody;
      };
    };
  };
  '/api/profile/{profile_id}/room/{room_id}/file/{path}': {
    /** Read a file */
    get: {
      params: {
        /** Profile id (UUID), or the profile's name */
        profile_id: string;
        /** Caller-chosen room name: 1-128 characters of A-Z a-z 0-9 . _ - (not `.` or `..`) */
        room_id: string;
        /** File path: relative to the home directory, or absolute with a leading slash (…/file//etc/hosts) */
        path: string;
      };
      query: {
        /** `1`: answer with the file's bytes rather than JSON */
        raw?: '1' | 'true' | '0' | 'false';
      };
      body: undefined;
      responses: {
        200: FileContent;
        400: ErrorBody;
        401: ErrorBody;
        403: ErrorBody;
        404: ErrorBody;
        409: ErrorBody;
        413: ErrorBody;
        416: ErrorBody;
      };
    };
    /** Write a file */
    put: {
      params: {
        /** Profile id (UUID), or the profile's name */
        profile_id: string;
        /** Caller-chosen room name: 1-128 characters of A-Z a-z 0-9 . _ - (not `.` or `..`) */
        room_id: string;
        /** File path: relative to the home directory, or absolute with a leading slash (…/file//etc/hosts) */
        path: string;
      };
      query: Record<string, never>;
      body: undefined;
      responses: {
        200: FileWritten;
        201: FileWritten;
        400: ErrorBody;
        401: ErrorBody;
        403: ErrorBody;
        404: ErrorBody;
        409: ErrorBody;
        413: ErrorBody;
        507: ErrorBody;
      };
    };
    /** Delete a file */
    delete: {
      params: {
        /** Profile id (UUID), or the profile's name */
        profile_id: string;
        /** Caller-chosen room name: 1-128 characters of A-Z a-z 0-9 . _ - (not `.` or `..`) */
        room_id: string;
        /** File path: relative to the home directory, or absolute with a leading slash (…/file//etc/hosts) */
        path: string;
      };
      query: Record<string, never>;
      body: undefined;
      responses: {
        200: {
          file_path: string;
          /** Only on names that are not valid UTF-8: the path is percent-escaped (`%` as `%25`, each byte that is not UTF-8 as `%XX`); its public_url and the file endpoints take the same bytes percent-encoded */
          path_encoding?: 'percent';
          instance_id: string;
          status: 'deleted';
        };
        400: ErrorBody;
        401: ErrorBody;
        403: ErrorBody;
        404: ErrorBody;
        409: ErrorBody;
      };
    };
  };
  '/api/profile/{profile_id}/room/{room_id}/files': {
    /** List a directory */
    get: {
      params: {
        /** Profile id (UUID), or the profile's name */
        profile_id: string;
        /** Caller-chosen room name: 1-128 characters of A-Z a-z 0-9 . _ - (not `.` or `..`) */
        room_id: string;
      };
      query: {
        /** Absolute, or relative to the home directory */
        path?: string;
      };
      body: undefined;
      responses: {
        200: {
          path: string;
          /** Only on names that are not valid UTF-8: the path is percent-escaped (`%` as `%25`, each byte that is not UTF-8 as `%XX`); its public_url and the file endpoints take the same bytes percent-encoded */
          path_encoding?: 'percent';
          instance_id: string;
          entries: {
            name: string;
            /** Only on names that are not valid UTF-8: the path is percent-escaped (`%` as `%25`, each byte that is not UTF-8 as `%XX`); its public_url and the file endpoints take the same bytes percent-encoded */
            name_encoding?: 'percent';
            type: 'file' | 'directory' | 'symlink' | 'other';
            size: number;
            /** Permission bits, octal */
            mode: string;
            mtime: string;
          }[];
          truncated: boolean;
        };
        400: ErrorBody;
        401: ErrorBody;
        403: ErrorBody;
        404: ErrorBody;
        409: ErrorBody;
      };
    };
  };
  '/vm/{instance_id}/file/{path}': {
    /** Raw file content (no authentication) */
    get: {
      params: {
        /** The instance's id, from a CommandResult's public_url or the instance */
        instance_id: string;
        /** Absolute path of the file, without its leading slash */
        path: string;
      };
      query: Record<string, never>;
      body: undefined;
      responses: {
        200: undefined;
        206: undefined;
        304: unknown;
        400: ErrorBody;
        403: ErrorBody;
        404: ErrorBody;
        409: ErrorBody;
        416: ErrorBody;
        429: ErrorBody;
      };
    };
  };
  '/api/profile/{profile_id}/room/{room_id}/terminal/ticket': {
    /** Get a ticket to open a terminal */
    post: {
      params: {
        /** Profile id (UUID), or the profile's name */
        profile_id: string;
        /** Caller-chosen room name: 1-128 characters of A-Z a-z 0-9 . _ - (not `.` or `..`) */
        room_id: string;
      };
      query: Record<string, never>;
      body: undefined;
      responses: {
        201: TerminalTicket;
        400: ErrorBody;
        401: ErrorBody;
        404: ErrorBody;
        409: ErrorBody;
        429: ErrorBody;
        503: ErrorBody;
      };
    };
  };
  '/api/profile/{profile_id}/room/{room_id}/terminal': {
    /** Open a terminal (WebSocket) */
    get: {
      params: {
        /** Profile id (UUID), or the profile's name */
        profile_id: string;
        /** Caller-chosen room name: 1-128 characters of A-Z a-z 0-9 . _ - (not `.` or `..`) */
        room_id: string;
      };
      query: {
        /** Columns, 1-1000; default 80 */
        cols?: string;
        /** Rows, 1-1000; default 24 */
        rows?: string;
        /** Run this with `sh -c` on the terminal instead of the login shell */
        command?: string;
        /** A ticket from POST …/terminal/ticket, in place of the Authorization header */
        ticket?: string;
        /** Attach again to this terminal, closed with reason `instance_paused` when its instance was paused with its memory: the same shell, its recent output replayed (resumes the instance first, as any terminal request does) */
        terminal_id?: string;
      };
      body: undefined;
      responses: {
        101: unknown;
        400: ErrorBody;
        401: ErrorBody;
        404: ErrorBody;
        409: ErrorBody;
        426: ErrorBody;
        429: ErrorBody;
        503: ErrorBody;
      };
    };
  };
  '/api/profile/{profile_id}/room/{room_id}/ports/{port}/url': {
    /** Get a signed URL of a port (for browsers) */
    post: {
      params: {
        /** Profile id (UUID), or the profile's name */
        profile_id: string;
        /** Caller-chosen room name: 1-128 characters of A-Z a-z 0-9 . _ - (not `.` or `..`) */
        room_id: string;
        /** The TCP port inside the instance, 1-65535 (not roomkit's own agent port, nor one the operator reserved) */
        port: string;
      };
      query: Record<string, never>;
      body: PortUrlRequest;
      responses: {
        201: PortUrl;
        400: ErrorBody;
        401: ErrorBody;
        404: ErrorBody;
        409: ErrorBody;
      };
    };
  };
  '/api/profile/{profile_id}/room/{room_id}/tools': {
    /** Get the room's tool schema */
    get: {
      params: {
        /** Profile id (UUID), or the profile's name */
        profile_id: string;
        /** Caller-chosen room name: 1-128 characters of A-Z a-z 0-9 . _ - (not `.` or `..`) */
        room_id: string;
      };
      query: {
        /** Shape of `tools` (default roomkit) */
        format?: 'roomkit' | 'openai' | 'anthropic' | 'mcp';
      };
      body: undefined;
      responses: {
        200: ToolSet;
        400: ErrorBody;
        401: ErrorBody;
        404: ErrorBody;
      };
    };
  };
  '/api/profile/{profile_id}/room/{room_id}/tools/call': {
    /** Run one of the room's tools */
    post: {
      params: {
        /** Profile id (UUID), or the profile's name */
        profile_id: string;
        /** Caller-chosen room name: 1-128 characters of A-Z a-z 0-9 . _ - (not `.` or `..`) */
        room_id: string;
      };
      query: Record<string, never>;
      body: {
        /** The tool, e.g. `run_command` */
        name: string;
        /** The id the model gave the call (OpenAI's `tool_calls[].id`, Anthropic's `tool_use` `id`): a retry of the call with the same id answers the first call's result and runs nothing again (as an Idempotency-Key, which wins when both are sent); the same id with another call answers 422 `idempotency_key_reused` */
        call_id?: string;
        /** The tool's arguments: an object, or its JSON text (as OpenAI tool calls carry it); default {} */
        arguments?: Record<string, unknown> | string;
      };
      responses: {
        200: ToolCallResult;
        400: ErrorBody;
        401: ErrorBody;
        404: ErrorBody;
        409: ErrorBody;
        413: ErrorBody;
        422: ErrorBody;
        429: ErrorBody;
        500: ErrorBody;
        503: ErrorBody;
      };
    };
  };
  '/api/usage': {
    /** The organization's use of its quotas */
    get: {
      params: Record<string, never>;
      query: Record<string, never>;
      body: undefined;
      responses: {
        200: Usage;
        401: ErrorBody;
      };
    };
  };
  '/mcp': {
    /** MCP server (Streamable HTTP) */
    post: {
      params: Record<string, never>;
      query: Record<string, never>;
      body: undefined;
      responses: {
        200: undefined;
        202: unknown;
        401: ErrorBody;
        413: ErrorBody;
        415: ErrorBody;
      };
    };
  };
  '/metrics': {
    /** Metrics in the Prometheus text format */
    get: {
      params: Record<string, never>;
      query: Record<string, never>;
      body: undefined;
      responses: {
        200: undefined;
      };
    };
  };
  '/api/audit': {
    /** The audit trail */
    get: {
      params: Record<string, never>;
      query: {
        /** Events at or after this time */
        since?: string;
        /** Events before this time */
        until?: string;
        /** Events of this API key */
        key_id?: string;
        instance_id?: string;
        profile_id?: string;
        room_id?: string;
        action?: 'instance.create' | 'instance.claim' | 'instance.delete' | 'instance.pause' | 'instance.resume' | 'snapshot.create' | 'snapshot.delete' | 'instance.fork' | 'instance.keepalive' | 'instance.network' | 'command.run' | 'command.kill' | 'command.revert' | 'command.stdin' | 'context.create' | 'context.delete' | 'context.restart' | 'context.run' | 'context.interrupt' | 'file.write' | 'file.delete' | 'terminal.open' | 'terminal.ticket' | 'port.url' | 'port.request' | 'port.websocket' | 'template.build' | 'template.delete' | 'profile.create' | 'profile.update' | 'profile.delete' | 'key.create' | 'key.revoke' | 'console.sign_in' | 'console.sign_out' | 'tool.call' | 'other' | 'egress.dns' | 'egress.connect';
        decision?: 'allowed' | 'denied_quota' | 'rate_limited' | 'error' | 'denied_egress';
        /** 1-200, default 50 */
        limit?: string;
        cursor?: string;
      };
      body: undefined;
      responses: {
        200: AuditPage;
        400: ErrorBody;
        401: ErrorBody;
        503: ErrorBody;
      };
    };
  };
  '/api/profile/{profile_id}/room/{room_id}/ports/{port}/{path}': {
    /** Reach a port of the instance (HEAD, and WebSocket upgrades, too) */
    get: {
      params: {
        /** Profile id (UUID), or the profile's name */
        profile_id: string;
        /** Caller-chosen room name: 1-128 characters of A-Z a-z 0-9 . _ - (not `.` or `..`) */
        room_id: string;
        /** The TCP port inside the instance, 1-65535 (not roomkit's own agent port, nor one the operator reserved) */
        port: string;
        /** The path asked of the program in the instance (the query string goes along) */
        path: string;
      };
      query: Record<string, never>;
      body: undefined;
      responses: {
        101: unknown;
        200: undefined;
        400: ErrorBody;
        401: ErrorBody;
        404: ErrorBody;
        409: ErrorBody;
        429: ErrorBody;
        502: ErrorBody;
        504: ErrorBody;
      };
    };
    /** Reach a port of the instance (PUT) */
    put: {
      params: {
        /** Profile id (UUID), or the profile's name */
        profile_id: string;
        /** Caller-chosen room name: 1-128 characters of A-Z a-z 0-9 . _ - (not `.` or `..`) */
        room_id: string;
        /** The TCP port inside the instance, 1-65535 (not roomkit's own agent port, nor one the operator reserved) */
        port: string;
        /** The path asked of the program in the instance (the query string goes along) */
        path: string;
      };
      query: Record<string, never>;
      body: undefined;
      responses: {
        200: undefined;
        400: ErrorBody;
        401: ErrorBody;
        404: ErrorBody;
        409: ErrorBody;
        429: ErrorBody;
        502: ErrorBody;
        504: ErrorBody;
      };
    };
    /** Reach a port of the instance (POST) */
    post: {
      params: {
        /** Profile id (UUID), or the profile's name */
        profile_id: string;
        /** Caller-chosen room name: 1-128 characters of A-Z a-z 0-9 . _ - (not `.` or `..`) */
        room_id: string;
        /** The TCP port inside the instance, 1-65535 (not roomkit's own agent port, nor one the operator reserved) */
        port: string;
        /** The path asked of the program in the instance (the query string goes along) */
        path: string;
      };
      query: Record<string, never>;
      body: undefined;
      responses: {
        200: undefined;
        400: ErrorBody;
        401: ErrorBody;
        404: ErrorBody;
        409: ErrorBody;
        429: ErrorBody;
        502: ErrorBody;
        504: ErrorBody;
      };
    };
    /** Reach a port of the instance (DELETE) */
    delete: {
      params: {
        /** Profile id (UUID), or the profile's name */
        profile_id: string;
        /** Caller-chosen room name: 1-128 characters of A-Z a-z 0-9 . _ - (not `.` or `..`) */
        room_id: string;
        /** The TCP port inside the instance, 1-65535 (not roomkit's own agent port, nor one the operator reserved) */
        port: string;
        /** The path asked of the program in the instance (the query string goes along) */
        path: string;
      };
      query: Record<string, never>;
      body: undefined;
      responses: {
        200: undefined;
        400: ErrorBody;
        401: ErrorBody;
        404: ErrorBody;
        409: ErrorBody;
        429: ErrorBody;
        502: ErrorBody;
        504: ErrorBody;
      };
    };
    /** Reach a port of the instance (PATCH) */
    patch: {
      params: {
        /** Profile id (UUID), or the profile's name */
        profile_id: string;
        /** Caller-chosen room name: 1-128 characters of A-Z a-z 0-9 . _ - (not `.` or `..`) */
        room_id: string;
        /** The TCP port inside the instance, 1-65535 (not roomkit's own agent port, nor one the operator reserved) */
        port: string;
        /** The path asked of the program in the instance (the query string goes along) */
        path: string;
      };
      query: Record<string, never>;
      body: undefined;
      responses: {
        200: undefined;
        400: ErrorBody;
        401: ErrorBody;
        404: ErrorBody;
        409: ErrorBody;
        429: ErrorBody;
        502: ErrorBody;
        504: ErrorBody;
      };
    };
    /** Reach a port of the instance (OPTIONS) */
    options: {
      params: {
        /** Profile id (UUID), or the profile's name */
        profile_id: string;
        /** Caller-chosen room name: 1-128 characters of A-Z a-z 0-9 . _ - (not `.` or `..`) */
        room_id: string;
        /** The TCP port inside the instance, 1-65535 (not roomkit's own agent port, nor one the operator reserved) */
        port: string;
        /** The path asked of the program in the instance (the query string goes along) */
        path: string;
      };
      query: Record<string, never>;
      body: undefined;
      responses: {
        200: undefined;
        400: ErrorBody;
        401: ErrorBody;
        404: ErrorBody;
        409: ErrorBody;
        429: ErrorBody;
        502: ErrorBody;
        504: ErrorBody;
      };
    };
  };
  '/p/{token}/{path}': {
    /** Reach a port through a signed URL (no API key) */
    get: {
      params: {
        /** The token of a signed URL from POST …/ports/{port}/url */
        token: string;
        /** The path asked of the program in the instance (the query string goes along) */
        path: string;
      };
      query: Record<string, never>;
      body: undefined;
      responses: {
        101: unknown;
        200: undefined;
        400: ErrorBody;
        401: ErrorBody;
        404: ErrorBody;
        409: ErrorBody;
        429: ErrorBody;
        502: ErrorBody;
        504: ErrorBody;
      };
    };
  };
  '/healthz': {
    /** Health of the service */
    get: {
      params: Record<string, never>;
      query: Record<string, never>;
      body: undefined;
      responses: {
        200: {
          status: 'ok';
          version: string;
          runtime: {
            available: boolean;
            name?: string;
            reason?: string;
          };
        };
      };
    };
  };
  '/readyz': {
    /** Readiness of the service */
    get: {
      params: Record<string, never>;
      query: Record<string, never>;
      body: undefined;
      responses: {
        200: {
          status: 'ready';
          store: 'ok';
          runtime: string;
        };
        503: ErrorBody;
      };
    };
  };
}
