// The `roomkit` command line: runs the service and administers a data directory.
// Errors are one line on stderr and a non-zero exit, never a stack trace.
import { Command, CommanderError, Option } from 'commander';
import { ConfigError, LOG_LEVELS } from '../config.ts';
import pkg from '../../package.json' with { type: 'json' };
import { API_VERSION } from '../app.ts';
import { backup } from './backup.ts';
import { doctor } from './doctor.ts';
import { registerClientCommands } from './client.ts';
import { registerExecCommands } from './exec.ts';
import { registerFileCommands } from './files.ts';
import { registerNodeCommands } from './nodes.ts';
import { registerProfileCommands } from './profiles.ts';
import { registerRunCodeCommand } from './run-code.ts';
import { registerShellCommand } from './shell.ts';
import { registerSnapshotCommands } from './snapshots.ts';
import { registerTemplateCommands } from './templates.ts';
import { CliError } from './errors.ts';
import { imagesBuild, imagesList, imagesPrune } from './images.ts';
import { keysCreate } from './keys.ts';
import { mcpStdio } from './mcp.ts';
import { orgsQuota, orgsUsage, QUOTA_OPTIONS } from './orgs.ts';
import { QUOTA_NAMES } from '../core/quota-schema.ts';
import { serve } from './serve.ts';

const program = new Command()
  .name('roomkit')
  .description('Isolated machines for AI agents: an HTTP API to create instances, run commands and read files.')
  .version(`${pkg.version} (API ${API_VERSION})`)
  .showHelpAfterError('(run with --help for usage)')
  .exitOverride();

const dataDirOption = () =>
  new Option('--data-dir <dir>', 'where roomkit keeps its database and instances (env ROOMKIT_DATA_DIR; default .roomkit in the repository)');

program
  .command('serve')
  .description('run the HTTP API')
  .option('--host <host>', 'address to listen on (env ROOMKIT_HOST; default 127.0.0.1)')
  .option('--port <port>', 'port to listen on, 0 for any free one (env ROOMKIT_PORT; default 8080)')
  .addOption(dataDirOption())
  .addOption(new Option('--log-level <level>', 'log level (env ROOMKIT_LOG_LEVEL; default info)').choices(LOG_LEVELS))
  .option('--node-url <url>', 'with a PostgreSQL store: where other nodes reach this one (env ROOMKIT_NODE_URL; default the address it listens on)')
  .action(async (options: { host?: string; port?: string; dataDir?: string; logLevel?: string; nodeUrl?: string }) => {
    await serve({ host: options.host, port: options.port, dataDir: options.dataDir, logLevel: options.logLevel, nodeUrl: options.nodeUrl });
  });

const keys = program.command('keys').description('manage API keys');
keys
  .command('create')
  .description('create an API key for an organization, creating the organization (with a "default" profile) if needed')
  .requiredOption('--org <name>', 'organization name')
  .addOption(new Option('--env <env>', 'key environment').choices(['live', 'test']).default('live'))
  .option('--name <label>', 'a label for the key')
  .addOption(dataDirOption())
  .option('--json', 'print one JSON object {"organization_id", "api_key"} and nothing else')
  .action(async (options: { org: string; env: 'live' | 'test'; name?: string; dataDir?: string; json?: boolean }) => {
    await keysCreate(options);
  });

const orgs = program.command('orgs').description("an organization's quotas and use (on the data directory)");
const quotaCommand = orgs
  .command('quota <org>')
  .description("set an organization's quotas (name or id) and print them; a value of \"default\" returns one to the configured default");
for (const name of QUOTA_NAMES) quotaCommand.option(`--${QUOTA_OPTIONS[name]} <n>`, `${name} quota`);
quotaCommand
  .addOption(dataDirOption())
  .option('--json', 'print the usage as JSON (as GET /api/usage shows it)')
  .action(async (org: string, options: Record<string, string | boolean | undefined>) => {
    const values = Object.fromEntries(QUOTA_NAMES.map((name) => [name, options[name.replace(/_([a-z])/g, (_m, c: string) => c.toUpperCase())]]));
    await orgsQuota(org, { ...values, dataDir: options.dataDir as string | undefined, json: options.json === true } as Parameters<typeof orgsQuota>[1]);
  });
