// Small C programs roomkit compiles on the host the first time it needs them: the
// layer walker and the change watcher (host side) and the guest's compatibility library. Each build is cached
// under a directory named after its source's hash, so a changed source builds anew
// and concurrent servers sharing the cache never see a half-written binary.
import { createHash, randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { run } from './run.ts';

export class NativeBuildError extends Error {}

/** A short hash of a source file's content (and of the files it includes): the version of what it compiles to. */
export function sourceVersion(source: string, includes: string[] = []): string {
  const hash = createHash('sha256');
  for (const file of [source, ...includes]) hash.update(readFileSync(file));
  return hash.digest('hex').slice(0, 12);
}

/**
 * The compiled `source` under `cacheDir`, compiling it first if needed. `flags` are the
 * compiler's (e.g. `-shared -fPIC` for a library); `name` is the output's file name;
 * `includes` are the files `source` includes, which are part of its version.
 */
export function compiled(source: string, name: string, cacheDir: string, flags: string[] = [], includes: string[] = []): Promise<string> {
  const out = join(cacheDir, '.native', sourceVersion(source, includes), name);
  if (existsSync(out)) return Promise.resolve(out);
  // Callers in one process that ask at once share one build.
  let build = building.get(out);
  if (!build) {
    build = compile(source, name, out, flags).finally(() => building.delete(out));
    building.set(out, build);
  }
  return build;
}

/** A short hash of every file of a Go package directory but its tests: the version of what it builds to. */
export function packageVersion(dir: string): string {
  const hash = createHash('sha256');
  // Go's tests are not part of what it builds: changing them changes no program, and no image.
  for (const name of readdirSync(dir).sort()) {
    if (!name.endsWith('_test.go')) hash.update(name).update('\0').update(readFileSync(join(dir, name))).update('\0');
  }
  return hash.digest('hex').slice(0, 12);
}

/**
 * The static program built from the Go package in `dir` (standard library only, no
 * module downloads), under `cacheDir`, building it first if needed.
 */
export function compiledGo(dir: string, name: string, cacheDir: string): Promise<string> {
  const out = join(cacheDir, '.native', packageVersion(dir), name);
  if (existsSync(out)) return Promise.resolve(out);
  let build = building.get(out);
  if (!build) {
    build = buildGo(dir, name, out, join(cacheDir, '.native', 'go-cache')).finally(() => building.delete(out));
    building.set(out, build);
  }
  return build;
}

async function buildGo(dir: string, name: string, out: string, goCache: string): Promise<string> {
  mkdirSync(dirname(out), { recursive: true });
  const tmp = `${out}.${process.pid}.${randomUUID()}.tmp`;
  const env = { ...process.env, CGO_ENABLED: '0', GOCACHE: goCache, GOFLAGS: '-mod=mod', GOPROXY: 'off', GOTOOLCHAIN: 'local' };
  const result = await run('go', ['build', '-trimpath', '-ldflags=-s -w', '-o', tmp, '.'], { timeoutMs: 300_000, cwd: dir, env }).catch((err: Error) => ({
    code: -1,
    stderr: err.message,
  }));
  if (result.code !== 0) {
    rmSync(tmp, { force: true });
    throw new NativeBuildError(`cannot build ${name} (${result.stderr.trim() || 'go build failed'}); install Go: apt-get install golang-go`);
  }
  renameSync(tmp, out);
  return out;
}

/** Builds under way in this process, by output path. */
const building = new Map<string, Promise<string>>();

async function compile(source: string, name: string, out: string, flags: string[]): Promise<string> {
  mkdirSync(dirname(out), { recursive: true });
  // Unique per build, so builds in other processes never rename each other's file.
  const tmp = `${out}.${process.pid}.${randomUUID()}.tmp`;
  const result = await run('cc', [...flags, '-O2', '-Wall', '-o', tmp, source], { timeoutMs: 120_000 }).catch((err: Error) => ({
    code: -1,
    stderr: err.message,
  }));
  if (result.code !== 0) {
    rmSync(tmp, { force: true });
    throw new NativeBuildError(
      `cannot compile ${name} (${result.stderr.trim() || 'cc failed'}); install a C compiler: apt-get install gcc libc6-dev`,
    );
  }
  renameSync(tmp, out);
  return out;
}
