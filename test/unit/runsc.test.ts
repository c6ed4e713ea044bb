// How the runtime calls runsc: every instance on gVisor's own network stack in its
// namespace, the same global flags on every call, the calls that start a sandbox
// with /proc/sys/net hidden, and the settings that pick runsc and its platform.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { PACKAGE_ROOT } from '../../src/config.ts';
import { PROFILE_DEFAULTS } from '../../src/core/profile-schema.ts';
import { ociSpec } from '../../src/runtimes/gvisor/bundle.ts';
import { pinnedRunscVersion, Runsc, runscAtLeast, runscBinary, runscPlatform } from '../../src/runtimes/gvisor/runsc.ts';

const runsc = new Runsc({ root: '/data/runsc', binary: '/opt/runsc', platform: 'systrap' });

test('every call runs gVisor\'s network stack with the same global flags, in the container\'s namespace', () => {
  const flags = ['--root=/data/runsc', '--network=sandbox', '--platform=systrap', '--net-disconnect-ok', '--overlay2=none'];
  for (const args of [['create', '--bundle=/b', 'id'], ['start', 'id'], ['exec', 'id', 'true'], ['state', 'id'], ['delete', '--force', 'id']]) {
    const argv = runsc.argv('rk-ab12-x', args);
    assert.deepEqual(argv.slice(0, 2), ['nsenter', '--net=/var/run/netns/rk-ab12-x']);
    const at = argv.indexOf('/opt/runsc');
    assert.deepEqual(argv.slice(at + 1, at + 1 + flags.length), flags, args.join(' '));
    assert.deepEqual(argv.slice(at + 1 + flags.length), args);
  }
  assert.deepEqual(runsc.argv(null, ['list', '--quiet']), ['/opt/runsc', ...flags, 'list', '--quiet']);
});

test('create, start and restore run where /proc/sys/net is an empty tmpfs; other calls do not', () => {
  for (const sub of ['create', 'start', 'restore']) {
    const argv = runsc.argv('rk-ab12-x', [sub, 'id']);
    assert.deepEqual(argv.slice(2, 7), ['unshare', '--mount', '--propagation', 'private', '--'], sub);
    assert.match(argv.join(' '), /mount -t tmpfs -o size=4k,mode=555 \S+ \/proc\/sys\/net && exec "\$@"/);
  }
  for (const sub of ['exec', 'state', 'delete', 'checkpoint']) {
    assert.ok(!runsc.argv('rk-ab12-x', [sub, 'id']).includes('unshare'), sub);
  }
});

test('the sandbox joins the instance\'s network namespace named in its OCI spec', () => {
  const spec = { ...PROFILE_DEFAULTS, home: '/home/user' };
  const withNetns = ociSpec({ instanceId: 'i', rootfs: '/r', hostname: 'h', spec, maxHostTasks: 4096, netnsPath: '/var/run/netns/rk-ab12-x' }) as {
    linux: { namespaces: { type: string; path?: string }[] };
  };
  assert.deepEqual(withNetns.linux.namespaces.find((n) => n.type === 'network'), { type: 'network', path: '/var/run/netns/rk-ab12-x' });
  const without = ociSpec({ instanceId: 'i', rootfs: '/r', hostname: 'h', spec, maxHostTasks: 4096 }) as typeof withNetns;
  assert.equal(without.linux.namespaces.find((n) => n.type === 'network'), undefined);
});

test('ROOMKIT_RUNSC and ROOMKIT_RUNSC_PLATFORM pick runsc and its platform', () => {
  assert.equal(runscBinary({}), 'runsc');
  assert.equal(runscBinary({ ROOMKIT_RUNSC: '/opt/gvisor/runsc' }), '/opt/gvisor/runsc');
  assert.equal(runscPlatform({}), 'systrap');
  assert.equal(runscPlatform({ ROOMKIT_RUNSC_PLATFORM: 'ptrace' }), 'ptrace');
  assert.throws(() => runscPlatform({ ROOMKIT_RUNSC_PLATFORM: 'kvm' }), /ROOMKIT_RUNSC_PLATFORM must be one of systrap, ptrace/);
});

test('the pinned version is in one file, and older runsc builds are told apart by their date', () => {
  const pinned = pinnedRunscVersion();
  assert.equal(pinned, readFileSync(join(PACKAGE_ROOT, 'packaging', 'runsc-version'), 'utf8').trim());
  assert.match(pinned, /^0\.0~\d{8}\.\d+$/);
  assert.ok(runscAtLeast(pinned, pinned));
  assert.ok(runscAtLeast('0.0~20250101.0', pinned));
  assert.ok(!runscAtLeast('0.0~20221219.0', pinned));
  assert.ok(!runscAtLeast('unknown', pinned));
});