orgs
  .command('usage <org>')
  .description("print an organization's use of each quota (name or id)")
  .addOption(dataDirOption())
  .option('--json', 'print JSON (as GET /api/usage shows it)')
  .action(async (org: string, options: { dataDir?: string; json?: boolean }) => {
    await orgsUsage(org, options);
  });

program
  .command('backup <file>')
  .description("copy the data directory's store to FILE, consistently, also while serve runs (restore: stop, copy over <data-dir>/roomkit.sqlite, start)")
  .addOption(dataDirOption())
  .option('--force', 'replace FILE if it exists')
  .option('--json', 'print {"file", "bytes", "migration"}')
  .action(async (file: string, options: { dataDir?: string; force?: boolean; json?: boolean }) => {
    await backup(file, options);
  });

program
  .command('doctor')
  .description('check that this host can run instances, and say how to fix what is missing')
  .addOption(dataDirOption())
  .option('--json', 'print the checks as JSON')
  .action(async (options: { dataDir?: string; json?: boolean }) => {
    process.exitCode = await doctor(options);
  });

program
  .command('mcp')
  .description("serve roomkit's tools over MCP on stdio (for desktop agent clients), using a roomkit server's API")
  .option('--url <url>', 'the roomkit server (env ROOMKIT_URL; default http://127.0.0.1:8080)')
  .option('--api-key <key>', 'API key (env ROOMKIT_API_KEY, which keeps it out of the process list)')
  .action(async (options: { url?: string; apiKey?: string }) => {
    await mcpStdio(options);
  });

const images = program.command('images').description('build, list and prune the root filesystems instances start from');
images
  .command('build <profile>')
  .description("build a profile's image ahead of its first instance (profile id or name)")
  .option('--org <name>', 'organization of the profile (needed when the data directory has several)')
  .addOption(dataDirOption())
  .option('--json', 'print the image as JSON')
  .action(async (profile: string, options: { org?: string; dataDir?: string; json?: boolean }) => {
    await imagesBuild(profile, options);
  });
images
  .command('list')
  .description('list the images built so far')
  .addOption(dataDirOption())
  .option('--json', 'print JSON')
  .action(async (options: { dataDir?: string; json?: boolean }) => {
    await imagesList(options);
  });
images
  .command('prune')
  .description('remove images no live instance uses (they are rebuilt when needed)')
  .addOption(dataDirOption())
  .option('--json', 'print JSON')
  .action(async (options: { dataDir?: string; json?: boolean }) => {
    await imagesPrune(options);
  });

registerClientCommands(program);
registerExecCommands(program);
registerRunCodeCommand(program);
registerFileCommands(program);
registerProfileCommands(program);
registerNodeCommands(program);
registerSnapshotCommands(program);
registerTemplateCommands(program);
registerShellCommand(program);

try {
  await program.parseAsync(process.argv);
} catch (err) {
  process.exitCode = exitCodeFor(err);
}

function exitCodeFor(err: unknown): number {
  if (err instanceof CommanderError) {
    // Commander has printed its message (or the help) already. A usage error exits 2,
    // as the README says and as shells' own tools do; help and --version exit 0.
    return err.exitCode === 0 ? 0 : 2;
  }
  if (err instanceof CliError || err instanceof ConfigError) {
    process.stderr.write(`roomkit: error: ${err.message}\n`);
    return err instanceof CliError ? err.exitCode : 2;
  }
  const message = err instanceof Error ? err.message : String(err);
  process.stderr.write(`roomkit: error: ${message}\n`);
  if (process.env.ROOMKIT_DEBUG && err instanceof Error) process.stderr.write(`${err.stack}\n`);
  return 1;
}
