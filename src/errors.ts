// The one registry of error codes roomkit answers with, and of the hints an error can
// carry. Each code has exactly one HTTP status; the Record type makes a code without a
// status a compile error. Every error response body is the spec's Error shape:
// {error, message} (plus optional details).

export const ERROR_STATUS = {
  // 400
  validation_error: 400,
  invalid_json: 400,
  invalid_cursor: 400,
  invalid_url: 400,
  invalid_path: 400,
  is_a_directory: 400,
  not_a_directory: 400,
  unknown_tool: 400,
  invalid_arguments: 400,
  undo_unavailable: 400,
  invalid_port: 400,
  // 401
  missing_api_key: 401,
  invalid_api_key: 401,
  invalid_operator_token: 401,
  invalid_terminal_ticket: 401,
  invalid_preview_token: 401,
  invalid_node_credential: 401,
  preview_url_expired: 401,
  // 403
  permission_denied: 403,
  raw_file_not_served: 403,
  quota_exceeded: 403,
  invalid_csrf_token: 403,
  // 404
  not_found: 404,
  profile_not_found: 404,
  instance_not_found: 404,
  key_not_found: 404,
  organization_not_found: 404,
  file_not_found: 404,
  command_not_found: 404,
  terminal_not_found: 404,
  snapshot_not_found: 404,
  context_not_found: 404,
  template_not_found: 404,
  // 410
  instance_lost: 410,
  // 421
  instance_on_another_node: 421,
  // 405
  method_not_allowed: 405,
  // 409
  profile_in_use: 409,
  profile_name_taken: 409,
  instance_not_ready: 409,
  instance_state_conflict: 409,
  instance_options_conflict: 409,
  idempotency_key_in_use: 409,
  command_not_running: 409,
  stdin_not_open: 409,
  feature_unavailable: 409,
  file_changed: 409,
  no_undo_point: 409,
  revert_conflict: 409,
  room_occupied: 409,
  snapshot_unusable: 409,
  template_busy: 409,
  template_unusable: 409,
  // 413
  body_too_large: 413,
  file_too_large: 413,
  stdin_too_large: 413,
  // 414
  uri_too_long: 414,
  // 415
  unsupported_media_type: 415,
  // 416
  range_not_satisfiable: 416,
  // 422
  idempotency_key_reused: 422,
  // 426
  upgrade_required: 426,
  // 429
  too_many_commands: 429,
  too_many_file_reads: 429,
  too_many_terminals: 429,
  too_many_contexts: 429,
  commands_rate_exceeded: 429,
  rate_limited: 429,
  auth_throttled: 429,
  too_many_port_connections: 429,
  // 500
  instance_start_failed: 500,
  instance_pause_failed: 500,
  instance_resume_failed: 500,
  snapshot_failed: 500,
  internal_error: 500,
  command_failed: 500,
  // 502
  port_not_listening: 502,
  port_connection_failed: 502,
  // 504
  port_timeout: 504,
  // 503
  runtime_unavailable: 503,
  not_ready: 503,
  audit_unavailable: 503,
  shutting_down: 503,
  capacity_exhausted: 503,
  node_unreachable: 503,
  node_not_found: 404,
  node_not_active: 409,
  // 507
  no_space: 507,
} as const satisfies Record<string, number>;

export type ErrorCode = keyof typeof ERROR_STATUS;

export interface ErrorBody {
  error: ErrorCode;
  message: string;
  /** With a hint: the message without its advice, for a client that words the advice itself. */
  problem?: string;
  /** What the caller can do next, as data (HINT_CODES), for a client that words it itself. */
  hint?: ErrorHint;
  details?: Record<string, unknown>;
  /** The request's id (as in X-Request-Id and the log); the HTTP layer adds it. */
  request_id?: string;
}

