// The gVisor runtime's part of `roomkit doctor`: the programs it calls, whether runsc
// starts a real sandbox here, and the host task limit its sandboxes need. Each check
// says how to fix what is missing and is bounded in time.
import { readFileSync } from 'node:fs';
import type { Check } from '../../host/doctor.ts';
import { run } from '../../host/run.ts';
import { which } from '../../host/which.ts';
import { HOST_PID_MAX, REQUIRED_PROGRAMS } from './probe.ts';

/** Every program the runtime calls, then runsc's version and a sandbox of it (Linux only). */
export async function gvisorChecks(): Promise<Check[]> {
  const checks: Check[] = [];
  const root = process.getuid?.() === 0;
  for (const [program, pkg] of Object.entries(REQUIRED_PROGRAMS)) {
    const path = which(program);
    checks.push({ name: program, ok: path !== null, detail: path ?? 'not found', fix: `apt-get install ${pkg}` });
  }

  if (which('runsc')) {
    const version = await run('runsc', ['--version'], { timeoutMs: 10_000 });
    const first = version.stdout.split('\n')[0]?.trim() ?? '';
    checks.push({ name: 'runsc version', ok: version.code === 0, detail: first || version.stderr.trim(), fix: 'reinstall runsc: apt-get install --reinstall runsc' });
    if (root) {
      // A real sandbox: gVisor's own kernel starts and runs a program.
      const sandbox = await run('runsc', ['--network=none', '--platform=ptrace', 'do', '/bin/true'], { timeoutMs: 60_000 });
      checks.push({
        name: 'runsc runs a sandbox',
        ok: sandbox.code === 0,
        detail: sandbox.code === 0 ? 'runsc do /bin/true exited 0' : (sandbox.stderr.trim().split('\n').at(-1) ?? `exit ${sandbox.code}`),
        fix: 'see the error above; gVisor needs ptrace and a kernel it supports',
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
