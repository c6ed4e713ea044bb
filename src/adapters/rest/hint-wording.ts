// The REST API's words for the hints core's errors carry (errors.ts HINT_CODES): each
// names the endpoint that acts on it, so a client (or a person reading the Error body)
// knows the next call to make. The Record makes a hint without REST words a compile
// error. Messages are core's, with these words appended (or, for a quota, put where the
// sentence needs them).
import type { AppError, ErrorHint, HintCode } from '../../errors.ts';
import type { QuotaName } from '../../core/quota-schema.ts';
import { rawFileUrl } from './raw-file-url.ts';

const room = (hint: ErrorHint) => `/api/profile/${hint.profile_id}/room/${hint.room_id}`;

/** Where a quota is freed, by quota. */
const QUOTA_ENDPOINT: Partial<Record<QuotaName, string>> = {
  instances: ' (DELETE /api/profile/{profile_id}/room/{room_id})',
  concurrent_commands: ' (POST .../commands/{command_id}/kill)',
  snapshots: ' (DELETE /api/snapshots/{snapshot_id})',
};
const SHOW_QUOTAS = ' (GET /api/usage shows all quotas)';

const WORDS: Record<HintCode, (message: string, hint: ErrorHint) => string> = {
  create_instance: (m, h) => `${m}; create one with POST ${room(h)}`,
  create_new_instance: (m, h) => `${m}; create a new one with POST ${room(h)}`,
  recreate_failed_instance: (m, h) => `${m}; delete it with DELETE ${room(h)} and create another with POST ${room(h)}`,
  wait_until_ready: (m, h) => `${m}; poll GET ${room(h)} until its state is "ready"`,
  poll_until: (m, h) => `${m}; poll GET ${room(h)} until it is "${h.until}"`,
  poll_state: (m, h) => `${m} (poll GET ${room(h)})`,
  poll_and_retry: (m, h) => `${m}; poll GET ${room(h)} and retry`,
  delete_instance_first: (m, h) => `${m}; delete it first (DELETE ${room(h)}) to ${h.asked}, or use another room`,
  instance_options_differ: (m, h) => `${m}: send the same options (or leave them out) to get it, POST ${room(h)}/keepalive to move its deadline, or DELETE ${room(h)} and create it again`,
  delete_profile_instances: (m, h) => `${m} (DELETE /api/profile/${h.profile_id}/room/{room_id})`,
  list_commands: (m, h) => `${m}; GET ${room(h)}/commands lists them`,
  kill_a_command: (m) => `${m}; wait for one to finish, or kill one with POST .../commands/{command_id}/kill`,
  stdin_later: (m) => `${m}, whose input is sent later with POST .../commands/{command_id}/stdin; give a waited-for command its input at once with "stdin"`,
  stdin_in_file: (m) => `${m}; write the input to a file with PUT .../file/{path} and redirect it (\`cmd < file\`), or start the command with "stdin_open": true and send it in parts`,
  command_in_file: (m) => `${m}; write long scripts to a file with PUT .../file/{path} and run that`,
  env_in_file: (m) => `${m}; put large values in a file with PUT .../file/{path}`,
  enable_keep_undo: (m) => `${m}. Set "keep_undo": true on the profile (PATCH /api/profiles/{profile_id}), then delete the instance and create it again`,
  fetch_raw_file: (m, h) => `${m}; fetch it raw from GET ${rawFileUrl(String(h.instance_id), String(h.path))}`,
  read_with_key: (m) => `${m}; read it with an API key at GET /api/profile/{profile_id}/room/{room_id}/file/{path}?raw=1`,
  // Core's sentence is "…; <what frees it>, or ask the operator to raise the quota": the
  // endpoint that frees it goes after the first part, the one that shows quotas at the end.
  quota_fix: (m, h) => {
    const endpoint = QUOTA_ENDPOINT[h.quota as QuotaName];
    const at = m.lastIndexOf(', or ask the operator');
    const freed = endpoint === undefined || at < 0 ? m : `${m.slice(0, at)}${endpoint}${m.slice(at)}`;
    return `${freed}${SHOW_QUOTAS}`;
  },
  show_quotas: (m) => `${m}${SHOW_QUOTAS}`,
  list_snapshots: (m) => `${m}; GET /api/snapshots lists them`,
  snapshot_ready_later: (m, h) => `${m}; retry once GET /api/snapshots/${h.snapshot_id} says "ready"`,
  sign_port_url: (m, h) => `${m}; get a new one with POST …/ports/${h.port ?? '{port}'}/url`,
  new_terminal_ticket: (m) => `${m}; get a new one with POST .../terminal/ticket`,
};

/** An error's message as the REST API words it: core's, with its hint as an endpoint to call. */
export function restMessage(err: AppError): string {
  return err.hint === undefined ? err.message : WORDS[err.hint.code](err.message, err.hint);
}