/**
 * What a caller can do about an error, named by a code; the values its wording needs go
 * beside it. Core says which hint applies and nothing of how to act on it: each adapter
 * words it in its own terms (the REST API names an endpoint, the tool layer a tool), so
 * no message of core names an endpoint. A hint an adapter has no words for is left out.
 */
export const HINT_CODES = [
  /** The room has no instance: make one. {profile_id, room_id} */
  'create_instance',
  /** The room's last instance stopped: make a new one. {profile_id, room_id} */
  'create_new_instance',
  /** The instance failed: delete it and make another. {profile_id, room_id} */
  'recreate_failed_instance',
  /** The instance is not ready yet: follow its state. {profile_id, room_id} */
  'wait_until_ready',
  /** Follow the instance's state until it is `until`, then retry. {profile_id, room_id, until} */
  'poll_until',
  /** Follow the instance's state (the message says what to wait for). {profile_id, room_id} */
  'poll_state',
  /** Follow the instance's state and retry. {profile_id, room_id} */
  'poll_and_retry',
  /** The room is taken: delete its instance first, to do `asked`. {profile_id, room_id, asked} */
  'delete_instance_first',
  /** A live instance differs from the options asked: keep it alive, or delete it and create again. {profile_id, room_id} */
  'instance_options_differ',
  /** A profile still has live instances: delete them. {profile_id} */
  'delete_profile_instances',
  /** Where the room's commands are listed. {profile_id, room_id} */
  'list_commands',
  /** Too many commands run: wait, or kill one. */
  'kill_a_command',
  /** Stdin can be kept open for a background command only, and written to later. */
  'stdin_later',
  /** Stdin too large for one request: a file, or an open stdin. */
  'stdin_in_file',
  /** A command too long: a script file. */
  'command_in_file',
  /** Environment too large: a file. */
  'env_in_file',
  /** The profile cannot keep undo points: turn keep_undo on and make the instance again. */
  'enable_keep_undo',
  /** A file too large to return here: fetch it raw. {instance_id, path} */
  'fetch_raw_file',
  /** A file not served publicly: read it with a key. */
  'read_with_key',
  /** A quota the organization reached: what frees it, and where quotas are shown. {quota} */
  'quota_fix',
  /** Where the organization's quotas are shown. */
  'show_quotas',
  /** Where the organization's snapshots are listed. */
  'list_snapshots',
  /** A snapshot still being taken: retry once it is ready. {snapshot_id} */
  'snapshot_ready_later',
  /** A preview URL that cannot be used: sign a new one. {port?} */
  'sign_port_url',
  /** A terminal ticket that cannot be used: get a new one. */
  'new_terminal_ticket',
] as const;
export type HintCode = (typeof HINT_CODES)[number];

export interface ErrorHint {
  code: HintCode;
  [param: string]: string | number | undefined;
}

/** An expected failure with a stable code; safe to show to the caller as it is. */
export class AppError extends Error {
  readonly code: ErrorCode;
  readonly details: Record<string, unknown> | undefined;
  /** What the caller can do next, for the adapter to word (see HINT_CODES); the message says nothing of it. */
  readonly hint: ErrorHint | undefined;

  constructor(code: ErrorCode, message: string, details?: Record<string, unknown>, hint?: ErrorHint) {
    super(message);
    this.name = 'AppError';
    this.code = code;
    this.details = details;
    this.hint = hint;
  }

  get status(): number {
    return ERROR_STATUS[this.code];
  }

  /** The Error body, with the message as an adapter words it (its hint included), or core's own. */
  toBody(message = this.message): ErrorBody {
    return {
      error: this.code,
      message,
      // The advice as data beside the worded message, so that an SDK or a tool client
      // can say it in its own terms rather than in the REST API's.
      ...(this.hint === undefined ? {} : { problem: this.message, hint: this.hint }),
      ...(this.details === undefined ? {} : { details: this.details }),
    };
  }
}

export function isAppError(err: unknown): err is AppError {
  return err instanceof AppError;
}
