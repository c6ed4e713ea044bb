// One template build: a Dockerfile's steps run inside a sandbox of the runtime, never on
// the host. A build instance is made like any other (the runtime's provision, with the
// build's own limits) from the base image or from the last cached layer; RUN is a
// command in it (as root, or as USER, through the image's sudo), COPY and ADD are file
// writes through its agent, WORKDIR a directory made in it. After each step that changes
// files, the instance's writable layer is saved as a runtime snapshot of its files: that
// is the step's layer, found again by its cache key (the parent's key, the instruction's
// text, and the hash of the files it copies), so an unchanged step is not run again and
// templates of one organization share their common steps. The last layer is the
// template's image: instances start from it as from a snapshot.
import { createHash, randomUUID } from 'node:crypto';
import { posix } from 'node:path';
import type { Logger } from 'pino';
import { nowIso } from '../lib/time.ts';
import type { MachineSpec, Runtime, SnapshotRuntime } from '../runtimes/types.ts';
import type { Db } from '../store/db.ts';
import { isUniqueViolation } from '../store/errors.ts';
import { type CommandForm, type DockerfileStep, expandVariables, type ParsedDockerfile } from './dockerfile-parser.ts';
import type { TemplateImage } from './template-schema.ts';

/** Bumped when what a step's layer holds changes, so older layers are not found again. */
const LAYER_FORMAT = 1;
/** The machine a build runs on: its limits, as a profile's (network: the internet, for package installs). */
export const BUILD_MACHINE = { memory_mb: 2048, vcpus: 1, disk_mb: 4096 } as const;
/** The longest a build may take, every step together. */
export const BUILD_TIME_LIMIT_MS = 30 * 60_000;
/** The VM user of build instances, and of every template's image. */
const BUILD_USER = 'user';
const BUILD_HOME = '/home/user';
/** Output of one RUN kept for its failure's reason (the whole goes to the log). */
const REASON_OUTPUT_BYTES = 2000;

/** What a build made, as kept in the store: the API's TemplateImage and where its files are. */
export interface TemplateResult extends TemplateImage {
  /** The runtime snapshot of its files; null when no step changed any (instances boot from the base image). */
  layer_id: string | null;
  /** The cache key of its last step: a template built FROM it chains on. */
  layer_key: string;
}

/** A build that cannot go on: why, in words for the template's reason. */
export class TemplateBuildFailure extends Error {}

export interface BuildRequest {
  organizationId: string;
  buildId: string;
  dockerfile: ParsedDockerfile;
  /** The build context by relative path. */
  files: ReadonlyMap<string, Buffer>;
  /** For FROM template:NAME, what that template's last good build made. */
  parent?: TemplateResult;
  /** Receives the build's log as it is written. */
  log: (text: string) => void;
  signal: AbortSignal;
}

export interface BuildOutcome {
  result: TemplateResult;
  steps: number;
  cachedSteps: number;
}

export interface TemplateBuilderDeps {
  db: Db;
  /** The runtime that runs build sandboxes; throws TemplateBuildFailure when there is none that can. */
  runtime: () => Runtime & SnapshotRuntime;
  log: Logger;
  nodeId: string;
}

/** The state a Dockerfile's steps build up besides files. */
interface BuildState {
  env: Map<string, string>;
  args: Map<string, string>;
  workdir: string | null;
  user: string | null;
  cmd: CommandForm | null;
  entrypoint: CommandForm | null;
  readyCheck: CommandForm | null;
  expose: string[];
  labels: Map<string, string>;
}

export class TemplateBuilder {
  private readonly deps: TemplateBuilderDeps;

  constructor(deps: TemplateBuilderDeps) {
    this.deps = deps;
  }

