// The one registry of error codes roomkit answers with. Each code has exactly one HTTP
// status; the Record type makes a code without a status a compile error. Every error
// response body is the spec's Error shape: {error, message} (plus optional details).

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
  preview_url_expired: 401,
  // 403
  permission_denied: 403,
  raw_file_not_served: 403,
  quota_exceeded: 403,
  // 404
  not_found: 404,
  profile_not_found: 404,
  instance_not_found: 404,
  key_not_found: 404,
  organization_not_found: 404,
  file_not_found: 404,
  command_not_found: 404,
  snapshot_not_found: 404,
  // 405
  method_not_allowed: 405,
  // 409
  profile_in_use: 409,
  profile_name_taken: 409,
  instance_not_ready: 409,
  instance_state_conflict: 409,
  instance_options_conflict: 409,
  command_not_running: 409,
  stdin_not_open: 409,
  feature_unavailable: 409,
  file_changed: 409,
  no_undo_point: 409,
  revert_conflict: 409,
  room_occupied: 409,
  snapshot_unusable: 409,
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
  // 426
  upgrade_required: 426,
  // 429
  too_many_commands: 429,
  too_many_file_reads: 429,
  too_many_terminals: 429,
  commands_rate_exceeded: 429,
  rate_limited: 429,
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
  // 507
  no_space: 507,
} as const satisfies Record<string, number>;

export type ErrorCode = keyof typeof ERROR_STATUS;

export interface ErrorBody {
  error: ErrorCode;
  message: string;
  details?: Record<string, unknown>;
  /** The request's id (as in X-Request-Id and the log); the HTTP layer adds it. */
  request_id?: string;
}

/** An expected failure with a stable code; safe to show to the caller as it is. */
export class AppError extends Error {
  readonly code: ErrorCode;
  readonly details: Record<string, unknown> | undefined;

  constructor(code: ErrorCode, message: string, details?: Record<string, unknown>) {
    super(message);
    this.name = 'AppError';
    this.code = code;
    this.details = details;
  }

  get status(): number {
    return ERROR_STATUS[this.code];
  }

  toBody(): ErrorBody {
    return this.details === undefined
      ? { error: this.code, message: this.message }
      : { error: this.code, message: this.message, details: this.details };
  }
}

export function isAppError(err: unknown): err is AppError {
  return err instanceof AppError;
}
