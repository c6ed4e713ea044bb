// `roomkit doctor`: what this host has and lacks for running instances. The host's
// checks and the runtime's own are put together here, in the order they print.
import { loadConfig } from '../config.ts';
import { type Check, freeDiskCheck, kernelChecks, platformChecks } from '../host/doctor.ts';
import { gvisorChecks, pidMaxCheck } from '../runtimes/gvisor/doctor-checks.ts';

export async function doctor(options: { dataDir?: string | undefined; json?: boolean | undefined }): Promise<number> {
  const config = loadConfig({ dataDir: options.dataDir });
  const checks = await runChecks(config.dataDir);
  const failed = checks.filter((c) => !c.ok && !c.optional);
  if (options.json) {
    process.stdout.write(`${JSON.stringify({ ok: failed.length === 0, checks }, null, 2)}\n`);
  } else {
    for (const c of checks) {
      const mark = c.ok ? 'ok  ' : c.optional ? 'warn' : 'FAIL';
      process.stdout.write(`${mark}  ${c.name}: ${c.detail}${!c.ok && c.fix ? `\n      fix: ${c.fix}` : ''}\n`);
    }
    process.stdout.write(
      failed.length === 0
        ? '\nThis host can run roomkit instances.\n'
        : `\n${failed.length} check(s) failed: instances cannot be created until they are fixed (scripts/setup installs the packages, as root).\n`,
    );
  }
  return failed.length === 0 ? 0 : 1;
}

async function runChecks(dataDir: string): Promise<Check[]> {
  const platform = platformChecks();
  // Every other check reads Linux's /proc and /sys.
  if (process.platform !== 'linux') return platform;
  return [...platform, ...(await gvisorChecks()), ...(await kernelChecks()), pidMaxCheck(), freeDiskCheck(dataDir)];
}
