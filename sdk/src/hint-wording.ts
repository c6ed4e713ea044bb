// The SDK's words for the advice the server's errors carry as data (the Error body's
// `hint`: a code and the values its wording needs): the same advice the REST API words as
// an endpoint to call, said as the SDK method that does it. A hint this SDK has no words
// for keeps the server's message.
type Hint = { code: string; [param: string]: string | number | undefined };

const WORDS: Record<string, (problem: string, hint: Hint) => string> = {
  create_instance: (p) => `${p}; create one with room.create()`,
  create_new_instance: (p) => `${p}; create a new one with room.create()`,
  recreate_failed_instance: (p) => `${p}; delete it with room.delete() and create another with room.create()`,
  wait_until_ready: (p) => `${p}; room.create() waits until it is ready (room.get() shows its state)`,
  poll_until: (p, h) => `${p}; follow room.get() until it is "${h.until}"`,
  poll_state: (p) => `${p} (room.get() shows its state)`,
  poll_and_retry: (p) => `${p}; follow room.get() and retry`,
  delete_instance_first: (p, h) => `${p}; delete it first (room.delete()) to ${h.asked}, or use another room`,
  instance_options_differ: (p) => `${p}: pass the same options (or none) to get it, room.keepAlive() to move its deadline, or room.delete() and create it again`,
  delete_profile_instances: (p) => `${p} (room.delete() for each of them; rk.instances.list({ profile }) lists them)`,
  list_commands: (p) => `${p}; room.commands() lists them`,
  kill_a_command: (p) => `${p}; wait for one to finish, or stop one with room.command(id).kill()`,
  stdin_later: (p) => `${p}, whose input is sent later with sendStdin() of its CommandHandle; give a waited-for command its input at once with the stdin option`,
  stdin_in_file: (p) => `${p}; write the input to a file with room.writeFile() and redirect it (\`cmd < file\`), or start the command with stdinOpen and send it in parts`,
  command_in_file: (p) => `${p}; write long scripts to a file with room.writeFile() and run that`,
  env_in_file: (p) => `${p}; put large values in a file with room.writeFile()`,
  enable_keep_undo: (p) => `${p}. Set keep_undo on the profile (rk.profiles.update(profile, { keep_undo: true })), then delete the instance and create it again`,
  fetch_raw_file: (p, h) => `${p}; read its bytes with room.readRaw(${JSON.stringify(String(h.path))})`,
  read_with_key: (p) => `${p}; read it with the key through room.readRaw(path)`,
  quota_fix: (p) => `${p} (rk.usage() shows all quotas)`,
  show_quotas: (p) => `${p} (rk.usage() shows all quotas)`,
  list_snapshots: (p) => `${p}; rk.snapshots.list() lists them`,
  snapshot_ready_later: (p, h) => `${p}; retry once rk.snapshots.get("${h.snapshot_id}") says "ready"`,
  sign_port_url: (p, h) => `${p}; get a new one with room.ports.url(${h.port ?? 'port'})`,
  new_terminal_ticket: (p) => `${p}; open the terminal again with room.terminal()`,
};

/** The message of an Error body in the SDK's words: its problem and its hint as an SDK call, else the server's message. */
export function sdkMessage(body: { message: string; problem?: unknown; hint?: unknown }): string {
  const hint = body.hint as Hint | undefined;
  const words = hint && typeof hint.code === 'string' ? WORDS[hint.code] : undefined;
  return words && typeof body.problem === 'string' ? words(body.problem, hint!) : body.message;
}
