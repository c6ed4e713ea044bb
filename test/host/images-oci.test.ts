// OCI images as a profile's base: layouts (directories and .tar archives) in the OCI
// directory built into root filesystems on the real host, whiteouts, refusals of damaged
// layouts and of names and layers that reach outside, and one real instance from an
// `oci:` profile. The Debian test image's root filesystem, tarred once into a layer, is
// cached under .roomkit-test/oci-fixture so that later runs only hard-link it. Over
// 400 lines: the layouts it builds are shared by the reading, refusing and building tests.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  copyFileSync,
  createReadStream,
  existsSync,
  linkSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { gzipSync, zstdCompressSync } from 'node:zlib';
import { PACKAGE_ROOT } from '../../src/config.ts';
import { PROVISION_STATES } from '../../src/core/lifecycle.ts';
import { ImageBuildError, ImageStore } from '../../src/images/builder.ts';
import { resolveOciImage } from '../../src/images/oci/oci-image.ts';
import { createLogger } from '../../src/log.ts';
import { networkNames } from '../../src/network/netns.ts';
import type { GvisorRuntime } from '../../src/runtimes/gvisor/gvisor-runtime.ts';
import { startTestApp, TEST_IMAGES_DIR, type TestApp } from '../support/app.ts';
import { hostObjects, NOTHING } from '../support/host.ts';

const log = createLogger('silent');
/** Bumped when the fixture layout changes, so a cached one is not reused. */
const FIXTURE_FORMAT = 1;
const FIXTURE_ROOT = join(PACKAGE_ROOT, '.roomkit-test', 'oci-fixture');
const ARCH = process.arch === 'arm64' ? 'arm64' : 'amd64';
const USER = { packages: [] as string[], user: 'user', home: '/home/user' };
const MTIME = 1_700_000_000;

// ---------------------------------------------------------------------------------------
// Writing tar archives and OCI layouts.

interface TarSpec {
  name: string;
  type?: 'file' | 'dir' | 'symlink' | 'hardlink';
  data?: string;
  mode?: number;
  uid?: number;
  gid?: number;
  linkname?: string;
}

function tar(entries: TarSpec[]): Buffer {
  const blocks: Buffer[] = [];
  const octal = (n: number, width: number) => `${n.toString(8).padStart(width - 1, '0')}\0`;
  for (const e of entries) {
    const type = e.type ?? 'file';
    const data = type === 'file' ? Buffer.from(e.data ?? '') : Buffer.alloc(0);
    const h = Buffer.alloc(512);
    h.write(e.name, 0, 100, 'utf8');
    h.write(octal(e.mode ?? (type === 'dir' ? 0o755 : 0o644), 8), 100, 'latin1');
    h.write(octal(e.uid ?? 0, 8), 108, 'latin1');
    h.write(octal(e.gid ?? 0, 8), 116, 'latin1');
    h.write(octal(data.length, 12), 124, 'latin1');
    h.write(octal(MTIME, 12), 136, 'latin1');
    h.write('        ', 148, 'latin1');
    h.write({ file: '0', dir: '5', symlink: '2', hardlink: '1' }[type], 156, 'latin1');
    h.write(e.linkname ?? '', 157, 100, 'utf8');
    h.write('ustar\u000000', 257, 'latin1');
    let sum = 0;
    for (const b of h) sum += b;
    h.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'latin1');
    blocks.push(h, data, Buffer.alloc((512 - (data.length % 512)) % 512));
  }
  blocks.push(Buffer.alloc(1024));
  return Buffer.concat(blocks);
}

const sha256 = (data: Buffer) => `sha256:${createHash('sha256').update(data).digest('hex')}`;

async function sha256File(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return `sha256:${hash.digest('hex')}`;
}

/** A layer: its blob's bytes (or a file, hard-linked in), and the digest of its tar. */
interface Layer {
  blob: Buffer | { file: string; digest: string; size: number };
  diffId: string;
  mediaType: string;
}

