// Templates: images an organization builds from Dockerfiles and names, for profiles'
// `image: "template:NAME"`. A POST records a build and answers at once; the build runs
// in the background on this node (template-builder.ts), its log kept in memory while it
// runs (for readers and streams) and written to the store as it goes. A template's state
// is its latest build's; new instances get the image of its last build that succeeded,
// so a rebuild under the same name changes what new instances start from and nothing
// for running ones (they hold their own copy of the files). Another organization's
// template is answered exactly like one that does not exist.
import { randomUUID } from 'node:crypto';
import { posix } from 'node:path';
import type { Logger } from 'pino';
import { AppError } from '../errors.ts';
import { isUuid } from '../lib/ids.ts';
import { nowIso } from '../lib/time.ts';
import type { Runtime, RuntimeSelection, SnapshotRuntime } from '../runtimes/types.ts';
import type { Db } from '../store/db.ts';
import { isUniqueViolation } from '../store/errors.ts';
import type { TemplateBuildsTable, TemplatesTable } from '../store/schema.ts';
import { DockerfileError, type ParsedDockerfile, parseDockerfile } from './dockerfile-parser.ts';
import { noteOperation } from './operations.ts';
import { TemplateBuildFailure, TemplateBuilder, type TemplateResult } from './template-builder.ts';
import {
  type CreateTemplateBody,
  type Template,
  type TemplateBuild,
  type TemplateBuildStarted,
  TEMPLATE_FILES_MAX_BYTES,
  TEMPLATE_FILES_MAX_COUNT,
  type TemplateList,
} from './template-schema.ts';

export interface TemplatesDeps {
  db: Db;
  runtime: RuntimeSelection;
  log: Logger;
  /** The node that runs this process's builds and holds their layers. */
  nodeId: string;
}

/** How often a running build's log is written to the store. */
const LOG_FLUSH_MS = 2000;
/** The most of a build's log kept; beyond it the start is dropped (its end says why it failed). */
const LOG_MAX_CHARS = 4 * 1024 * 1024;

/** A build running in this process: its log so far, who follows it, and how to stop it. */
interface RunningBuild {
  log: string;
  followers: Set<(chunk: string) => void>;
  /** Settles when the build has ended and its outcome is in the store. */
  ended: Promise<void>;
  controller: AbortController;
  /** The log as last written to the store. */
  flushedLength: number;
}

/** A template's image for an instance: what the runtime starts it from, and what commands in it get. */
export interface TemplateSource {
  templateId: string;
  buildId: string;
  image: TemplateResult;
}

type TemplateRow = TemplatesTable;
type BuildRow = TemplateBuildsTable;

export class Templates {
  private readonly deps: TemplatesDeps;
  private readonly running = new Map<string, RunningBuild>();

  constructor(deps: TemplatesDeps) {
    this.deps = deps;
  }

  /** Records a build of the Dockerfile under `name` and starts it; a build under way for the name is a conflict. */
  async create(organizationId: string, body: CreateTemplateBody): Promise<TemplateBuildStarted> {
    noteOperation('template.build');
    // A path names a template by its name or its id: a name of an id's form would be ambiguous.
    if (isUuid(body.name)) throw invalid('name', 'a template\'s name cannot have the form of a template_id (a UUID)');
    const files = decodeFiles(body.files ?? {});
    if (body.dockerfile.includes('\u0000')) throw new AppError('validation_error', 'dockerfile contains a NUL character');
    let parsed: ParsedDockerfile | undefined;
    let refusal: string | undefined;
    try {
      parsed = parseDockerfile(body.dockerfile);
    } catch (err) {
      if (!(err instanceof DockerfileError)) throw err;
      refusal = err.message;
    }
    const now = nowIso();
    const buildId = randomUUID();
    const build: BuildRow = {
      id: buildId,
      template_id: '',
      organization_id: organizationId,
      state: refusal === undefined ? 'building' : 'failed',
      reason: refusal ?? null,
      dockerfile: body.dockerfile,
      log: refusal === undefined ? '' : `${refusal}\n`,
      steps: parsed?.steps.length ?? 0,
      cached_steps: 0,
      result: null,
      node_id: this.deps.nodeId,
      created_at: now,
      finished_at: refusal === undefined ? null : now,
    };
    let templateId: string;
    try {
      templateId = await this.deps.db.transaction().execute(async (trx) => {
        const existing = await trx
          .selectFrom('templates')
          .selectAll()
          .where('organization_id', '=', organizationId)
          .where('name', '=', body.name)
          .where('deleted_at', 'is', null)
          .executeTakeFirst();
        if (existing) {
          // Locks the row, so that two rebuilds cannot both see the last build ended.
          await trx.updateTable('templates').set({ updated_at: now }).where('id', '=', existing.id).execute();
          const latest = await trx.selectFrom('template_builds').select('state').where('id', '=', existing.build_id).executeTakeFirst();
          if (latest?.state === 'building') throw busy(body.name, existing.build_id);
          await trx.updateTable('templates').set({ build_id: buildId, updated_at: now }).where('id', '=', existing.id).execute();
          await trx.insertInto('template_builds').values({ ...build, template_id: existing.id }).execute();
          return existing.id;
        }
        const id = randomUUID();
        await trx
          .insertInto('templates')
          .values({ id, organization_id: organizationId, name: body.name, build_id: buildId, ready_build_id: null, created_at: now, updated_at: now, deleted_at: null })
          .execute();
        await trx.insertInto('template_builds').values({ ...build, template_id: id }).execute();
        return id;
      });
    } catch (err) {
      // Two first builds of one name at once: the loser finds the winner's building.
      if (isUniqueViolation(err)) throw busy(body.name);
      throw err;
    }
    if (parsed) this.start(organizationId, templateId, buildId, parsed, files);
    return { template_id: templateId, name: body.name, build_id: buildId, state: build.state };
  }

