// Prometheus metrics of one running service: the registry GET /metrics serves and the
// few calls the layers record through. Each Services has its own registry (never
// prom-client's global one), so several apps in one process keep their figures apart.
// Gauges that describe the store's state (instances by state, memory committed) are
// read when scraped, from a source the composition root wires in.
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

/** Error codes that mean "refused by a quota or by the host's capacity": counted apart. */
export const QUOTA_ERROR_CODES: ReadonlySet<string> = new Set(['quota_exceeded', 'commands_rate_exceeded', 'capacity_exhausted']);

/** What the store says about live instances, read at each scrape. */
export interface InstanceFigures {
  /** Live instances by state (every live state, zeros included). */
  byState: Record<string, number>;
  /** Memory (MiB) the live instances' profiles asked for, all together. */
  memoryMb: number;
  /** Host admission's memory figures (MiB), when a runtime runs instances. */
  admission?: { inUseMb: number; limitMb: number; reserveMb: number; hostFreeMb: number };
}

export type MemoryGuardKill = 'largest_process' | 'all_user_processes';

export class Metrics {
  readonly registry = new Registry();
  private readonly httpRequests: Counter<'method' | 'route' | 'status'>;
  private readonly httpDuration: Histogram<'method' | 'route'>;
  private readonly httpErrors: Counter<'code'>;
  private readonly rateLimited: Counter<'limit'>;
  private readonly authFailures: Counter;
  private readonly egressDecisions: Counter<'kind' | 'decision'>;
  private readonly authThrottledRefusals: Counter;
  private readonly quotaRejections: Counter<'code'>;
  private readonly creates: Counter<'outcome'>;
  private readonly assigned: Counter<'source'>;
  private readonly createDuration: Histogram;
  private readonly phaseDuration: Histogram<'phase'>;
  private readonly commandsRunning: Gauge;
  private readonly commandDuration: Histogram<'state'>;
  private readonly guardKills: Counter<'kind'>;
  private readonly pressurePauses: Counter;
  private readonly cpuFreezes: Counter;
  private readonly placements: Histogram<'node'>;
  private instanceSource: (() => Promise<InstanceFigures>) | undefined;

  constructor() {
    const registers = [this.registry];
    // The process's own figures (CPU, resident memory, open descriptors, event-loop lag, heap).
    collectDefaultMetrics({ register: this.registry });
    this.httpRequests = new Counter({
      name: 'roomkit_http_requests_total',
      help: 'HTTP requests answered, by method, route pattern (never the raw URL) and status',
      labelNames: ['method', 'route', 'status'],
      registers,
    });
    this.httpDuration = new Histogram({
      name: 'roomkit_http_request_duration_seconds',
      help: 'Time from a request\'s arrival to its response\'s end, by method and route pattern',
      labelNames: ['method', 'route'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
      registers,
    });
    this.placements = new Histogram({
      name: 'roomkit_placement_decision_seconds',
      help: 'Time to decide where a create sent to this node makes its instance (nodes of a shared store), by whether it was made here or sent to another node',
      labelNames: ['node'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
      registers,
    });
    this.httpErrors = new Counter({
      name: 'roomkit_http_errors_total',
      help: 'Error bodies sent, by their error code',
      labelNames: ['code'],
      registers,
    });
    this.rateLimited = new Counter({
      name: 'roomkit_rate_limit_rejections_total',
      help: 'Requests refused with 429 rate_limited, by the limit that refused them',
      labelNames: ['limit'],
      registers,
    });
    this.authFailures = new Counter({
      name: 'roomkit_auth_failures_total',
      help: 'Requests whose API key was rejected (invalid, unknown or revoked), counted per client address for throttling',
      registers,
    });
    this.egressDecisions = new Counter({
      name: 'roomkit_egress_decisions_total',
      help: 'Decisions of the egress resolver (kind dns) and proxy (kind connect) for allowlisted instances, allowed or denied',
      labelNames: ['kind', 'decision'],
      registers,
    });
    this.authThrottledRefusals = new Counter({
      name: 'roomkit_auth_throttled_total',
      help: 'Requests refused with 429 auth_throttled: their address presented too many rejected keys (ROOMKIT_AUTH_FAILURE_BURST)',
      registers,
    });
    this.quotaRejections = new Counter({
      name: 'roomkit_quota_rejections_total',
      help: 'Requests refused by a quota or by the host\'s capacity, by error code',
      labelNames: ['code'],
      registers,
    });
    this.creates = new Counter({
      name: 'roomkit_instance_creates_total',
      help: 'Instances whose provisioning ended, by outcome (ready, failed, cancelled)',
      labelNames: ['outcome'],
      registers,
    });
    this.assigned = new Counter({
      name: 'roomkit_instance_assignments_total',
      help: 'Instances given to a room by a create, by source: warm_pool (claimed, already booted) or cold (made for the room)',
      labelNames: ['source'],
      registers,
    });
    this.createDuration = new Histogram({
      name: 'roomkit_instance_create_duration_seconds',
      help: 'Time from the start of provisioning to ready',
      buckets: [0.25, 0.5, 1, 2, 3, 5, 10, 20, 30, 60, 120, 300],
      registers,
    });
    this.phaseDuration = new Histogram({
      name: 'roomkit_instance_create_phase_duration_seconds',
      help: 'Time each provisioning step took, by the state it reached (from the previous state)',
      labelNames: ['phase'],
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 120],
      registers,
    });
    this.commandsRunning = new Gauge({
      name: 'roomkit_commands_running',
      help: 'Commands running now, in all instances',
      registers,
    });
    this.commandDuration = new Histogram({
      name: 'roomkit_command_duration_seconds',
      help: 'Time commands ran, by how they ended (exited, timed_out, killed, interrupted, error)',
      labelNames: ['state'],
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600],
      registers,
    });
    this.guardKills = new Counter({
      name: 'roomkit_memory_guard_kills_total',
      help: 'Kills by the instances\' memory guard: its largest process, or all of the VM user\'s',
      labelNames: ['kind'],
      registers,
    });
    this.pressurePauses = new Counter({
      name: 'roomkit_memory_pressure_pauses_total',
      help: 'Idle instances paused to make room in the host\'s memory (for a create or a resume, or to keep the reserve free)',
      registers,
    });
    this.cpuFreezes = new Counter({
      name: 'roomkit_cpu_pressure_freezes_total',
      help: 'Idle instances frozen because the host\'s CPUs were busy (they thaw on their next request)',
      registers,
    });
    const figures = () => this.instanceSource?.();
    const admissionGauge = (name: string, help: string, pick: (a: NonNullable<InstanceFigures['admission']>) => number) =>
      new Gauge({
        name,
        help,
        registers,
        async collect() {
          const a = (await figures())?.admission;
          this.reset();
          if (a) this.set(pick(a) * 1024 * 1024);
        },
      });
    admissionGauge('roomkit_instances_memory_in_use_bytes', 'Host memory running instances use now, measured (host admission counts it; starting ones at their estimate)', (a) => a.inUseMb);
    admissionGauge('roomkit_admission_memory_limit_bytes', 'The share of the host\'s memory instances may use together (ROOMKIT_ADMIT_MEMORY_PERCENT)', (a) => a.limitMb);
    admissionGauge('roomkit_admission_memory_reserve_bytes', 'Memory host admission keeps free for running instances to grow (ROOMKIT_ADMIT_RESERVE_MB)', (a) => a.reserveMb);
    admissionGauge('roomkit_host_memory_free_for_instances_bytes', 'What the host has available for more instances: MemAvailable less 5% of its memory', (a) => Math.max(0, a.hostFreeMb));
    new Gauge({
      name: 'roomkit_instances',
      help: 'Live instances, by state',
      labelNames: ['state'],
      registers,
      async collect() {
        const now = await figures();
        this.reset();
        for (const [state, count] of Object.entries(now?.byState ?? {})) this.set({ state }, count);
      },
    });
    new Gauge({
      name: 'roomkit_instances_memory_committed_bytes',
      help: 'Memory the live instances\' profiles asked for, all together',
      registers,
      async collect() {
        this.set(((await figures())?.memoryMb ?? 0) * 1024 * 1024);
      },
    });
  }