const plainLayer = (t: Buffer): Layer => ({ blob: t, diffId: sha256(t), mediaType: 'application/vnd.oci.image.layer.v1.tar' });
const gzipLayer = (t: Buffer): Layer => ({ blob: gzipSync(t), diffId: sha256(t), mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip' });
const zstdLayer = (t: Buffer): Layer => ({ blob: zstdCompressSync(t), diffId: sha256(t), mediaType: 'application/vnd.oci.image.layer.v1.tar+zstd' });

function putBlob(root: string, data: Buffer): { digest: string; size: number } {
  const digest = sha256(data);
  writeFileSync(join(root, 'blobs', 'sha256', digest.slice(7)), data);
  return { digest, size: data.length };
}

/** Writes an OCI image layout of `images` (one manifest each, tagged) into `root`. */
function writeLayout(root: string, images: { tag?: string; layers: Layer[] }[]): string[] {
  mkdirSync(join(root, 'blobs', 'sha256'), { recursive: true });
  writeFileSync(join(root, 'oci-layout'), '{"imageLayoutVersion":"1.0.0"}');
  const manifests = images.map(({ tag, layers }) => {
    const descriptors = layers.map((layer) => {
      if (Buffer.isBuffer(layer.blob)) return { mediaType: layer.mediaType, ...putBlob(root, layer.blob) };
      const target = join(root, 'blobs', 'sha256', layer.blob.digest.slice(7));
      if (!existsSync(target)) linkOrCopy(layer.blob.file, target);
      return { mediaType: layer.mediaType, digest: layer.blob.digest, size: layer.blob.size };
    });
    const config = putBlob(root, Buffer.from(JSON.stringify({ architecture: ARCH, os: 'linux', rootfs: { type: 'layers', diff_ids: layers.map((l) => l.diffId) } })));
    const manifest = putBlob(
      root,
      Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: 'application/vnd.oci.image.manifest.v1+json', config: { mediaType: 'application/vnd.oci.image.config.v1+json', ...config }, layers: descriptors })),
    );
    return {
      mediaType: 'application/vnd.oci.image.manifest.v1+json',
      ...manifest,
      ...(tag ? { annotations: { 'org.opencontainers.image.ref.name': tag } } : {}),
    };
  });
  writeFileSync(join(root, 'index.json'), JSON.stringify({ schemaVersion: 2, manifests }));
  return manifests.map((m) => m.digest);
}

function linkOrCopy(from: string, to: string): void {
  try {
    linkSync(from, to);
  } catch {
    copyFileSync(from, to);
  }
}

/** Recreates a layout's directories and hard-links its files, so the cached one is never written to. */
function linkTree(from: string, to: string): void {
  mkdirSync(to, { recursive: true });
  for (const name of readdirSync(from)) {
    if (lstatSync(join(from, name)).isDirectory()) linkTree(join(from, name), join(to, name));
    else linkOrCopy(join(from, name), join(to, name));
  }
}

// ---------------------------------------------------------------------------------------
// The fixture: the Debian test image as a base layer, and a second layer over it.

/** What the second layer does: whiteouts, an opaque directory, owners, modes and links. */
const SECOND_LAYER = tar([
  { name: 'usr/bin/.wh.wget' },
  { name: 'usr/share/doc/.wh.wget' },
  { name: 'etc/apt/', type: 'dir' },
  { name: 'etc/apt/.wh..wh..opq' },
  { name: 'etc/apt/sources.list', data: 'deb http://example.invalid/ opaque main\n' },
  { name: 'etc/apt/apt.conf.d/', type: 'dir' },
  { name: 'etc/apt/apt.conf.d/99probe', data: 'Probe "1";\n' },
  { name: 'opt/probe/', type: 'dir' },
  { name: 'opt/probe/hello', data: 'hello from layer 2\n', mode: 0o4755, uid: 1234, gid: 2345 },
  { name: 'opt/probe/link', type: 'symlink', linkname: '/etc/os-release' },
  { name: 'opt/probe/hello2', type: 'hardlink', linkname: 'opt/probe/hello' },
]);

interface Fixture {
  /** The layout directory (tags `v1`: base + second layer, `base`: base only). */
  layout: string;
  /** The same layout as a .tar. */
  archive: string;
  /** The Debian root filesystem the base layer was made of. */
  baseRootfs: string;
}

