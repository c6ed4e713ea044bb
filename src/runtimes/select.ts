// Chooses the instance runtime at start. With `auto`, each runtime this build knows is
// probed in order and the first that works here wins; why each was skipped is logged
// and kept, so an API caller gets the reason in the 503 instead of a guess.
import type { Logger } from 'pino';
import type { RuntimeChoice } from '../config.ts';
import type { Runtime, RuntimeSelection } from './types.ts';

export interface RuntimeCandidate {
  name: string;
  /** The runtime when it can run here, or why not. */
  probe(): Promise<{ runtime: Runtime } | { skipped: string }>;
}

export async function selectRuntime(
  choice: RuntimeChoice,
  candidates: RuntimeCandidate[],
  log: Logger,
): Promise<RuntimeSelection> {
  if (choice === 'none') {
    return { unavailable: { reason: 'instances are disabled on this server (ROOMKIT_RUNTIME=none)' } };
  }
  const skipped: string[] = [];
  for (const candidate of candidates) {
    const result = await candidate.probe();
    if ('runtime' in result) {
      log.info({ runtime: candidate.name }, 'instance runtime selected');
      return result;
    }
    log.warn({ runtime: candidate.name, reason: result.skipped }, 'instance runtime skipped');
    skipped.push(`${candidate.name}: ${result.skipped}`);
  }
  const reason =
    skipped.length === 0
      ? 'this build of roomkit has no instance runtime yet, so instances cannot be created'
      : `no instance runtime works on this host (${skipped.join('; ')})`;
  return { unavailable: { reason } };
}