  async list(organizationId: string): Promise<TemplateList> {
    const rows = await this.deps.db
      .selectFrom('templates')
      .selectAll()
      .where('organization_id', '=', organizationId)
      .where('deleted_at', 'is', null)
      .orderBy('name')
      .execute();
    return { templates: await Promise.all(rows.map((row) => this.view(row))) };
  }

  async get(organizationId: string, nameOrId: string): Promise<Template> {
    return this.view(await this.row(organizationId, nameOrId));
  }

  /** A build's log so far, and whether it is still being written (on this node). */
  async logs(organizationId: string, nameOrId: string, buildId: string): Promise<{ text: string; running: boolean }> {
    const build = await this.buildRow(organizationId, nameOrId, buildId);
    const running = this.running.get(build.id);
    if (running) return { text: running.log, running: true };
    return { text: build.log, running: false };
  }

  /**
   * Follows a build's log: its text so far, and `onChunk` gets what is written from then
   * on, until the build ends (`ended` settles then). Undefined when it is not running in
   * this process.
   */
  follow(buildId: string, onChunk: (chunk: string) => void): { text: string; ended: Promise<void>; stop: () => void } | undefined {
    const running = this.running.get(buildId);
    if (!running) return undefined;
    running.followers.add(onChunk);
    return { text: running.log, ended: running.ended, stop: () => running.followers.delete(onChunk) };
  }

  /**
   * Deletes the template (a build under way is stopped): its name is free again, and
   * profiles that name it can no longer start instances. Running instances keep their
   * files; the cached layers stay for later builds.
   */
  async delete(organizationId: string, nameOrId: string): Promise<Template> {
    noteOperation('template.delete');
    const row = await this.row(organizationId, nameOrId);
    const view = await this.view(row);
    await this.deps.db.updateTable('templates').set({ deleted_at: nowIso() }).where('id', '=', row.id).execute();
    const running = this.running.get(row.build_id);
    if (running) {
      running.controller.abort(new TemplateBuildFailure('the template was deleted'));
      await running.ended;
    }
    return view;
  }

  /** What an instance of `template:NAME` starts from: its last good build (template_unusable when there is none). */
  async source(organizationId: string, name: string): Promise<TemplateSource> {
    const row = await this.row(organizationId, name);
    if (row.ready_build_id === null) {
      const latest = await this.deps.db.selectFrom('template_builds').select(['state', 'reason']).where('id', '=', row.build_id).executeTakeFirstOrThrow();
      const why = latest.state === 'building' ? 'is still building its first image' : `has no image: its build failed (${latest.reason ?? 'no reason recorded'})`;
      throw new AppError('template_unusable', `template "${row.name}" ${why}`, { template_id: row.id, state: latest.state });
    }
    const build = await this.deps.db.selectFrom('template_builds').select(['result', 'node_id']).where('id', '=', row.ready_build_id).executeTakeFirstOrThrow();
    if (build.result === null) throw new Error(`template build ${row.ready_build_id} is ready without a result`);
    if (build.node_id !== this.deps.nodeId) {
      throw new AppError('template_unusable', `template "${row.name}" was built on another node, whose host holds its files`, { template_id: row.id });
    }
    return { templateId: row.id, buildId: row.ready_build_id, image: JSON.parse(build.result) as TemplateResult };
  }