async function fixture(): Promise<Fixture> {
  const base = await new ImageStore({ dir: TEST_IMAGES_DIR, log }).ensure({ image: 'debian:bookworm', ...USER });
  const dir = join(FIXTURE_ROOT, `v${FIXTURE_FORMAT}-${base.key}`);
  const result = { layout: join(dir, 'layout'), archive: join(dir, 'layout.tar'), baseRootfs: base.rootfs };
  if (existsSync(join(dir, 'done'))) return result;
  mkdirSync(FIXTURE_ROOT, { recursive: true });
  // Fixtures of older images are not needed any more.
  for (const old of readdirSync(FIXTURE_ROOT)) rmSync(join(FIXTURE_ROOT, old), { recursive: true, force: true });
  const tmp = `${dir}.tmp-${process.pid}`;
  mkdirSync(tmp, { recursive: true });
  const baseTar = join(tmp, 'base.tar');
  execFileSync('tar', ['--create', '--numeric-owner', '--sort=name', `--file=${baseTar}`, '-C', base.rootfs, '.']);
  const digest = await sha256File(baseTar);
  const baseLayer: Layer = { blob: { file: baseTar, digest, size: statSync(baseTar).size }, diffId: digest, mediaType: 'application/vnd.oci.image.layer.v1.tar' };
  writeLayout(join(tmp, 'layout'), [
    { tag: 'v1', layers: [baseLayer, gzipLayer(SECOND_LAYER)] },
    { tag: 'base', layers: [baseLayer] },
  ]);
  rmSync(baseTar);
  execFileSync('tar', ['--create', '--sort=name', `--file=${join(tmp, 'layout.tar')}`, '-C', join(tmp, 'layout'), '.']);
  writeFileSync(join(tmp, 'done'), '');
  renameSync(tmp, dir);
  return result;
}

/** The checks every image built from the `v1` fixture must pass. */
function assertFixtureImage(rootfs: string, baseRootfs: string): void {
  // Whiteouts: a file and a directory of the base layer are gone.
  assert.ok(existsSync(join(baseRootfs, 'usr/bin/wget')) && !existsSync(join(rootfs, 'usr/bin/wget')), 'usr/bin/wget whited out');
  assert.ok(!existsSync(join(rootfs, 'usr/share/doc/wget')), 'usr/share/doc/wget whited out');
  assert.ok(existsSync(join(rootfs, 'usr/bin/curl')), 'neighbours of a whiteout stay');
  // Opaque: /etc/apt holds only what the second layer put there, in all its depth.
  assert.ok(readdirSync(join(baseRootfs, 'etc/apt')).length > 2);
  assert.deepEqual(readdirSync(join(rootfs, 'etc/apt')).sort(), ['apt.conf.d', 'sources.list']);
  assert.deepEqual(readdirSync(join(rootfs, 'etc/apt/apt.conf.d')), ['99probe']);
  // Owners, modes (setuid survives the chown), links.
  const hello = statSync(join(rootfs, 'opt/probe/hello'));
  assert.equal(hello.uid, 1234);
  assert.equal(hello.gid, 2345);
  assert.equal(hello.mode & 0o7777, 0o4755);
  assert.equal(hello.mtimeMs, MTIME * 1000);
  assert.equal(statSync(join(rootfs, 'opt/probe/hello2')).ino, hello.ino);
  assert.equal(lstatSync(join(rootfs, 'opt/probe/link')).isSymbolicLink(), true);
  // The base layer arrived whole: the same entries with the same owners and modes.
  for (const path of ['usr/bin/bash', 'usr/bin/tini', 'etc/shadow', 'usr/bin/passwd', 'dev/null', 'bin', 'tmp', 'root']) {
    const a = lstatSync(join(baseRootfs, path));
    const b = lstatSync(join(rootfs, path));
    assert.deepEqual([b.mode, b.uid, b.gid, b.size, b.rdev], [a.mode, a.uid, a.gid, a.size, a.rdev], path);
  }
  // The VM user, exactly once, and what instances are given at start is not baked in.
  const passwd = readFileSync(join(rootfs, 'etc/passwd'), 'utf8');
  assert.deepEqual(passwd.split('\n').filter((l) => l.startsWith('user:')), ['user:x:1000:1000::/home/user:/bin/bash']);
  assert.equal(passwd.split('\n').filter((l) => l.split(':')[2] === '1000').length, 1);
  assert.match(readFileSync(join(rootfs, 'etc/group'), 'utf8'), /^user:x:1000:$/m);
  assert.equal(statSync(join(rootfs, 'home/user')).uid, 1000);
  assert.ok(!existsSync(join(rootfs, 'etc/resolv.conf')) && !existsSync(join(rootfs, 'etc/hostname')));
}

// ---------------------------------------------------------------------------------------

let fx: Fixture;
let scratch: string;
let ociDir: string;
/** An image store of this run only, so that builds are really made. */
let store: ImageStore;

