// Root filesystems for instances. A profile's image, packages and VM user resolve to a
// root filesystem built once with mmdebstrap from Debian's packages and cached under a
// key that hashes everything that went into it. Instances use it as the read-only lower
// layer of their overlay, so one copy serves every instance of the profile. An image
// named `oci:...` is built from an OCI image layout instead (oci/oci-image.ts).
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { mountsUnder, unmountAll } from '../host/mounts.ts';
import { GuestAdditionsError, guestAdditionsVersion, installGuestAdditions } from './guest-additions.ts';
import { quickenLoginProfile } from './login-profile.ts';
import { buildOciRootfs, isOciImage, type OciImage, OciImageError, resolveOciImage } from './oci/oci-image.ts';

/** Bumped whenever the way images are built changes, so old cache entries are not reused (3: login-profile.ts). */
const BUILD_FORMAT = 3;

/** What an agent's first commands expect to find, on top of Debian's minimal base. */
export const BASE_PACKAGES = [
  'bash', 'ca-certificates', 'coreutils', 'curl', 'file', 'findutils', 'git', 'grep', 'iproute2', 'jq', 'less',
  'netbase', 'procps', 'python3', 'python3-pip', 'python3-venv', 'sed', 'tini', 'unzip', 'wget', 'xz-utils', 'zip',
  // A terminal user expects an editor: vim-tiny is `vi` (Debian's smallest).
  'vim-tiny',
];

export const SUPPORTED_SUITES = ['bookworm', 'trixie'];
/** The uid and gid of the VM user in every image. */
export const VM_UID = 1000;

const BUILD_TIMEOUT_MS = 20 * 60_000;

export interface ImageRequest {
  image: string;
  packages: string[];
  user: string;
  home: string;
}

export interface ImageInfo {
  key: string;
  image: string;
  packages: string[];
  user: string;
  home: string;
  uid: number;
  built_at: string;
  build_ms: number;
  /** For an OCI image, the digest of the manifest it was built from. */
  manifest_digest?: string;
  /** The root filesystem directory. */
  rootfs: string;
}

export class ImageBuildError extends Error {}

export class ImageStore {
  /** The cache directory: one subdirectory per image, plus compiled helpers in .native. */
  readonly dir: string;
  private readonly log: Logger;
  private readonly building = new Map<string, Promise<ImageInfo>>();
  /** Process groups of the mmdebstrap runs under way. */
  private readonly groups = new Set<number>();
  /** Where `oci:<name>` images are looked up (ROOMKIT_OCI_DIR). */
  private readonly ociDir: string | undefined;
  /** OCI builds under way, which run in this process. */
  private readonly ociBuilds = new Set<AbortController>();

  constructor(options: { dir: string; log: Logger; ociDir?: string }) {
    this.dir = options.dir;
    this.log = options.log;
    this.ociDir = options.ociDir;
    mkdirSync(this.dir, { recursive: true });
  }

  /**
   * Removes what builds of a process that died left behind: its mmdebstrap process
   * group (which outlives a killed parent), the mounts mmdebstrap made inside the build
   * (proc, sys, devpts, a bind of /dev/shm), and the partial directory. Never throws:
   * what cannot be removed is logged and left for the next start.
   */
  async removeAbandonedBuilds(): Promise<void> {
    for (const name of readdirSync(this.dir)) {
      if (!name.startsWith('.build-')) continue;
      const dir = join(this.dir, name);
      let owner: { ownerPid?: number; pgid?: number } = {};
      try {
        owner = JSON.parse(readFileSync(join(dir, 'build.json'), 'utf8')) as typeof owner;
      } catch {
        // No record: the build died before mmdebstrap started.
      }
      if (owner.ownerPid !== undefined && owner.ownerPid !== process.pid && isAlive(owner.ownerPid)) continue;
      try {
        if (owner.pgid !== undefined) await stopGroup(owner.pgid);
        if (await removeBuildDir(dir, this.log)) this.log.info({ dir: name }, 'removed an abandoned image build');
      } catch (err) {
        this.log.error({ dir: name, err }, 'could not remove an abandoned image build');
      }
    }
  }

