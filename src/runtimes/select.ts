// Chooses the instance runtime at start. With `auto`, each runtime this build knows is
// probed in order and the first that works here wins; why each was skipped is logged
// and kept, so an API caller gets the reason in the 503 instead of a guess.
import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import type { Metrics } from '../metrics.ts';
import type { Db } from '../store/db.ts';
import type { Runtime, RuntimeSelection } from './types.ts';

/** What a runtime may need to start: the configuration, the store, a logger, the metrics it records. */
export interface RuntimeContext {
  config: Config;
  db: Db;
  log: Logger;
  metrics?: Metrics;
}

export interface RuntimeCandidate {
  name: string;
  /** The runtime, started, when it can run here; or why not. */
  probe(context: RuntimeContext): Promise<{ runtime: Runtime } | { skipped: string }>;
}

export async function selectRuntime(context: RuntimeContext, candidates: RuntimeCandidate[]): Promise<RuntimeSelection> {
  const { config, log } = context;
  const choice = config.runtime;
  if (choice === 'none') {
    return { unavailable: { reason: 'instances are disabled on this server (ROOMKIT_RUNTIME=none)' } };
  }
  const skipped: string[] = [];
  for (const candidate of candidates) {
    if (choice !== 'auto' && choice !== candidate.name) continue;
    const result = await candidate.probe(context);
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