  /** Where the instance gauges are read from at each scrape. */
  setInstanceSource(source: () => Promise<InstanceFigures>): void {
    this.instanceSource = source;
  }

  /** A response sent: `route` is the route's pattern, or `unmatched`. */
  httpResponse(method: string, route: string, status: number, seconds: number): void {
    this.httpRequests.inc({ method, route, status: String(status) });
    this.httpDuration.observe({ method, route }, seconds);
  }

  /** A create placed among the nodes of a shared store: made `here` or sent `elsewhere`, and how long the decision took. */
  placementDecided(node: 'here' | 'elsewhere', seconds: number): void {
    this.placements.observe({ node }, seconds);
  }

  /** An Error body sent; quota and capacity refusals are also counted on their own. */
  errorSent(code: string): void {
    this.httpErrors.inc({ code });
    if (QUOTA_ERROR_CODES.has(code)) this.quotaRejections.inc({ code });
  }

  rateLimitRejected(limit: string): void {
    this.rateLimited.inc({ limit });
  }

  /** A request's API key was rejected. */
  authFailed(): void {
    this.authFailures.inc();
  }

  /** A decision of the egress resolver or proxy. */
  egressDecided(kind: 'dns' | 'connect', allowed: boolean): void {
    this.egressDecisions.inc({ kind, decision: allowed ? 'allowed' : 'denied' });
  }

  /** A request was refused because its address presented too many rejected keys. */
  authThrottled(): void {
    this.authThrottledRefusals.inc();
  }

  /** A provisioning step completed `seconds` after the previous one. */
  instancePhase(phase: string, seconds: number): void {
    this.phaseDuration.observe({ phase }, seconds);
  }

  /** A create gave a room an instance: one claimed from a warm pool, or one made for it. */
  instanceAssigned(source: 'warm_pool' | 'cold'): void {
    this.assigned.inc({ source });
  }

  /** Provisioning ended; `seconds` is recorded for instances that became ready. */
  instanceCreateEnded(outcome: 'ready' | 'failed' | 'cancelled', seconds: number): void {
    this.creates.inc({ outcome });
    if (outcome === 'ready') this.createDuration.observe(seconds);
  }

  commandStarted(): void {
    this.commandsRunning.inc();
  }

  commandEnded(state: string, seconds: number): void {
    this.commandsRunning.dec();
    this.commandDuration.observe({ state }, seconds);
  }

  /** An idle instance was paused for memory pressure. */
  pressurePaused(): void {
    this.pressurePauses.inc();
  }

  /** Idle instances were frozen for CPU pressure. */
  cpuFrozen(count: number): void {
    this.cpuFreezes.inc(count);
  }

  memoryGuardKilled(kind: MemoryGuardKill): void {
    this.guardKills.inc({ kind });
  }

  /** The Prometheus text exposition of every metric. */
  async scrape(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}
