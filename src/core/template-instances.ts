// Instances of a profile whose image is `template:NAME`: the spec they are made with is
// the profile's, on the machine the template's files need (its base image, the build's
// VM user and disk size), with the template's ENV under the profile's env, and what the
// runtime starts them from (the template's last layer, as from a snapshot). The spec an
// instance keeps also names the template build it came from, its WORKDIR and its start
// command (CMD and ENTRYPOINT) with its ready check (HEALTHCHECK CMD), so a rebuild of
// the template changes nothing for instances already made; the start command is started
// in each new instance, and its ready check passed, before the instance is `ready`.
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { Runtime } from '../runtimes/types.ts';
import { BUILD_MACHINE } from './template-builder.ts';
import type { ProfileSpec } from './profile-schema.ts';
import type { TemplateSource } from './templates.ts';

/** What an instance's stored spec holds of its template besides the profile's fields. */
export interface TemplateSpecFields {
  template?: {
    name: string;
    build_id: string;
    /** The runtime snapshot its files start from; null when the template changed no file. */
    layer_id: string | null;
    /** WORKDIR: where its commands start when they name no directory. */
    workdir: string | null;
    /** CMD and ENTRYPOINT: the program started in each new instance before it is ready. */
    start_command?: string[] | null;
    /** HEALTHCHECK CMD: run after the start command until it succeeds, before the instance is ready. */
    ready_check?: string[] | null;
  };
}

/** The spec of an instance of `profile` made from the template's image. */
export function templateInstanceSpec(profile: ProfileSpec, name: string, source: TemplateSource): ProfileSpec & TemplateSpecFields {
  const { image } = source;
  return {
    ...profile,
    image: image.base_image,
    packages: [],
    user: 'user',
    home: '/home/user',
    disk_mb: BUILD_MACHINE.disk_mb,
    keep_undo: false,
    // The profile's own env wins over the template's ENV, as a command's wins over both.
    env: { ...image.env, ...profile.env },
    template: { name, build_id: source.buildId, layer_id: image.layer_id, workdir: image.workdir, start_command: image.start_command, ready_check: image.ready_check },
  };
}

/** The template layer an instance of this spec starts from, if it was made from a template that has one. */
export function templateLayerOf(spec: ProfileSpec): string | undefined {
  return (spec as ProfileSpec & TemplateSpecFields).template?.layer_id ?? undefined;
}

/** The directory commands of an instance of this spec start in when they name none (its template's WORKDIR). */
export function templateWorkdirOf(spec: ProfileSpec): string | undefined {
  return (spec as ProfileSpec & TemplateSpecFields).template?.workdir ?? undefined;
}

/** Output of a start command kept for the log when it ends by itself. */
const START_OUTPUT_BYTES = 4096;

/**
 * Starts the template's start command in a new instance, as its VM user in WORKDIR with
 * the instance's environment, and resolves once its first process runs (rejects when it
 * cannot start). It runs on with no time limit; when it ends by itself, its exit code and
 * the end of its output go to the log. Nothing to do for a spec without one.
 */
export async function startTemplateCommand(runtime: Runtime, instanceId: string, spec: ProfileSpec, env: Record<string, string>, log: Logger): Promise<void> {
  const argv = (spec as ProfileSpec & TemplateSpecFields).template?.start_command;
  if (!argv || argv.length === 0) return;
  const workdir = templateWorkdirOf(spec);
  await new Promise<void>((resolve, reject) => {
    runtime
      .runCommand(instanceId, {
        commandId: randomUUID(),
        command: argv.join(' '),
        argv,
        home: spec.home,
        ...(workdir === undefined ? {} : { cwd: workdir }),
        env,
        timeoutMs: 0,
        maxOutputBytes: START_OUTPUT_BYTES,
        trackChanges: false,
        onStarted: () => resolve(),
      })
      .then(
        (outcome) => {
          log.info({ exitCode: outcome.exitCode, output: outcome.output.slice(-START_OUTPUT_BYTES) }, 'the template\'s start command ended');
          // Ended before it ever ran (the runtime did not say it started): not a start.
          reject(new Error(`the template's start command (${argv.join(' ')}) could not start: ${outcome.output.trim().slice(-500) || `exit code ${outcome.exitCode}`}`));
        },
        (err: unknown) => reject(new Error(`the template's start command (${argv.join(' ')}) could not start: ${(err as Error).message}`)),
      );
  });
  const check = (spec as ProfileSpec & TemplateSpecFields).template?.ready_check;
  if (check && check.length > 0) await waitUntilReady(runtime, instanceId, spec, env, check);
}

/** How long a start command has to pass its ready check, and how often the check runs. */
export const READY_CHECK_LIMIT_MS = 60_000;
const READY_CHECK_EVERY_MS = 200;
const READY_CHECK_TIMEOUT_MS = 10_000;

/** Runs the ready check until it exits 0; fails with its last output once the limit has passed. */
async function waitUntilReady(runtime: Runtime, instanceId: string, spec: ProfileSpec, env: Record<string, string>, argv: string[]): Promise<void> {
  const workdir = templateWorkdirOf(spec);
  const deadline = Date.now() + READY_CHECK_LIMIT_MS;
  for (;;) {
    const outcome = await runtime.runCommand(instanceId, {
      commandId: randomUUID(),
      command: argv.join(' '),
      argv,
      home: spec.home,
      ...(workdir === undefined ? {} : { cwd: workdir }),
      env,
      timeoutMs: Math.max(1000, Math.min(READY_CHECK_TIMEOUT_MS, deadline - Date.now())),
      maxOutputBytes: START_OUTPUT_BYTES,
      trackChanges: false,
    });
    if (outcome.exitCode === 0) return;
    if (Date.now() >= deadline) {
      const said = outcome.output.trim().slice(-500);
      throw new Error(`the template's start command was not ready within ${READY_CHECK_LIMIT_MS / 1000} s: its ready check (${argv.join(' ')}) exited with code ${outcome.exitCode}${said ? `: ${said}` : ''}`);
    }
    await new Promise((resolve) => setTimeout(resolve, READY_CHECK_EVERY_MS));
  }
}
