// The template commands of `roomkit`: `build -t NAME [-f Dockerfile] DIR` sends a
// Dockerfile and its directory as a template's build, prints the build's log as it is
// written and a summary, and exits non-zero when the build fails; `templates` lists the
// organization's (`templates show NAME`, `templates rm NAME`). A profile uses one with
// `image: template:NAME`.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve, sep } from 'node:path';
import type { Command } from 'commander';
import { formatBytes } from '../lib/format-size.ts';
import type { Template } from '../../sdk/src/index.ts';
import { ClientError, clientOf, type ConnectionOptions, printJson, printTable, run } from './client.ts';
import { clientCommand } from './snapshots.ts';

/** What a build's context may hold (the server's own limits: 1000 files, 16 MiB). */
const MAX_FILES = 1000;
const MAX_BYTES = 16 * 1024 * 1024;
/** Directories never sent: version control's. */
const SKIPPED = new Set(['.git', '.hg', '.svn']);

export function registerTemplateCommands(program: Command): void {
  clientCommand(program, 'build <dir>', 'build a template from a Dockerfile and the files of DIR, printing its steps as they run')
    .requiredOption('-t, --tag <name>', 'the template\'s name (profiles use it as image template:NAME)')
    .option('-f, --file <dockerfile>', 'the Dockerfile (default: DIR/Dockerfile)')
    .addHelpText(
      'after',
      '\nEvery RUN runs in a sandbox on the server; each step is cached, so a rebuild runs only what changed. ' +
        'The files of DIR (version control\'s directories left out; at most 1000 files and 16 MiB) are what COPY and ADD read. ' +
        'Exit code: 0 when the template is ready, 1 when the build failed.',
    )
    .action(run(async (dir: string, options: ConnectionOptions & { tag: string; file?: string }) => {
      const root = resolve(dir);
      const dockerfilePath = resolve(options.file ?? join(root, 'Dockerfile'));
      let dockerfile: string;
      try {
        dockerfile = readFileSync(dockerfilePath, 'utf8');
      } catch (err) {
        throw new ClientError('invalid_argument', `cannot read the Dockerfile ${dockerfilePath}: ${(err as Error).message}`);
      }
      const files = contextOf(root);
      const client = clientOf(options);
      const started = Date.now();
      const build = await client.templates.build({ name: options.tag, dockerfile, files });
      const template = await client.templates.follow(build.name, build.build_id, (text) => {
        if (!options.json) process.stdout.write(text);
      });
      if (template.state !== 'ready') process.exitCode = 1;
      if (options.json) return printJson(template);
      process.stderr.write(`${summaryOf(template, Date.now() - started)}\n`);
    }));

  const templates = program.command('templates').description('list, show and delete the organization\'s templates (`roomkit templates` lists them)');
  clientCommand(templates, 'list', 'list the organization\'s templates', { isDefault: true })
    .action(run(async (options: ConnectionOptions) => {
      const list = await clientOf(options).templates.list();
      if (options.json) return printJson(list);
      if (list.templates.length === 0) return void process.stdout.write('no templates (`roomkit build -t NAME DIR` builds one)\n');
      printTable(
        ['NAME', 'STATE', 'BASE', 'SIZE', 'UPDATED'],
        list.templates.map((t) => [t.name, t.state, t.image?.base_image ?? '-', t.image ? formatBytes(t.image.disk_bytes, 'listing') : '-', t.updated_at]),
      );
    }));

  clientCommand(templates, 'show <name>', 'show a template, its latest build and its image')
    .action(run(async (name: string, options: ConnectionOptions) => {
      const template = await clientOf(options).templates.get(name);
      if (options.json) return printJson(template);
      const image = template.image;
      const rows: [string, string][] = [
        ['template', `${template.name} (${template.template_id})`],
        ['state', template.reason ? `${template.state}: ${template.reason}` : template.state],
        ['build', `${template.build_id}: ${template.build.steps} steps, ${template.build.cached_steps} cached`],
        ['base', image?.base_image ?? '-'],
        ['workdir', image?.workdir ?? '-'],
        ['user', image?.user ?? '-'],
        ['env', image ? Object.entries(image.env).map(([k, v]) => `${k}=${v}`).join(' ') || '-' : '-'],
        ['start', image?.start_command ? image.start_command.join(' ') : '-'],
        ['disk', image ? formatBytes(image.disk_bytes) : '-'],
      ];
      for (const [label, value] of rows) process.stdout.write(`${label.padEnd(9)} ${value}\n`);
    }));

  clientCommand(templates, 'rm <name>', 'delete a template (running instances keep their files)')
    .action(run(async (name: string, options: ConnectionOptions) => {
      const template = await clientOf(options).templates.delete(name);
      if (options.json) return printJson(template);
      process.stdout.write(`deleted template ${template.name}\n`);
    }));
}

/** How a build ended, in one line: its steps, what the cache spared, its time and size. */
function summaryOf(template: Template, elapsedMs: number): string {
  const took = `${(elapsedMs / 1000).toFixed(1)} s`;
  const steps = `${template.build.steps} steps, ${template.build.cached_steps} cached`;
  if (template.state !== 'ready') return `roomkit: the build of ${template.name} failed after ${took} (${steps}): ${template.reason ?? 'no reason given'}`;
  const size = template.image ? `, ${formatBytes(template.image.disk_bytes)}` : '';
  return `built ${template.name}: ${steps} in ${took}${size}; a profile uses it with "image": "template:${template.name}"`;
}

/** The regular files under `root`, by their `/`-separated path below it. */
function contextOf(root: string): Record<string, Buffer> {
  const files: Record<string, Buffer> = {};
  let count = 0;
  let bytes = 0;
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) {
        if (!SKIPPED.has(entry.name)) walk(path);
      } else if (entry.isFile() || (entry.isSymbolicLink() && statSync(path, { throwIfNoEntry: false })?.isFile())) {
        const data = readFileSync(path);
        count++;
        bytes += data.length;
        if (count > MAX_FILES || bytes > MAX_BYTES) {
          throw new ClientError('invalid_argument', `${root} holds more than a build takes (${MAX_FILES} files, ${MAX_BYTES / 1024 / 1024} MiB); build from a directory with only what the Dockerfile copies`);
        }
        files[relative(root, path).split(sep).join('/')] = data;
      }
    }
  };
  try {
    walk(root);
  } catch (err) {
    if (err instanceof ClientError) throw err;
    throw new ClientError('invalid_argument', `cannot read ${root}: ${(err as Error).message}`);
  }
  return files;
}
