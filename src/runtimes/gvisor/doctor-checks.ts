// The gVisor runtime's part of `roomkit doctor`: the programs it calls, runsc's version
// (against the pinned one) and platform, whether runsc starts a real sandbox here, and
// the host task limit its sandboxes need. Each check says how to fix what is missing
// and is bounded in time.
import { readFileSync } from 'node:fs';
import type { Check } from '../../host/doctor.ts';
import { run } from '../../host/run.ts';
import { which } from '../../host/which.ts';
import { HOST_PID_MAX, REQUIRED_PROGRAMS } from './probe.ts';
import { pinnedRunscVersion, runscAtLeast, runscBinary, runscPlatform, runscVersion } from './runsc.ts';

/** Every program the runtime calls, then runsc's version and a sandbox of it (Linux only). */
export async function gvisorChecks(): Promise<Check[]> {
  const checks: Check[] = [];
  const root = process.getuid?.() === 0;
  const runsc = runscBinary();
  for (const [program, pkg] of Object.entries(REQUIRED_PROGRAMS)) {
    const path = which(program === 'runsc' ? runsc : program);
    const fix = program === 'runsc' ? 'run scripts/setup as root (it installs the pinned runsc), or set ROOMKIT_RUNSC to a runsc binary' : `apt-get install ${pkg}`;
    checks.push({ name: program, ok: path !== null, detail: path ?? 'not found', fix });
  }

  if (which(runsc)) {
    const pinned = pinnedRunscVersion();
    let version: string;
    try {
      version = await runscVersion(runsc);
    } catch (err) {
      version = `does not run: ${(err as Error).message}`;
    }
    checks.push({
      name: 'runsc version',
      ok: runscAtLeast(version, pinned),
      detail: runscAtLeast(version, pinned) ? `${version} (pinned: ${pinned})` : `${version}, older than the pinned ${pinned}`,
      fix: 'run scripts/setup as root: it installs the pinned runsc from Debian trixie, that package alone',
    });
    let platform: string;
    try {
      platform = runscPlatform();
      checks.push({ name: 'runsc platform', ok: true, detail: `${platform}, gVisor's own network stack` });
    } catch (err) {
      platform = 'systrap';
      checks.push({ name: 'runsc platform', ok: false, detail: (err as Error).message, fix: 'set ROOMKIT_RUNSC_PLATFORM to systrap or ptrace, or leave it unset' });
    }
    if (root) {
      // A real sandbox: gVisor's own kernel starts and runs a program.
      const sandbox = await run(runsc, ['--network=none', `--platform=${platform}`, 'do', '/bin/true'], { timeoutMs: 60_000 });
      checks.push({
        name: 'runsc runs a sandbox',
        ok: sandbox.code === 0,
        detail: sandbox.code === 0 ? 'runsc do /bin/true exited 0' : (sandbox.stderr.trim().split('\n').at(-1) ?? `exit ${sandbox.code}`),
        fix: `see the error above; gVisor's ${platform} platform needs a kernel it supports (ROOMKIT_RUNSC_PLATFORM=ptrace is the other choice)`,
      });
    }
  }
  return checks;
}

/** kernel.pid_max, which the probe raises at start (a warning when it is still low). */
export function pidMaxCheck(): Check {
  const pidMax = Number(readFileSync('/proc/sys/kernel/pid_max', 'utf8'));
  return { name: 'kernel.pid_max', ok: pidMax >= HOST_PID_MAX, optional: true, detail: `${pidMax}${pidMax < HOST_PID_MAX ? ` (roomkit raises it to ${HOST_PID_MAX} at start)` : ''}` };
}