before(async () => {
  fx = await fixture();
  scratch = mkdtempSync(join(tmpdir(), 'roomkit-oci-'));
  ociDir = join(scratch, 'oci');
  mkdirSync(ociDir);
  linkTree(fx.layout, join(ociDir, 'debian-test'));
  linkOrCopy(fx.archive, join(ociDir, 'debian-archive.tar'));
  store = new ImageStore({ dir: join(scratch, 'images'), ociDir, log });
});

after(async () => {
  await store.close();
  rmSync(scratch, { recursive: true, force: true });
});

/** No partial build directory may be left behind by a failed build. */
function assertNoBuildLeft(dir = join(scratch, 'images')): void {
  assert.deepEqual(readdirSync(dir).filter((n) => n.startsWith('.build-')), []);
}

describe('building an OCI image', () => {
  it('from a layout directory: layers in order, whiteouts and opaque directories, owners kept, the VM user added', async () => {
    const progress: string[] = [];
    const image = await store.ensure({ image: 'oci:debian-test:v1', ...USER }, log, (line) => progress.push(line));
    assertFixtureImage(image.rootfs, fx.baseRootfs);
    const manifest = (await resolveOciImage(ociDir, 'oci:debian-test:v1')).manifestDigest;
    assert.equal(image.manifest_digest, manifest);
    assert.equal(image.key, ImageStore.keyOf({ image: 'oci:debian-test:v1', ...USER }, manifest));
    for (const step of ['verifying layer 1/2', 'applying layer 1/2', 'applying layer 2/2', 'adding the VM user']) {
      assert.ok(progress.some((line) => line.includes(step)), `progress "${step}" in ${JSON.stringify(progress)}`);
    }
    // Cached: the same request is answered without a build.
    const started = Date.now();
    assert.equal((await store.ensure({ image: 'oci:debian-test:v1', ...USER })).key, image.key);
    assert.ok(Date.now() - started < 1000);
  });

  it('from a .tar of the layout, into the shared test cache the instance test below uses', async () => {
    const tests = new ImageStore({ dir: TEST_IMAGES_DIR, ociDir, log });
    const request = { image: 'oci:debian-archive:v1', ...USER };
    const key = ImageStore.keyOf(request, (await resolveOciImage(ociDir, request.image)).manifestDigest);
    // Built anew on every run, so that the archive path is really exercised.
    rmSync(join(TEST_IMAGES_DIR, key), { recursive: true, force: true });
    const image = await tests.ensure(request);
    assert.equal(image.key, key);
    assertFixtureImage(image.rootfs, fx.baseRootfs);
  });

  it('picks the image by tag, and keys the cache by the manifest digest', async () => {
    const v1 = await resolveOciImage(ociDir, 'oci:debian-test:v1');
    const base = await resolveOciImage(ociDir, 'oci:debian-test:base');
    assert.equal(v1.layers.length, 2);
    assert.equal(base.layers.length, 1);
    assert.notEqual(v1.manifestDigest, base.manifestDigest);
    // The same name with a changed layout behind it is another image.
    const request = { image: 'oci:debian-test', ...USER };
    assert.notEqual(ImageStore.keyOf(request, v1.manifestDigest), ImageStore.keyOf(request, base.manifestDigest));
    // A Debian image's key does not depend on any of this.
    assert.equal(ImageStore.keyOf({ image: 'debian:bookworm', ...USER }), ImageStore.keyOf({ image: 'debian:bookworm', ...USER }, undefined));
  });

  it('fails clearly on an unknown tag, an ambiguous name, a missing layout, and packages', async () => {
    await assert.rejects(store.ensure({ image: 'oci:debian-test:v9', ...USER }), (err: Error) => {
      assert.ok(err instanceof ImageBuildError);
      assert.match(err.message, /no image tagged "v9"; its tags are v1, base/);
      return true;
    });
    await assert.rejects(store.ensure({ image: 'oci:debian-test', ...USER }), /holds 2 images; name one with its tag: oci:debian-test:v1, oci:debian-test:base/);
    await assert.rejects(store.ensure({ image: 'oci:nothing-here', ...USER }), (err: Error) => {
      assert.ok(err instanceof ImageBuildError);
      assert.match(err.message, /no OCI image layout named "nothing-here"/);
      return true;
    });
    await assert.rejects(store.ensure({ image: 'oci:debian-test:v1', ...USER, packages: ['jq'] }), /packages cannot be installed into an OCI image/);
    assertNoBuildLeft();
  });
});

