// The profile commands of `roomkit`: `profiles` lists the organization's, `profiles show`,
// `profiles create NAME`, `profiles update NAME` and `profiles rm NAME`, through the SDK.
// The common fields have options of their own; any other field of the profile schema
// (docs/api.md, Profiles) is given as `--set field=value` (the value read as JSON when it
// is JSON, else as text). The server validates: its messages say what is wrong.
import { type Command, InvalidArgumentError, Option } from 'commander';
import type { Profile, ProfileCreate, ProfileUpdate } from '../../sdk/src/index.ts';
import { ClientError, clientOf, type ConnectionOptions, printJson, printTable, run } from './client.ts';

type ProfileFlags = ConnectionOptions & {
  image?: string;
  packages?: string[];
  memory?: number;
  vcpus?: number;
  disk?: number;
  commandTimeout?: number;
  commandIdleOutputTimeout?: number;
  idleTimeout?: number;
  idleAction?: string;
  egress?: string;
  allow?: string[];
  deny?: string[];
  rawFiles?: string;
  keepUndo?: boolean;
  warmPool?: number;
  set?: Record<string, unknown>;
};

/** The profile field each option sets. */
const FIELDS: [keyof ProfileFlags, string][] = [
  ['image', 'image'],
  ['packages', 'packages'],
  ['memory', 'memory_mb'],
  ['vcpus', 'vcpus'],
  ['disk', 'disk_mb'],
  ['commandTimeout', 'command_timeout_s'],
  ['commandIdleOutputTimeout', 'command_idle_output_timeout_s'],
  ['idleTimeout', 'idle_timeout_s'],
  ['idleAction', 'idle_action'],
  ['rawFiles', 'raw_files'],
  ['keepUndo', 'keep_undo'],
  ['warmPool', 'warm_pool'],
];

export function registerProfileCommands(program: Command): void {
  const profiles = connectionOptions(program.command('profiles').description('list the organization\'s profiles (subcommands show, create, update and rm manage them)'))
    .option('--json', 'print the API\'s JSON answer instead of text')
    .action(run(async (options: ConnectionOptions) => {
      const list = await clientOf(options).profiles.list();
      if (options.json) return printJson(list);
      const rows = list.map((p) => [p.name, p.profile_id, `${p.memory_mb} MiB`, String(p.vcpus), `${p.disk_mb} MiB`, p.image, p.raw_files]);
      printTable(['NAME', 'PROFILE', 'MEMORY', 'CPUS', 'DISK', 'IMAGE', 'RAW FILES'], rows);
    }));

  connectionOptions(profiles.command('show <profile>').description('show a profile (name or id) with every field'))
    .option('--json', 'print the API\'s JSON answer instead of text')
    .action(run(async (profile: string, options: ConnectionOptions) => {
      const found = await clientOf(options).profiles.get(profile);
      if (options.json) return printJson(found);
      printProfile(found);
    }));

  fieldOptions(connectionOptions(profiles.command('create <name>').description('create a profile; fields not given take their defaults (docs/api.md, Profiles)')))
    .option('--json', 'print the API\'s JSON answer instead of text')
    .action(run(async (name: string, options: ProfileFlags) => {
      const made = await clientOf(options).profiles.create({ name, ...fieldsOf(options) } as ProfileCreate);
      if (options.json) printJson(made);
      else printProfile(made);
      if (options.rawFiles === undefined && made.raw_files === 'all') {
        process.stderr.write(
          'note: raw_files is "all": anyone who knows an instance\'s id reads, without a key, any file its user can read ' +
            '(GET /vm/{instance_id}/file/...). `--raw-files changed` serves only files commands listed, `--raw-files off` none.\n',
        );
      }
    }));

  fieldOptions(connectionOptions(profiles.command('update <profile>').description('change fields of a profile (name or id); instances made before keep the old values, but for raw_files')))
    .option('--name <name>', 'a new name')
    .option('--json', 'print the API\'s JSON answer instead of text')
    .action(run(async (profile: string, options: ProfileFlags & { name?: string }) => {
      const changes = { ...(options.name === undefined ? {} : { name: options.name }), ...fieldsOf(options) };
      if (Object.keys(changes).length === 0) throw new ClientError('validation_error', 'nothing to change: give the fields to change, e.g. --memory 2048 or --set \'env={"A":"1"}\'');
      const updated = await clientOf(options).profiles.update(profile, changes as ProfileUpdate);
      if (options.json) return printJson(updated);
      printProfile(updated);
    }));

  connectionOptions(profiles.command('rm <profile>').description('delete a profile (name or id) that no live instance uses'))
    .action(run(async (profile: string, options: ConnectionOptions) => {
      await clientOf(options).profiles.delete(profile);
      process.stdout.write(`deleted profile ${profile}\n`);
    }));
}

