// The login profile of Debian images (src/images/login-profile.ts): `id -u` answered by
// the shell's $EUID where it has one, and what the profile sets the same in bash and in
// a shell without $EUID.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { lstatSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { quickenLoginProfile, quickerProfile } from '../../src/images/login-profile.ts';

/** A profile of the form Debian's has: PATH by whether the user is root, and a prompt for shells other than bash. */
const PROFILE = `# test profile
if [ "$(id -u)" -eq 0 ]; then
  PATH="/root/only:/usr/bin:/bin"
else
  PATH="/user/only:/usr/bin:/bin"
fi
export PATH
if [ "\${PS1-}" ]; then
  if [ "$(id -u)" -eq 0 ]; then PS1='# '; else PS1='$ '; fi
fi
`;

const dir = mkdtempSync(join(tmpdir(), 'roomkit-login-profile-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** What a shell has in PATH and PS1 after sourcing `file` (interactive-looking: PS1 set first). */
function sourced(shell: string, file: string): string {
  const result = spawnSync(shell, ['-c', `PS1=x; . ${file}; echo "$PATH|$PS1"`], { env: { PATH: '/usr/bin:/bin' }, encoding: 'utf8' });
  assert.equal(result.status, 0, result.stderr);
  return result.stdout.trim();
}

describe("Debian's login profile, made cheap", () => {
  it('asks the shell for $EUID instead of running id -u, and leaves the rest as it was', () => {
    const quicker = quickerProfile(PROFILE);
    assert.doesNotMatch(quicker, /"\$\(id -u\)"/);
    assert.equal(quicker.split('${EUID:-$(id -u)}').length - 1, 2);
    assert.equal(quicker.replaceAll('${EUID:-$(id -u)}', '$(id -u)'), PROFILE);
    assert.equal(quickerProfile(quicker), quicker, 'a second pass changes nothing');
  });

  for (const shell of ['bash', 'sh']) {
    it(`sets the same PATH and prompt as the original in ${shell}`, () => {
      const original = join(dir, `original-${shell}`);
      const quicker = join(dir, `quicker-${shell}`);
      writeFileSync(original, PROFILE);
      writeFileSync(quicker, quickerProfile(PROFILE));
      const expected = sourced(shell, original);
      assert.match(expected, /only:\/usr\/bin:\/bin\|/);
      assert.equal(sourced(shell, quicker), expected);
    });
  }

  it("rewrites a root filesystem's /etc/profile in place, keeping its mode, and never writes through a link", () => {
    const rootfs = join(dir, 'rootfs');
    mkdirSync(join(rootfs, 'etc'), { recursive: true });
    writeFileSync(join(rootfs, 'etc', 'profile'), PROFILE, { mode: 0o644 });
    quickenLoginProfile(rootfs);
    assert.equal(readFileSync(join(rootfs, 'etc', 'profile'), 'utf8'), quickerProfile(PROFILE));
    assert.equal(lstatSync(join(rootfs, 'etc', 'profile')).mode & 0o777, 0o644);

    const linked = join(dir, 'linked');
    mkdirSync(join(linked, 'etc'), { recursive: true });
    const outside = join(dir, 'outside-profile');
    writeFileSync(outside, PROFILE);
    symlinkSync(outside, join(linked, 'etc', 'profile'));
    quickenLoginProfile(linked);
    assert.equal(readFileSync(outside, 'utf8'), PROFILE);

    quickenLoginProfile(join(dir, 'no-such-rootfs'));
  });
});