/** Files every small test image needs to pass the checks after its layers. */
const MINIMAL = [
  { name: 'bin/', type: 'dir' as const },
  { name: 'bin/sh', data: '#!fake shell\n', mode: 0o755 },
  { name: 'usr/bin/', type: 'dir' as const },
  { name: 'usr/bin/tini', data: 'fake tini\n', mode: 0o755 },
  { name: 'etc/', type: 'dir' as const },
  { name: 'etc/passwd', data: 'root:x:0:0:root:/root:/bin/sh\nubuntu:x:1000:1000::/home/ubuntu:/bin/sh\n' },
];

let layoutCount = 0;
function smallLayout(layers: Layer[]): string {
  const name = `small-${++layoutCount}`;
  writeLayout(join(ociDir, name), [{ layers }]);
  return `oci:${name}`;
}

describe('a damaged layout', () => {
  it('is refused when a layer does not match its digest, before anything is applied', async () => {
    const image = smallLayout([gzipLayer(tar(MINIMAL))]);
    const { layers } = await resolveOciImage(ociDir, image);
    const blob = join(ociDir, image.slice(4), 'blobs', 'sha256', (layers[0]?.digest ?? '').slice(7));
    const data = readFileSync(blob);
    data[data.length - 5] = (data[data.length - 5] ?? 0) ^ 0xff;
    writeFileSync(blob, data);
    await assert.rejects(store.ensure({ image, ...USER }), (err: Error) => {
      assert.ok(err instanceof ImageBuildError);
      assert.match(err.message, /does not match its digest .*the layout is damaged/);
      return true;
    });
    assertNoBuildLeft();
  });

  it('is refused when the manifest does not match its digest', async () => {
    const image = smallLayout([plainLayer(tar(MINIMAL))]);
    const index = JSON.parse(readFileSync(join(ociDir, image.slice(4), 'index.json'), 'utf8'));
    const manifest = join(ociDir, image.slice(4), 'blobs', 'sha256', index.manifests[0].digest.slice(7));
    writeFileSync(manifest, readFileSync(manifest, 'utf8').replace('"schemaVersion":2', '"schemaVersion":3'));
    await assert.rejects(store.ensure({ image, ...USER }), /manifest|does not match its digest/);
  });

  it('is refused when a layer unpacks to something else than the config says', async () => {
    const good = gzipLayer(tar(MINIMAL));
    const image = smallLayout([{ ...good, diffId: sha256(Buffer.from('something else')) }]);
    await assert.rejects(store.ensure({ image, ...USER }), /unpacks to sha256:.* but the image config says/);
    assertNoBuildLeft();
  });
});

