// How a program starts inside an instance with `runsc exec`: as whom, in which
// directory, with which environment. Every exec the runtime makes, whether it waits for
// the program or streams its input and output, gets its arguments here.
import { VM_UID } from '../../images/builder.ts';
import { CAPABILITIES, PATH_ENV } from './bundle.ts';

export interface ExecIdentity {
  /** `vm`: the profile's unprivileged user in its home; `root`: root in /. */
  as: 'vm' | 'root';
  home?: string;
  /**
   * For root: exactly these capabilities (e.g. CAP_SYS_ADMIN for the boot's cgroup
   * setup, which no guest process has) instead of the sandbox's.
   */
  caps?: readonly string[];
}

export interface ExecOptions extends ExecIdentity {
  env?: string[];
  timeoutMs: number;
}

/** The `runsc exec` arguments that run `argv` in the instance as `identity`, with `env` (NAME=value) besides PATH. */
export function execArgs(instanceId: string, argv: string[], identity: ExecIdentity, env: string[] = []): string[] {
  // Always named: without --cap, runsc exec gives the init's capabilities, and the
  // agent's init has CAP_SYS_ADMIN (bundle.ts).
  const caps = (identity.as === 'root' ? (identity.caps ?? CAPABILITIES) : CAPABILITIES).map((c) => `--cap=${c}`);
  const user =
    identity.as === 'vm'
      ? [`--user=${VM_UID}:${VM_UID}`, `--cwd=${identity.home ?? '/'}`, `--env=HOME=${identity.home ?? '/'}`]
      : ['--user=0:0', '--cwd=/', '--env=HOME=/root'];
  return ['exec', ...user, ...caps, ...[PATH_ENV, ...env].map((e) => `--env=${e}`), instanceId, ...asUser(identity.as, argv)];
}

/**
 * The argv to exec for a user. This runsc gives the first process of `exec --user=N`
 * the sandbox's capabilities (CAP_DAC_OVERRIDE among them) whatever N is; an execve
 * by a non-root user drops them, so the VM user's programs start through env(1) and
 * no code of theirs runs with them.
 */
function asUser(as: 'vm' | 'root', argv: string[]): string[] {
  return as === 'vm' ? ['/usr/bin/env', '--', ...argv] : argv;
}