  /** Stops builds under way (their callers' ensure() rejects); used when the service stops. */
  async close(): Promise<void> {
    for (const build of this.ociBuilds) build.abort(new ImageBuildError('the image build was stopped: the service is stopping'));
    await Promise.all([...this.groups].map((pgid) => stopGroup(pgid)));
  }

  /**
   * The cache key of the root filesystem a request resolves to. `source` is what the
   * image name resolved to where the name alone does not say (an OCI manifest digest).
   */
  static keyOf(request: ImageRequest, source?: string): string {
    const canonical = JSON.stringify({
      source,
      format: BUILD_FORMAT,
      additions: guestAdditionsVersion(),
      image: request.image,
      base: BASE_PACKAGES,
      packages: [...request.packages].sort(),
      user: request.user,
      home: request.home,
      uid: VM_UID,
    });
    return createHash('sha256').update(canonical).digest('hex').slice(0, 20);
  }

  /** The cached image, built first if there is none; concurrent callers share one build. */
  async ensure(request: ImageRequest, log: Logger = this.log, onProgress: (message: string) => void = () => {}): Promise<ImageInfo> {
    const oci = isOciImage(request.image) ? await this.resolveOci(request) : undefined;
    const key = ImageStore.keyOf(request, oci?.manifestDigest);
    const cached = this.read(key);
    if (cached) return cached;
    let pending = this.building.get(key);
    if (!pending) {
      onProgress(`building image ${request.image}${request.packages.length ? ` with ${request.packages.join(', ')}` : ''}`);
      pending = this.build(key, request, log, onProgress, oci).finally(() => this.building.delete(key));
      this.building.set(key, pending);
    } else {
      log.info({ imageKey: key }, 'waiting for an image build already under way');
      onProgress(`waiting for the build of image ${request.image} under way`);
    }
    return pending;
  }

  list(): ImageInfo[] {
    if (!existsSync(this.dir)) return [];
    return readdirSync(this.dir)
      .map((key) => this.read(key))
      .filter((info): info is ImageInfo => info !== undefined);
  }

  /** Removes cached images whose key is not in `keep`, and leftovers of interrupted builds. */
  async prune(keep: ReadonlySet<string>): Promise<string[]> {
    await this.removeAbandonedBuilds();
    const removed: string[] = [];
    for (const name of readdirSync(this.dir)) {
      if (name.startsWith('.build-') || name === '.native' || keep.has(name) || this.building.has(name)) continue;
      if (await removeBuildDir(join(this.dir, name), this.log)) removed.push(name);
    }
    return removed;
  }

  /** The root filesystem of a cached image. */
  rootfsOf(key: string): string {
    return join(this.dir, key, 'rootfs');
  }

  private read(key: string): ImageInfo | undefined {
    const meta = join(this.dir, key, 'image.json');
    if (!existsSync(meta)) return undefined;
    try {
      return { ...(JSON.parse(readFileSync(meta, 'utf8')) as Omit<ImageInfo, 'rootfs'>), rootfs: join(this.dir, key, 'rootfs') };
    } catch {
      return undefined;
    }
  }

  private async resolveOci(request: ImageRequest): Promise<OciImage> {
    try {
      if (this.ociDir === undefined) throw new OciImageError(`image "${request.image}": this server has no OCI directory`);
      if (request.packages.length > 0) {
        throw new OciImageError(`image "${request.image}": packages cannot be installed into an OCI image; build them into the image`);
      }
      return await resolveOciImage(this.ociDir, request.image);
    } catch (err) {
      throw err instanceof OciImageError ? new ImageBuildError(err.message) : err;
    }
  }