  /** Builds this node was running when the service stopped are recorded as failed. */
  async reconcile(): Promise<void> {
    const now = nowIso();
    const { numUpdatedRows } = await this.deps.db
      .updateTable('template_builds')
      .set({ state: 'failed', reason: 'the service stopped during the build; build it again', finished_at: now })
      .where('node_id', '=', this.deps.nodeId)
      .where('state', '=', 'building')
      .executeTakeFirst();
    if (numUpdatedRows > 0n) this.deps.log.warn({ builds: Number(numUpdatedRows) }, 'template builds were running when the service stopped; recorded as failed');
  }

  /** Stops the builds under way (each recorded as failed) and waits for them. */
  async close(): Promise<void> {
    for (const running of this.running.values()) running.controller.abort(new TemplateBuildFailure('the service is stopping'));
    await Promise.all([...this.running.values()].map((r) => r.ended));
  }

  /** Names the template's layers in use, for what keeps runtime snapshots the store knows. */
  async layerIds(): Promise<Set<string>> {
    const rows = await this.deps.db.selectFrom('template_layers').select('layer_id').where('node_id', '=', this.deps.nodeId).execute();
    return new Set(rows.map((r) => r.layer_id));
  }

  private start(organizationId: string, templateId: string, buildId: string, parsed: ParsedDockerfile, files: Map<string, Buffer>): void {
    const controller = new AbortController();
    const running: RunningBuild = { log: '', followers: new Set(), ended: Promise.resolve(), controller, flushedLength: 0 };
    const write = (output: string) => {
      // PostgreSQL's text cannot hold a NUL, which a command may print.
      const text = output.replaceAll('\u0000', '\uFFFD');
      running.log = (running.log + text).slice(-LOG_MAX_CHARS);
      for (const follower of running.followers) follower(text);
    };
    const log = this.deps.log.child({ templateId, buildId });
    const flush = async () => {
      if (running.log.length === running.flushedLength) return;
      running.flushedLength = running.log.length;
      await this.deps.db.updateTable('template_builds').set({ log: running.log }).where('id', '=', buildId).execute();
    };
    const timer = setInterval(() => void flush().catch((err: unknown) => log.error({ err }, 'could not write a template build\'s log')), LOG_FLUSH_MS);
    this.running.set(buildId, running);
    running.ended = (async () => {
      const started = Date.now();
      let finish: Partial<BuildRow>;
      try {
        const outcome = await this.runBuild(organizationId, buildId, parsed, files, write, controller.signal);
        write(`built in ${((Date.now() - started) / 1000).toFixed(1)} s: ${outcome.steps} steps, ${outcome.cachedSteps} cached\n`);
        finish = { state: 'ready', result: JSON.stringify(outcome.result), steps: outcome.steps, cached_steps: outcome.cachedSteps };
      } catch (err) {
        const stopped = controller.signal.aborted ? controller.signal.reason : undefined;
        const failure = (stopped ?? err) instanceof TemplateBuildFailure ? ((stopped ?? err) as Error).message : `the build failed: ${(err as Error).message}`;
        const reason = failure.replaceAll('\u0000', '\uFFFD');
        if (!(err instanceof TemplateBuildFailure) && stopped === undefined) log.error({ err }, 'template build failed');
        write(`failed: ${reason}\n`);
        finish = { state: 'failed', reason };
      } finally {
        clearInterval(timer);
      }
      try {
        await this.deps.db.transaction().execute(async (trx) => {
          await trx.updateTable('template_builds').set({ ...finish, log: running.log, finished_at: nowIso() }).where('id', '=', buildId).execute();
          if (finish.state === 'ready') {
            await trx.updateTable('templates').set({ ready_build_id: buildId, updated_at: nowIso() }).where('id', '=', templateId).where('deleted_at', 'is', null).execute();
          }
        });
        log.info({ state: finish.state, elapsedMs: Date.now() - started }, 'template build ended');
      } catch (err) {
        log.error({ err }, 'could not record how a template build ended');
      } finally {
        this.running.delete(buildId);
      }
    })();
  }

  private async runBuild(
    organizationId: string,
    buildId: string,
    parsed: ParsedDockerfile,
    files: Map<string, Buffer>,
    write: (text: string) => void,
    signal: AbortSignal,
  ) {
    let parent: TemplateResult | undefined;
    if (parsed.from.kind === 'template') {
      try {
        parent = (await this.source(organizationId, parsed.from.name)).image;
      } catch (err) {
        if (err instanceof AppError) throw new TemplateBuildFailure(`line ${parsed.fromLine}: ${err.message}`);
        throw err;
      }
    }
    const builder = new TemplateBuilder({ db: this.deps.db, runtime: () => this.buildRuntime(), log: this.deps.log, nodeId: this.deps.nodeId });
    return builder.build({ organizationId, buildId, dockerfile: parsed, files, log: write, signal, ...(parent ? { parent } : {}) });
  }