describe('names and layers that reach outside', () => {
  let outside: string;
  before(() => {
    outside = join(scratch, 'outside');
    mkdirSync(outside);
  });

  it('refuses names that are not one entry of the OCI directory', async () => {
    // A layout outside the directory, reachable by a path or a link.
    writeLayout(join(scratch, 'elsewhere'), [{ layers: [plainLayer(tar(MINIMAL))] }]);
    symlinkSync(join(scratch, 'elsewhere'), join(ociDir, 'linked'));
    for (const image of ['oci:../elsewhere', 'oci:..', 'oci:a/b', 'oci:/etc', 'oci:./debian-test', 'oci:debian-test/..']) {
      await assert.rejects(store.ensure({ image, ...USER }), (err: Error) => {
        assert.ok(err instanceof ImageBuildError, image);
        assert.match(err.message, /directly inside the server's OCI directory .*no '\/' or '\.\.'/, image);
        return true;
      });
    }
    await assert.rejects(store.ensure({ image: 'oci:linked', ...USER }), /"linked" in the OCI directory is a symbolic link/);
    assertNoBuildLeft();
  });

  /** `error` absent: the build succeeds, with nothing done outside. */
  const attacks: { name: string; layers: TarSpec[][]; error?: RegExp }[] = [
    {
      name: 'a link, then a write through it in the same layer',
      layers: [[...MINIMAL, { name: 'a', type: 'symlink', linkname: '@OUTSIDE@' }, { name: 'a/pwned', data: 'x' }]],
      error: /entry "a\/pwned" is below \/a, which is a symbolic link; refused/,
    },
    {
      name: 'a link in one layer, a write through it in the next',
      layers: [[...MINIMAL, { name: 'a', type: 'symlink', linkname: '@OUTSIDE@' }], [{ name: 'a/pwned', data: 'x' }]],
      error: /layer 2\/2: entry "a\/pwned" is below \/a, which is a symbolic link; refused/,
    },
    {
      name: 'a relative link up and out, then a write through it',
      layers: [[...MINIMAL, { name: 'up', type: 'symlink', linkname: '../../../../../../../../..' }, { name: 'up/pwned', data: 'x' }]],
      error: /below \/up, which is a symbolic link; refused/,
    },
    {
      name: 'a ../ entry',
      layers: [[...MINIMAL, { name: '../../../pwned', data: 'x' }]],
      error: /entry "..\/..\/..\/pwned" has a ".." component; refused/,
    },
    {
      name: 'a .. inside an entry',
      layers: [[...MINIMAL, { name: 'bin/../../pwned', data: 'x' }]],
      error: /has a ".." component; refused/,
    },
    {
      name: 'a whiteout of the parent directory',
      layers: [[...MINIMAL], [{ name: '.wh...' }]],
      error: /whiteout ".wh..." names no entry; refused/,
    },
    {
      name: 'a whiteout of the directory itself',
      layers: [[...MINIMAL], [{ name: 'etc/.wh..' }]],
      error: /whiteout "etc\/.wh.." names no entry; refused/,
    },
    {
      name: 'a hard link to a file outside',
      layers: [[...MINIMAL, { name: 'h', type: 'hardlink', linkname: '../../../../etc/passwd' }]],
      error: /has a ".." component; refused/,
    },
    {
      name: 'a whiteout through a link',
      layers: [[...MINIMAL, { name: 'a', type: 'symlink', linkname: '@OUTSIDE@' }], [{ name: 'a/.wh.victim' }, { name: 'a/.wh..wh..opq' }]],
    },
    {
      name: 'an image whose /etc is a link to the host\'s',
      layers: [[...MINIMAL.filter((e) => !e.name.startsWith('etc')), { name: 'etc', type: 'symlink', linkname: '@OUTSIDE@' }]],
      error: /the image's \/etc is not a plain directory/,
    },
  ];

  for (const attack of attacks) {
    it(`contains ${attack.name}`, async () => {
      writeFileSync(join(outside, 'victim'), 'untouched');
      const hostPasswd = readFileSync('/etc/passwd');
      const layers = attack.layers.map((entries) =>
        gzipLayer(tar(entries.map((e) => (e.linkname === '@OUTSIDE@' ? { ...e, linkname: outside } : e)))),
      );
      const image = smallLayout(layers);
      const built = store.ensure({ image, ...USER });
      const error = attack.error;
      if (error) {
        await assert.rejects(built, (err: Error) => {
          assert.ok(err instanceof ImageBuildError, String(err));
          assert.match(err.message, error);
          return true;
        });
      } else {
        // Whiteouts below a link hide nothing (there is nothing of the image there).
        const info = await built;
        assert.equal(lstatSync(join(info.rootfs, 'a')).isSymbolicLink(), true);
      }
      assert.deepEqual(readdirSync(outside), ['victim']);
      assert.equal(readFileSync(join(outside, 'victim'), 'utf8'), 'untouched');
      assert.ok(!existsSync(join(scratch, 'pwned')) && !existsSync(join(scratch, 'images', 'pwned')) && !existsSync('/pwned'));
      assert.deepEqual(readFileSync('/etc/passwd'), hostPasswd);
      assertNoBuildLeft();
    });
  }

  it('keeps absolute entry names inside the root, and makes /tmp a real directory (a zstd layer)', async () => {
    const image = smallLayout([
      zstdLayer(tar([...MINIMAL, { name: '/abs-file', data: 'inside' }, { name: 'tmp', type: 'symlink', linkname: outside }])),
    ]);
    const info = await store.ensure({ image, ...USER });
    assert.equal(readFileSync(join(info.rootfs, 'abs-file'), 'utf8'), 'inside');
    const tmp = lstatSync(join(info.rootfs, 'tmp'));
    assert.ok(tmp.isDirectory());
    assert.equal(tmp.mode & 0o7777, 0o1777);
    // The image's own user with uid 1000 gives way to the VM user.
    const passwd = readFileSync(join(info.rootfs, 'etc/passwd'), 'utf8');
    assert.equal(passwd, 'root:x:0:0:root:/root:/bin/sh\nuser:!:1000:1000::/home/user:/bin/sh\n');
    assert.deepEqual(readdirSync(outside).filter((n) => n !== 'victim'), []);
  });

  it('needs tini in the image, or the host\'s static tini', async () => {
    const image = smallLayout([gzipLayer(tar(MINIMAL.filter((e) => !e.name.includes('tini'))))]);
    const built = store.ensure({ image, ...USER });
    if (existsSync('/usr/bin/tini-static')) {
      const info = await built;
      assert.deepEqual(readFileSync(join(info.rootfs, 'usr/bin/tini')), readFileSync('/usr/bin/tini-static'));
    } else {
      await assert.rejects(built, /has no \/usr\/bin\/tini, which every instance runs as its init: add tini to the image, or install tini on this host/);
    }
    assertNoBuildLeft();
  });
});

describe('an instance from an oci: profile', () => {
  let t: TestApp;
  let runtime: GvisorRuntime;

  before(async () => {
    t = await startTestApp({ gvisorPool: '10.219.0.0/24' });
    runtime = t.gvisor();
    // The server's OCI directory is <data-dir>/oci by default.
    mkdirSync(join(t.dataDir, 'oci'));
    linkOrCopy(fx.archive, join(t.dataDir, 'oci', 'debian-archive.tar'));
  });

  after(async () => {
    const dataDir = t.dataDir;
    try {
      await t.services.close();
      const left = await hostObjects(dataDir);
      assert.deepEqual({ ...left, egressRules: [] }, NOTHING);
    } finally {
      await t.close();
    }
  });

  it('refuses OCI names with a path, and packages, when the profile is made', async () => {
    const org = await t.newOrg();
    for (const image of ['oci:../etc', 'oci:a/b']) {
      const res = await t.app.inject({ method: 'POST', url: '/api/profiles', headers: org.headers, payload: { name: 'bad', image } });
      assert.equal(res.statusCode, 400, res.body);
      assert.equal(res.json().error, 'validation_error');
      assert.match(res.json().message, /directly inside the server's OCI directory/);
    }
    const res = await t.app.inject({ method: 'POST', url: '/api/profiles', headers: org.headers, payload: { name: 'bad', image: 'oci:x', packages: ['jq'] } });
    assert.equal(res.statusCode, 400, res.body);
    assert.match(res.json().message, /packages cannot be installed into an OCI image/);
  });

  it('runs commands as the VM user on the image, and leaves nothing when deleted', async () => {
    const org = await t.newOrg();
    const room = `/api/profile/${await t.createProfile(org, { name: 'oci', image: 'oci:debian-archive:v1', memory_mb: 512, disk_mb: 256, network: { egress: 'none' } })}/room/oci-1`;
    const created = await t.app.inject({ method: 'POST', url: room, headers: org.headers });
    assert.equal(created.statusCode, 201, created.body);
    const instance = created.json();
    assert.equal(instance.state, 'ready', created.body);
    assert.deepEqual(instance.state_history.map((s: { state: string }) => s.state), PROVISION_STATES);
    const id: string = instance.instance_id;

    const res = await runtime.exec(
      id,
      ['sh', '-c', 'id -un; id -u; pwd; cat /opt/probe/hello; command -v wget || echo no-wget; ls /etc/apt; echo hi > /tmp/x && cat /tmp/x'],
      { as: 'vm', home: '/home/user', timeoutMs: 60_000 },
    );
    assert.equal(res.code, 0, res.stderr);
    assert.equal(res.stdout, 'user\n1000\n/home/user\nhello from layer 2\nno-wget\napt.conf.d\nsources.list\nhi\n');

    const deleted = await t.app.inject({ method: 'DELETE', url: room, headers: org.headers });
    assert.equal(deleted.statusCode, 200, deleted.body);
    assert.equal(deleted.json().state, 'stopped');
    await runtime.releasesSettled();
    const left = await hostObjects(t.dataDir, [id]);
    assert.ok(!left.containers.includes(id), 'sandbox left');
    assert.ok(!left.netns.includes(networkNames(runtime.tag, id).netns), 'namespace left');
    assert.ok(!left.mounts.some((m) => m.includes(id)), 'mount left');
    assert.deepEqual(left.cgroups, [], 'cgroups left');
    assert.ok(!existsSync(join(t.dataDir, 'instances', id)), 'instance directory left');
  });
});