  /** Applies an OCI image's layers into `<tmp>/rootfs`, in this process. */
  private async buildOci(oci: OciImage, tmp: string, request: ImageRequest, log: Logger, onProgress: (line: string) => void): Promise<void> {
    // The owner record keeps other processes sharing the cache from removing the build.
    writeFileSync(join(tmp, 'build.json'), JSON.stringify({ ownerPid: process.pid }));
    const controller = new AbortController();
    this.ociBuilds.add(controller);
    try {
      await buildOciRootfs(oci, join(tmp, 'rootfs'), { user: request.user, home: request.home, uid: VM_UID, signal: controller.signal, onProgress });
    } catch (err) {
      throw err instanceof OciImageError ? new ImageBuildError(err.message) : err;
    } finally {
      this.ociBuilds.delete(controller);
    }
    log.info({ manifestDigest: oci.manifestDigest }, 'OCI image layers applied');
  }

  private async build(key: string, request: ImageRequest, log: Logger, onProgress: (message: string) => void, oci?: OciImage): Promise<ImageInfo> {
    const suite = oci ? '' : suiteOf(request.image);
    const started = Date.now();
    const tmp = join(this.dir, `.build-${key}-${randomBytes(4).toString('hex')}`);
    mkdirSync(tmp);
    const packages = [...new Set([...BASE_PACKAGES, ...request.packages])].sort();
    log.info({ imageKey: key, image: request.image, packages: request.packages }, 'building image (minutes on a cold cache)');
    const hooks = [
      `chroot "$1" useradd --create-home --home-dir ${request.home} --uid ${VM_UID} --user-group --shell /bin/bash ${request.user}`,
      // Instances get their resolv.conf and hostname when they start.
      'rm -f "$1/etc/resolv.conf" "$1/etc/hostname"',
      // dpkg under apt runs in a pty that apt makes its controlling terminal; gVisor refuses
      // that ioctl, and apt printed "E: Setting TIOCSCTTY ... Operation not permitted" on
      // every install (which still worked). Without the pty the error is gone.
      `printf '%s\\n' 'Dpkg::Use-Pty "0";' > "$1/etc/apt/apt.conf.d/90roomkit"`,
    ];
    try {
      if (oci) {
        await this.buildOci(oci, tmp, request, log, (line) => {
          log.info({ imageKey: key, step: line }, 'image build');
          onProgress(`building image ${request.image}: ${line}`);
        });
      } else await runMmdebstrap(
        tmp,
        this.groups,
        [
          '--variant=minbase',
          '--mode=root',
          // The package lists stay, so that `sudo apt-get install` works at once (mmdebstrap
          // removes them by default; `apt-get update` refreshes them when they are old).
          '--skip=cleanup/apt/lists',
          `--include=${packages.join(',')}`,
          ...hooks.map((h) => `--customize-hook=${h}`),
          suite,
          join(tmp, 'rootfs'),
        ],
        (line) => {
          log.info({ imageKey: key, step: line }, 'image build');
          onProgress(`building image ${request.image}: ${line}`);
        },
      );
      // Debian's login shell made cheap (E2B's SDK runs every command in one); an OCI
      // image's files are its author's.
      if (!oci) quickenLoginProfile(join(tmp, 'rootfs'));
      onProgress(`building image ${request.image}: installing roomkit's guest additions`);
      await installGuestAdditions(join(tmp, 'rootfs'), this.dir).catch((err: unknown) => {
        throw err instanceof GuestAdditionsError ? new ImageBuildError(err.message) : err;
      });
      const info: Omit<ImageInfo, 'rootfs'> = {
        key,
        image: request.image,
        packages: [...request.packages].sort(),
        user: request.user,
        home: request.home,
        uid: VM_UID,
        built_at: new Date().toISOString(),
        build_ms: Date.now() - started,
        ...(oci ? { manifest_digest: oci.manifestDigest } : {}),
      };
      rmSync(join(tmp, 'build.json'), { force: true });
      writeFileSync(join(tmp, 'image.json'), `${JSON.stringify(info, null, 2)}\n`);
      // The rename is the commit: a cache entry is complete or absent.
      try {
        renameSync(tmp, join(this.dir, key));
      } catch (err) {
        // Another process (sharing this cache) finished the same image first: use theirs.
        const theirs = this.read(key);
        if (!theirs) throw err;
        rmSync(tmp, { recursive: true, force: true });
        return theirs;
      }
      log.info({ imageKey: key, buildMs: info.build_ms }, 'image built');
      return { ...info, rootfs: join(this.dir, key, 'rootfs') };
    } catch (err) {
      await removeBuildDir(tmp, log);
      throw err;
    }
  }
}

