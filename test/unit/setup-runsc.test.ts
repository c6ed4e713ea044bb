// scripts/setup-runsc's apt source and preferences: trixie on the mirror the machine's
// own Debian sources use (deb822 or one-line), never a security archive, and a pin that
// lets runsc alone come from trixie, at the version in packaging/runsc-version.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { PACKAGE_ROOT } from '../../src/config.ts';
import { pinnedRunscVersion } from '../../src/runtimes/gvisor/runsc.ts';

const SCRIPT = join(PACKAGE_ROOT, 'scripts', 'setup-runsc');

function printed(files: Record<string, string>): { code: number | null; stdout: string; stderr: string } {
  const dir = mkdtempSync(join(tmpdir(), 'roomkit-apt-'));
  try {
    mkdirSync(join(dir, 'sources.list.d'));
    for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
    const result = spawnSync(SCRIPT, ['--print', dir], { encoding: 'utf8', env: { PATH: process.env.PATH ?? '' } });
    return { code: result.status, stdout: result.stdout, stderr: result.stderr };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The apt stanzas of a printed file, comments left out, as field maps. */
function stanzas(text: string): Record<string, string>[] {
  return text
    .split(/\n\s*\n/)
    .map((block) => Object.fromEntries(block.split('\n').filter((l) => l && !l.startsWith('#')).map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 1).trim()])))
    .filter((s) => Object.keys(s).length > 0);
}

test('from deb822 sources: trixie on the main archive\'s mirror, the security archive passed over', () => {
  const out = printed({
    'sources.list.d/debian.sources': [
      'Types: deb',
      'URIs: http://security.mirror.invalid/debian-security',
      'Suites: bookworm-security',
      'Components: main',
      '',
      'Types: deb',
      '# a comment inside a stanza',
      'URIs: http://mirror.invalid/debian http://other.invalid/debian',
      'Suites: bookworm bookworm-updates',
      'Components: main',
      'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg',
      '',
    ].join('\n'),
  });
  assert.equal(out.code, 0, out.stderr);
  const [source, runsc, all] = stanzas(out.stdout);
  assert.deepEqual(source, {
    Types: 'deb',
    URIs: 'http://mirror.invalid/debian',
    Suites: 'trixie',
    Components: 'main',
    'Signed-By': '/usr/share/keyrings/debian-archive-keyring.gpg',
  });
  assert.deepEqual(runsc, { Package: 'runsc', Pin: `version ${pinnedRunscVersion()}*`, 'Pin-Priority': '990' });
  assert.deepEqual(all, { Package: '*', Pin: 'release n=trixie', 'Pin-Priority': '1' });
});

test('from a one-line sources.list, options in brackets skipped', () => {
  const out = printed({
    'sources.list': [
      '# deb http://commented.invalid/debian bookworm main',
      'deb http://security.mirror.invalid/debian-security bookworm-security main',
      'deb [arch=amd64 signed-by=/etc/apt/keyrings/debian.gpg] https://mirror.invalid/debian/ bookworm main contrib',
      '',
    ].join('\n'),
  });
  assert.equal(out.code, 0, out.stderr);
  assert.equal(stanzas(out.stdout)[0]?.URIs, 'https://mirror.invalid/debian/');
});

test('no Debian archive among the sources: an error that says so, nothing printed', () => {
  const out = printed({ 'sources.list': 'deb http://security.mirror.invalid/debian-security bookworm-security main\n' });
  assert.equal(out.code, 1);
  assert.equal(out.stdout, '');
  assert.match(out.stderr, /setup: error: no Debian archive in .*'s sources/);
});

test('scripts/setup installs runsc through setup-runsc as root, never from the machine\'s own suite', () => {
  const setup = readFileSync(join(PACKAGE_ROOT, 'scripts', 'setup'), 'utf8');
  const packages = /system_packages=\(([^)]*)\)/.exec(setup)?.[1]?.trim().split(/\s+/) ?? [];
  assert.ok(packages.length > 0 && !packages.includes('runsc'), packages.join(' '));
  assert.match(setup, /"\$root\/scripts\/setup-runsc"/);
  // Once the pinned version is installed, a run reads dpkg's record and stops there.
  const script = readFileSync(SCRIPT, 'utf8');
  const stop = script.indexOf('case "$installed" in "$pinned"*) exit 0');
  assert.ok(stop > 0 && stop < script.indexOf('apt-get update'), 'the installed check comes before any apt call');
});