  /** Runs every step (cached ones only looked up); rejects with TemplateBuildFailure when one fails. */
  async build(request: BuildRequest): Promise<BuildOutcome> {
    const { dockerfile, parent, log } = request;
    const deadline = Date.now() + BUILD_TIME_LIMIT_MS;
    const baseImage = parent?.base_image ?? (dockerfile.from.kind === 'debian' ? dockerfile.from.image : '');
    const state: BuildState = {
      env: new Map(Object.entries(parent?.env ?? {})),
      args: new Map(),
      workdir: parent?.workdir ?? null,
      user: parent?.user ?? null,
      cmd: parent?.start_command ? { argv: parent.start_command } : null,
      entrypoint: null,
      readyCheck: parent?.ready_check ? { argv: parent.ready_check } : null,
      expose: [...(parent?.expose ?? [])],
      labels: new Map(Object.entries(parent?.labels ?? {})),
    };
    let key = parent?.layer_key ?? hash(['base', String(LAYER_FORMAT), baseImage]);
    let layerId = parent?.layer_id ?? null;
    let diskBytes = parent?.disk_bytes ?? 0;
    let cachedSteps = 0;
    let instanceId: string | undefined;
    const total = dockerfile.steps.length;
    log(`FROM ${dockerfile.from.kind === 'debian' ? dockerfile.from.image : `template:${dockerfile.from.name}`}\n`);
    try {
      for (const [index, step] of dockerfile.steps.entries()) {
        request.signal.throwIfAborted();
        log(`step ${index + 1}/${total}: ${step.text}\n`);
        const copied = step.kind === 'copy' ? copyTargets(step, request.files, new Map([...state.args, ...state.env]), state.workdir) : undefined;
        key = hash([key, step.text, copied ? filesHash(copied) : '']);
        if (!changesFiles(step)) {
          applyMetadata(step, state);
          cachedSteps++;
          continue;
        }
        if (instanceId === undefined) {
          const cached = await this.findLayer(request.organizationId, key);
          if (cached) {
            applyMetadata(step, state);
            layerId = cached.layer_id;
            diskBytes = cached.disk_bytes;
            cachedSteps++;
            log('  cached\n');
            continue;
          }
          instanceId = await this.startInstance(request, baseImage, layerId);
        }
        const started = Date.now();
        await this.runStep(instanceId, step, state, copied, deadline, request);
        applyMetadata(step, state);
        const saved = await this.saveLayer(request.organizationId, instanceId, key, baseImage);
        layerId = saved.layerId;
        diskBytes = saved.diskBytes;
        log(`  done in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
      }
    } finally {
      if (instanceId !== undefined) await this.removeInstance(instanceId);
    }
    return {
      result: {
        base_image: baseImage,
        env: Object.fromEntries(state.env),
        workdir: state.workdir,
        user: state.user,
        start_command: startCommandOf(state),
        ready_check: state.readyCheck === null ? null : argvOf(state.readyCheck),
        expose: state.expose,
        labels: Object.fromEntries(state.labels),
        disk_bytes: diskBytes,
        layer_id: layerId,
        layer_key: key,
      },
      steps: total,
      cachedSteps,
    };
  }

  /** The machine of a build instance, and of instances of a template (their files need the same image and disk). */
  static machineOf(baseImage: string): MachineSpec {
    return { image: baseImage, packages: [], user: BUILD_USER, home: BUILD_HOME, ...BUILD_MACHINE, network: { egress: 'internet' } };
  }

  private async findLayer(organizationId: string, key: string): Promise<{ layer_id: string; disk_bytes: number } | undefined> {
    return this.deps.db
      .selectFrom('template_layers')
      .select(['layer_id', 'disk_bytes'])
      .where('organization_id', '=', organizationId)
      .where('key', '=', key)
      .where('node_id', '=', this.deps.nodeId)
      .executeTakeFirst();
  }

  private async startInstance(request: BuildRequest, baseImage: string, layerId: string | null): Promise<string> {
    const instanceId = randomUUID();
    request.log(`  starting a build sandbox${layerId ? ' from the last cached step' : ` from ${baseImage}`}\n`);
    try {
      await this.deps.runtime().provision({
        instanceId,
        organizationId: request.organizationId,
        profileId: `template-build-${request.buildId}`,
        roomId: `template-build-${request.buildId}`,
        spec: TemplateBuilder.machineOf(baseImage),
        signal: request.signal,
        onStep: async () => request.signal.throwIfAborted(),
        onProgress: (message) => request.log(`  ${message}\n`),
        log: this.deps.log.child({ instanceId, buildId: request.buildId }),
        ...(layerId ? { fromSnapshot: layerId } : {}),
      });
    } catch (err) {
      throw new TemplateBuildFailure(`the build sandbox could not start: ${(err as Error).message}`);
    }
    return instanceId;
  }

  private async removeInstance(instanceId: string): Promise<void> {
    try {
      await (await this.deps.runtime().destroy(instanceId)).released;
    } catch (err) {
      // The next start's sweep removes what is left: the store knows no such instance.
      this.deps.log.error({ instanceId, err }, 'could not remove a template build\'s sandbox');
    }
  }

  private async runStep(
    instanceId: string,
    step: DockerfileStep,
    state: BuildState,
    copied: Map<string, { dest: string; data: Buffer }> | undefined,
    deadline: number,
    request: BuildRequest,
  ): Promise<void> {
    const vars = new Map([...state.args, ...state.env]);
    if (step.kind === 'run') {
      const user = userName(state.user);
      const argv = 'shell' in step.command ? ['sh', '-c', step.command.shell] : step.command.argv;
      const env = Object.fromEntries(vars);
      env.HOME = user === 'root' ? '/root' : user === BUILD_USER ? BUILD_HOME : '/';
      await this.exec(instanceId, step.line, step.text, sudoCommand(user, state.workdir ?? '/', argv), env, deadline, request);
    } else if (step.kind === 'workdir') {
      const dir = posix.resolve(state.workdir ?? '/', expandVariables(step.path, vars));
      const owner = state.user && userName(state.user) !== 'root' ? state.user : undefined;
      const chown = owner ? ` && chown ${quote(owner)} ${quote(dir)}` : '';
      await this.exec(instanceId, step.line, step.text, `exec sudo -- sh -c ${quote(`mkdir -p -- ${quote(dir)}${chown}`)}`, {}, deadline, request);
    } else if (step.kind === 'copy' && copied) {
      for (const { dest, data } of copied.values()) {
        await this.deps.runtime().writeFile(instanceId, dest, data, { home: BUILD_HOME, asRoot: true });
      }
      request.log(`  copied ${copied.size} file${copied.size === 1 ? '' : 's'}\n`);
      if (step.chown) {
        const paths = [...new Set([...copied.values()].map((c) => c.dest))];
        await this.exec(instanceId, step.line, step.text, `exec sudo -- chown -- ${quote(step.chown)} ${paths.map(quote).join(' ')}`, {}, deadline, request);
      }
    }
  }

  /** Runs a command of a step; a non-zero exit (or the time limit) fails the build with its output. */
  private async exec(instanceId: string, line: number, text: string, command: string, env: Record<string, string>, deadline: number, request: BuildRequest): Promise<void> {
    const left = deadline - Date.now();
    if (left <= 0) throw new TemplateBuildFailure(`the build took longer than its limit of ${BUILD_TIME_LIMIT_MS / 60_000} minutes (line ${line})`);
    let tail = '';
    const commandId = randomUUID();
    // A build stopped (its template deleted, the service stopping) ends the step's processes too.
    const stop = () => void this.deps.runtime().killCommand(instanceId, commandId).catch(() => {});
    request.signal.addEventListener('abort', stop, { once: true });
    const outcome = await this.deps.runtime().runCommand(instanceId, {
      commandId,
      command,
      home: BUILD_HOME,
      cwd: '/',
      env,
      timeoutMs: left,
      maxOutputBytes: 1024 * 1024,
      trackChanges: false,
      onOutput: (chunk) => {
        const text = chunk.toString('utf8');
        tail = (tail + text).slice(-REASON_OUTPUT_BYTES);
        request.log(text);
      },
    }).finally(() => request.signal.removeEventListener('abort', stop));
    request.signal.throwIfAborted();
    if (outcome.timedOut) throw new TemplateBuildFailure(`line ${line}: ${text}: the build took longer than its limit of ${BUILD_TIME_LIMIT_MS / 60_000} minutes`);
    if (outcome.exitCode !== 0) {
      request.log(`  exit code ${outcome.exitCode}\n`);
      const output = tail.trim() ? `; its output ended with: ${tail.trim().split('\n').slice(-5).join('\n')}` : '';
      throw new TemplateBuildFailure(`line ${line}: ${text}: exited with code ${outcome.exitCode}${output}`);
    }
  }

  /** Saves the instance's files as the step's layer, unless a build beside this one saved the same step first. */
  private async saveLayer(organizationId: string, instanceId: string, key: string, baseImage: string): Promise<{ layerId: string; diskBytes: number }> {
    const layerId = randomUUID();
    const outcome = await this.deps.runtime().snapshot(instanceId, layerId, { memory: false });
    try {
      await this.deps.db
        .insertInto('template_layers')
        .values({ organization_id: organizationId, key, layer_id: layerId, base_image: baseImage, disk_bytes: outcome.diskBytes, node_id: this.deps.nodeId, created_at: nowIso() })
        .execute();
    } catch (err) {
      if (!isUniqueViolation(err)) throw err;
      // The same files saved by another build: theirs is the layer, ours goes.
      await this.deps.runtime().deleteSnapshot(layerId);
      const theirs = await this.findLayer(organizationId, key);
      if (!theirs) throw err;
      return { layerId: theirs.layer_id, diskBytes: theirs.disk_bytes };
    }
    return { layerId, diskBytes: outcome.diskBytes };
  }
}

/**
 * Where each file a COPY or ADD names goes: a file to the destination (inside it when it
 * ends with `/` or there are several sources), a directory's files (or `.`'s: the whole
 * context) under it, keeping their paths below the source. Sources may use `*`, `?` and
 * `[...]`.
 */
export function copyTargets(
  step: Extract<DockerfileStep, { kind: 'copy' }>,
  files: ReadonlyMap<string, Buffer>,
  vars: ReadonlyMap<string, string>,
  workdir: string | null,
): Map<string, { dest: string; data: Buffer }> {
  const rawDest = expandVariables(step.dest, vars);
  const dest = posix.resolve(workdir ?? '/', rawDest);
  const intoDirectory = rawDest.endsWith('/') || step.sources.length > 1;
  const out = new Map<string, { dest: string; data: Buffer }>();
  for (const raw of step.sources) {
    const source = normalizeSource(raw);
    let matched = false;
    for (const [path, data] of files) {
      if (source === '') {
        out.set(path, { dest: posix.join(dest, path), data });
        matched = true;
      } else if (path === source || posix.matchesGlob(path, source)) {
        out.set(path, { dest: intoDirectory ? posix.join(dest, posix.basename(path)) : dest, data });
        matched = true;
      } else if (path.startsWith(`${source}/`)) {
        out.set(path, { dest: posix.join(dest, path.slice(source.length + 1)), data });
        matched = true;
      }
    }
    if (!matched) throw new TemplateBuildFailure(`line ${step.line}: ${step.instruction} ${raw}: no file of the template's files matches it`);
  }
  return out;
}

function normalizeSource(source: string): string {
  const normal = posix.normalize(`/${source}`).slice(1).replace(/\/$/, '');
  return normal === '.' ? '' : normal;
}

/** Whether a step changes the instance's files (and so makes a layer). */
function changesFiles(step: DockerfileStep): boolean {
  return step.kind === 'run' || step.kind === 'copy' || step.kind === 'workdir';
}

function applyMetadata(step: DockerfileStep, state: BuildState): void {
  const vars = new Map([...state.args, ...state.env]);
  switch (step.kind) {
    case 'env':
      for (const [name, value] of step.vars) state.env.set(name, expandVariables(value, vars));
      break;
    case 'arg':
      if (step.value !== undefined) state.args.set(step.name, expandVariables(step.value, vars));
      break;
    case 'workdir':
      state.workdir = posix.resolve(state.workdir ?? '/', expandVariables(step.path, vars));
      break;
    case 'user':
      state.user = expandVariables(step.user, vars);
      break;
    case 'label':
      for (const [name, value] of step.labels) state.labels.set(name, value);
      break;
    case 'expose':
      state.expose.push(...step.ports);
      break;
    case 'cmd':
      state.cmd = step.command;
      break;
    case 'entrypoint':
      state.entrypoint = step.command;
      // Docker drops a CMD set before an ENTRYPOINT.
      state.cmd = null;
      break;
    case 'healthcheck':
      state.readyCheck = step.command;
      break;
    default:
      break;
  }
}

function argvOf(form: CommandForm): string[] {
  return 'shell' in form ? ['sh', '-c', form.shell] : form.argv;
}

function startCommandOf(state: BuildState): string[] | null {
  const argv = (form: CommandForm | null) => (form === null ? [] : argvOf(form));
  // A shell-form ENTRYPOINT ignores CMD, as Docker's does.
  const command = state.entrypoint && 'shell' in state.entrypoint ? argv(state.entrypoint) : [...argv(state.entrypoint), ...argv(state.cmd)];
  return command.length > 0 ? command : null;
}

/** USER's name part (a `name:group` runs as name). */
function userName(user: string | null): string {
  return (user ?? 'root').split(':')[0] || 'root';
}

/** A command run as `user` in `dir` through the image's sudo (the agent starts it as the VM user). */
export function sudoCommand(user: string, dir: string, argv: string[]): string {
  return `exec sudo -E -u ${quote(user)} -- sh -c ${quote('cd -- "$0" && exec "$@"')} ${quote(dir)} ${argv.map(quote).join(' ')}`;
}

export function quote(value: string): string {
  return `'${value.replaceAll("'", `'\\''`)}'`;
}

function hash(parts: string[]): string {
  const h = createHash('sha256');
  for (const part of parts) h.update(`${part.length}:${part}`);
  return h.digest('hex');
}

function filesHash(copied: Map<string, { dest: string; data: Buffer }>): string {
  const h = createHash('sha256');
  for (const [path, { dest, data }] of [...copied].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    h.update(`${path}\0${dest}\0${createHash('sha256').update(data).digest('hex')}\n`);
  }
  return h.digest('hex');
}