  /** The runtime, when it can run builds (their steps' files are kept as its snapshots). */
  private buildRuntime(): Runtime & SnapshotRuntime {
    const selection = this.deps.runtime;
    if (!('runtime' in selection)) throw new TemplateBuildFailure(`no runtime can run sandboxes on this host: ${selection.unavailable.reason}`);
    const runtime = selection.runtime;
    if (!runtime.capabilities.snapshot || !runtime.snapshot || !runtime.deleteSnapshot || !runtime.listSnapshots) {
      throw new TemplateBuildFailure(`the ${runtime.name} runtime cannot keep a build's steps (it takes no snapshots): templates need one that can`);
    }
    return runtime as Runtime & SnapshotRuntime;
  }

  private async row(organizationId: string, nameOrId: string): Promise<TemplateRow> {
    const row = await this.deps.db
      .selectFrom('templates')
      .selectAll()
      .where('organization_id', '=', organizationId)
      .where('deleted_at', 'is', null)
      .where((eb) => eb.or([eb('name', '=', nameOrId), eb('id', '=', nameOrId)]))
      .executeTakeFirst();
    if (!row) throw new AppError('template_not_found', `no template "${nameOrId}" in this organization`);
    return row;
  }

  private async buildRow(organizationId: string, nameOrId: string, buildId: string): Promise<BuildRow> {
    const template = await this.row(organizationId, nameOrId);
    const build = await this.deps.db.selectFrom('template_builds').selectAll().where('id', '=', buildId).where('template_id', '=', template.id).executeTakeFirst();
    if (!build) throw new AppError('not_found', `template "${template.name}" has no build ${buildId}`);
    return build;
  }

  private async view(row: TemplateRow): Promise<Template> {
    const ids = row.ready_build_id !== null && row.ready_build_id !== row.build_id ? [row.build_id, row.ready_build_id] : [row.build_id];
    const builds = await this.deps.db.selectFrom('template_builds').selectAll().where('id', 'in', ids).execute();
    const latest = builds.find((b) => b.id === row.build_id);
    if (!latest) throw new Error(`template ${row.id} has no build ${row.build_id}`);
    // A latest build that is ready is the ready one: the row read just before may not say so
    // yet (the build's end and the template's ready_build_id commit together, after it was read).
    const ready = latest.state === 'ready' ? latest : builds.find((b) => b.id === row.ready_build_id);
    const result = ready?.result ? (JSON.parse(ready.result) as TemplateResult) : null;
    return {
      template_id: row.id,
      name: row.name,
      state: latest.state,
      reason: latest.reason,
      build_id: latest.id,
      build: buildView(latest),
      image: result === null ? null : imageView(result),
      created_at: row.created_at,
      updated_at: row.updated_at,
    };
  }
}

function buildView(row: BuildRow): TemplateBuild {
  return {
    build_id: row.id,
    state: row.state,
    reason: row.reason,
    steps: row.steps,
    cached_steps: row.cached_steps,
    created_at: row.created_at,
    finished_at: row.finished_at,
  };
}

function imageView(result: TemplateResult): Template['image'] {
  const { layer_id: _id, layer_key: _key, ...image } = result;
  return image;
}

function busy(name: string, buildId?: string): AppError {
  return new AppError(
    'template_busy',
    `template "${name}" is being built${buildId ? ` (build ${buildId})` : ''}: one build of a template at a time`,
    buildId ? { build_id: buildId } : undefined,
  );
}

/** The build context from the request: relative paths without `..`, bytes from base64, within the limits. */
function decodeFiles(files: Record<string, string>): Map<string, Buffer> {
  const entries = Object.entries(files);
  if (entries.length > TEMPLATE_FILES_MAX_COUNT) throw invalid('files', `at most ${TEMPLATE_FILES_MAX_COUNT} files (${entries.length} given)`);
  const out = new Map<string, Buffer>();
  let total = 0;
  for (const [path, base64] of entries) {
    const normal = posix.normalize(path);
    if (path.startsWith('/') || normal.startsWith('..') || normal === '.' || normal.endsWith('/') || path.includes('\u0000')) {
      throw invalid(`files/${path}`, `"${path}" is not a file path inside the build context (relative, no "..")`);
    }
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(base64) || base64.length % 4 !== 0) throw invalid(`files/${path}`, `the content of "${path}" is not base64`);
    const data = Buffer.from(base64, 'base64');
    total += data.length;
    if (total > TEMPLATE_FILES_MAX_BYTES) throw invalid('files', `the files weigh more than ${TEMPLATE_FILES_MAX_BYTES / 1024 / 1024} MiB together`);
    out.set(normal, data);
  }
  return out;
}

function invalid(field: string, message: string): AppError {
  return new AppError('validation_error', message, { errors: [{ field, message }] });
}