function connectionOptions(command: Command): Command {
  return command
    .option('--url <url>', 'the roomkit server (env ROOMKIT_URL; default http://127.0.0.1:8080)')
    .option('--api-key <key>', 'API key (env ROOMKIT_API_KEY, which keeps it out of the process list)');
}

function fieldOptions(command: Command): Command {
  return command
    .option('--image <image>', 'the image instances start from, e.g. debian:trixie')
    .option('--packages <list>', 'Debian packages added to the image, separated by commas', (v: string) => v.split(',').map((p) => p.trim()).filter(Boolean))
    .option('--memory <MiB>', 'memory of each instance', wholeNumber)
    .option('--vcpus <n>', 'CPUs of each instance', wholeNumber)
    .option('--disk <MiB>', 'size of each instance\'s writable layer', wholeNumber)
    .option('--command-timeout <seconds>', 'time limit of a command (command_timeout_s)', wholeNumber)
    .option('--command-idle-output-timeout <seconds>', 'a command that prints nothing this long is killed, 0 for never (command_idle_output_timeout_s)', wholeNumber)
    .option('--idle-timeout <seconds>', 'idle time before the idle action, 0 for never (idle_timeout_s)', wholeNumber)
    .addOption(new Option('--idle-action <action>', 'what an idle instance becomes').choices(['pause', 'stop']))
    .addOption(new Option('--egress <egress>', 'outbound network of the instances (network.egress)').choices(['internet', 'allowlist', 'none']))
    .option('--allow <entries>', 'with --egress allowlist: what instances may reach, separated by commas (example.com, *.example.com, 203.0.113.0/24, with an optional :port)', entryList)
    .option('--deny <entries>', 'with --egress allowlist: what instances never reach, separated by commas', entryList)
    .addOption(new Option('--raw-files <which>', 'what the keyless raw file endpoint serves: all, changed (files commands listed) or off').choices(['all', 'changed', 'off']))
    .option('--keep-undo', 'keep an undo point before each command (`roomkit revert`)')
    .option('--no-keep-undo', 'keep no undo points')
    .option('--warm-pool <n>', 'instances kept booted for fast creates (warm_pool)', wholeNumber)
    .option('--set <field=value>', 'any other field (repeatable); the value is JSON when it parses as JSON, else text', collectField);
}

/** The profile fields the options give, as the API names them. */
function fieldsOf(options: ProfileFlags): Record<string, unknown> {
  const fields: Record<string, unknown> = { ...options.set };
  for (const [option, field] of FIELDS) if (options[option] !== undefined) fields[field] = options[option];
  if (options.egress !== undefined) fields.network = { ...(fields.network as object | undefined), egress: options.egress };
  if (options.allow !== undefined) fields.network = { ...(fields.network as object | undefined), allow: options.allow };
  if (options.deny !== undefined) fields.network = { ...(fields.network as object | undefined), deny: options.deny };
  return fields;
}

function entryList(value: string): string[] {
  return value.split(',').map((e) => e.trim()).filter(Boolean);
}

function printProfile(profile: Profile): void {
  for (const [field, value] of Object.entries(profile)) {
    process.stdout.write(`${field.padEnd(20)} ${typeof value === 'string' ? value : JSON.stringify(value)}\n`);
  }
}

function wholeNumber(value: string): number {
  if (!/^[0-9]+$/.test(value)) throw new InvalidArgumentError('expected a whole number');
  return Number(value);
}

function collectField(value: string, previous: Record<string, unknown> | undefined): Record<string, unknown> {
  const eq = value.indexOf('=');
  if (eq <= 0) throw new InvalidArgumentError('expected field=value, e.g. --set max_lifetime_s=3600');
  const raw = value.slice(eq + 1);
  let parsed: unknown = raw;
  try {
    parsed = JSON.parse(raw);
  } catch {
    // Not JSON: the text itself.
  }
  return { ...previous, [value.slice(0, eq)]: parsed };
}
