// E2B's sandbox metrics (GET /sandboxes/{id}/metrics, the SDK's getMetrics) from what
// roomkit measures of an instance: the host memory its machine holds (what admission
// counts), its machine's CPU time, and its resources as the totals. One point, now:
// roomkit keeps no history of these, so a window (start, end) that ends before now
// answers none. Disk use is not measured per instance and reads 0.
import Type from 'typebox';
import { instanceIdNotFound } from '../../core/instance-address.ts';
import { callerOf } from '../../http/auth.ts';
import type { App } from '../../http/types.ts';
import type { Services } from '../../services.ts';
import { sandboxState } from './sandboxes.ts';

const SandboxParams = Type.Object({ sandboxID: Type.String({ maxLength: 128 }) });
/** The window's bounds, in Unix seconds. */
const MetricsQuery = Type.Object({ start: Type.Optional(Type.String({ pattern: '^[0-9]{1,12}$' })), end: Type.Optional(Type.String({ pattern: '^[0-9]{1,12}$' })) });

const MIB = 1024 * 1024;
/** Sandboxes whose previous CPU reading is kept, for the share used between two calls. */
const MAX_READINGS = 10_000;

export function metricsRoute(app: App, services: Services): void {
  // The previous reading of each sandbox: CPU use is the share of its vCPUs it used since.
  const readings = new Map<string, { at: number; cpuMs: number }>();

  app.get('/sandboxes/:sandboxID/metrics', { schema: { hide: true, params: SandboxParams, querystring: MetricsQuery } }, async (request) => {
    const caller = callerOf(request);
    const address = { organizationId: caller.organizationId, instanceId: request.params.sandboxID };
    const instance = await services.instances.getAt(address);
    const state = sandboxState(instance);
    if (!state) throw instanceIdNotFound(address.instanceId);
    const now = Date.now();
    const { end } = request.query;
    // A paused sandbox has no machine to measure; a window in the past holds no point.
    if (state === 'paused' || (end !== undefined && Number(end) * 1000 < now - 1000)) return [];
    const { memoryMb, cpuMs } = services.instances.measuredUse(instance.instance_id);
    const { vcpus, memory_mb: memoryTotalMb, disk_mb: diskTotalMb } = instance.resources;
    let cpuUsedPct = 0;
    if (cpuMs !== undefined) {
      // The first reading is averaged over the sandbox's life so far (paused time included).
      const previous = readings.get(instance.instance_id) ?? { at: Date.parse(instance.created_at), cpuMs: 0 };
      const elapsedMs = now - previous.at;
      if (elapsedMs > 0) cpuUsedPct = Math.min(100, Math.max(0, ((cpuMs - previous.cpuMs) / (elapsedMs * vcpus)) * 100));
      readings.delete(instance.instance_id);
      if (readings.size >= MAX_READINGS) readings.delete(readings.keys().next().value!);
      readings.set(instance.instance_id, { at: now, cpuMs });
    }
    return [
      {
        timestamp: new Date(now).toISOString(),
        timestampUnix: Math.floor(now / 1000),
        cpuCount: vcpus,
        cpuUsedPct: Math.round(cpuUsedPct * 100) / 100,
        memUsed: Math.round((memoryMb ?? 0) * MIB),
        memTotal: memoryTotalMb * MIB,
        memCache: 0,
        diskUsed: 0,
        diskTotal: diskTotalMb * MIB,
      },
    ];
  });
}