export function suiteOf(image: string): string {
  const match = /^debian:([a-z]+)$/.exec(image);
  if (!match?.[1] || !SUPPORTED_SUITES.includes(match[1])) {
    throw new ImageBuildError(
      `image "${image}" cannot be built here: this version builds ${SUPPORTED_SUITES.map((s) => `debian:${s}`).join(' and ')}`,
    );
  }
  return match[1];
}

/** Runs mmdebstrap, reporting its progress lines; rejects with its error lines. */
function runMmdebstrap(buildDir: string, groups: Set<number>, args: string[], onProgress: (line: string) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    // Its own process group, recorded, so that the whole build can be killed even after
    // this process died.
    const child = spawn('mmdebstrap', args, { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    const pgid = child.pid;
    if (pgid !== undefined) {
      groups.add(pgid);
      writeFileSync(join(buildDir, 'build.json'), JSON.stringify({ ownerPid: process.pid, pgid }));
    }
    const errors: string[] = [];
    const tail: string[] = [];
    let partial = '';
    const onData = (chunk: string) => {
      const lines = (partial + chunk).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) {
        tail.push(line);
        if (tail.length > 20) tail.shift();
        if (/^E: /.test(line)) errors.push(line.slice(3));
        else if (/^I: /.test(line)) onProgress(line.slice(3));
      }
    };
    child.stdout.setEncoding('utf8').on('data', onData);
    child.stderr.setEncoding('utf8').on('data', onData);
    const timer = setTimeout(() => void (pgid === undefined ? undefined : stopGroup(pgid)), BUILD_TIMEOUT_MS);
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(new ImageBuildError(`cannot run mmdebstrap: ${err.message} (install it: apt-get install mmdebstrap)`));
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (pgid !== undefined) groups.delete(pgid);
      if (code === 0) return resolve();
      const why = signal ? `was killed (${signal})` : `failed (exit ${code})`;
      const detail = errors.length > 0 ? errors.join('; ') : tail.filter(Boolean).slice(-5).join(' | ');
      reject(new ImageBuildError(`image build ${why}: ${detail}`));
    });
  });
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Ends a build's process group: SIGTERM first, which mmdebstrap answers by unmounting
 * what it mounted inside the build, then SIGKILL for whatever is left.
 */
async function stopGroup(pgid: number): Promise<void> {
  const signalGroup = (signal: NodeJS.Signals) => {
    try {
      process.kill(-pgid, signal);
    } catch {
      // already gone
    }
  };
  const waitGone = async (ms: number) => {
    for (const deadline = Date.now() + ms; Date.now() < deadline && groupAlive(pgid); ) {
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  if (!groupAlive(pgid)) return;
  signalGroup('SIGTERM');
  await waitGone(15_000);
  if (groupAlive(pgid)) {
    signalGroup('SIGKILL');
    await waitGone(5_000);
  }
}

/**
 * Removes a build (or image) directory, but only after unmounting what is mounted
 * inside it: a recursive delete that crossed into a leftover bind mount would delete
 * the host's files there (mmdebstrap binds /dev/shm into its builds).
 */
async function removeBuildDir(dir: string, log: Logger): Promise<boolean> {
  if (!existsSync(dir)) return true;
  await unmountAll(dir);
  const still = mountsUnder(dir);
  if (still.length > 0) {
    log.error({ dir, mounts: still }, 'not removing a build directory that still has mounts inside');
    return false;
  }
  rmSync(dir, { recursive: true, force: true });
  return true;
}
