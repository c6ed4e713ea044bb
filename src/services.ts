// Composition root: builds roomkit's services and their dependencies in one place, in
// plain code: core/ over the store and the runtime. The HTTP server (which builds the
// adapters over these), the CLI and tests all start from here.
import type { Logger } from 'pino';
import type { Config } from './config.ts';
import { Admission } from './core/admission.ts';
import { AuditTrail } from './core/audit.ts';
import { EgressAudit } from './core/egress-audit.ts';
import { Commands } from './core/commands.ts';
import { Reverts } from './core/reverts.ts';
import { Files } from './core/files.ts';
import { Instances } from './core/instances.ts';
import { Snapshots } from './core/snapshots.ts';
import { liveInstanceFigures } from './core/instance-figures.ts';
import { Metrics } from './metrics.ts';
import { Organizations } from './core/orgs.ts';
import { Ports } from './core/ports.ts';
import { PreviewTokens } from './core/preview-tokens.ts';
import { Profiles } from './core/profiles.ts';
import { ServedFiles } from './core/served-files.ts';
import { Quotas } from './core/quotas.ts';
import { ConsoleSessions } from './core/console-sessions.ts';
import { TerminalTickets } from './core/terminal-tickets.ts';
import { Terminals } from './core/terminals.ts';
import { Contexts } from './core/contexts.ts';
import { Templates } from './core/templates.ts';
import { selectRuntime, type RuntimeCandidate } from './runtimes/select.ts';
import { gvisorCandidate } from './runtimes/gvisor/probe.ts';
import type { RuntimeSelection } from './runtimes/types.ts';
import { type Db, openStore } from './store/db.ts';
import { FileLinks } from './core/file-links.ts';
import { nodeFigures } from './core/node-figures.ts';
import { nodeIdOf } from './host/node-identity.ts';
import { IdempotencyKeys } from './core/idempotency.ts';
import { NodeRegistry } from './cluster/node-registry.ts';
import { claimUnownedRows } from './cluster/unowned-rows.ts';
import { RateLimitCounters } from './store/rate-limit-counters.ts';
import { storeSettings } from './store/store-settings.ts';
import pkg from '../package.json' with { type: 'json' };

export interface Services {
  config: Config;
  log: Logger;
  db: Db;
  organizations: Organizations;
  profiles: Profiles;
  instances: Instances;
  /** Snapshots of instances' file systems, and forks. */
  snapshots: Snapshots;
  quotas: Quotas;
  admission: Admission;
  commands: Commands;
  /** How files are linked in answers (public_url); the REST API, which serves them, says how when it is mounted. */
  fileLinks: FileLinks;
  /** Reverts of one command's file changes (keep_undo). */
  reverts: Reverts;
  files: Files;
  /** Open terminals of instances (GET .../terminal). */
  terminals: Terminals;
  /** Code contexts: live interpreters in instances (…/contexts). */
  contexts: Contexts;
  /** Templates: images built from Dockerfiles (/api/templates). */
  templates: Templates;
  /** Single-use tickets that open a terminal without the Authorization header (browsers). */
  terminalTickets: TerminalTickets;
  consoleSessions: ConsoleSessions;
  /** Ports of instances reached from outside (…/ports/{port}/…, signed preview URLs). */
  ports: Ports;
  runtime: RuntimeSelection;
  /** This service's Prometheus registry and the figures the layers record. */
  metrics: Metrics;
  /** The record of state-changing requests, per organization (GET /api/audit). */
  audit: AuditTrail;
  /** This process's node id (host/node-identity.ts): its instances, snapshots and address leases carry it. */
  nodeId: string;
  /** Requests made with an Idempotency-Key, and their kept answers. */
  idempotencyKeys: IdempotencyKeys;
  /** This node among those sharing a PostgreSQL store; undefined with SQLite (one node). */
  nodes: NodeRegistry | undefined;
  /** Request rate-limit counters in the store: nodes of a shared store count together (undefined: each process counts in memory). */
  rateLimitCounters: RateLimitCounters | undefined;
  close(): Promise<void>;
}

/** How often the store forgets what ended instances listed for `raw_files: changed`. */
const SERVED_FILES_PRUNE_INTERVAL_MS = 10 * 60_000;

/** Runtimes this build can use, in the order `auto` tries them. */
export const RUNTIME_CANDIDATES: RuntimeCandidate[] = [gvisorCandidate];

export interface ServiceOptions {
  /** Replaces runtime probing (tests use this to supply a test double). */
  runtime?: RuntimeSelection;
}

export async function createServices(config: Config, log: Logger, options: ServiceOptions = {}): Promise<Services> {
  const db = await openStore(config);
  try {
    // Every process is a node, with one id kept in its data directory: its instances,
    // snapshots and address leases are recorded as its own (with a PostgreSQL store,
    // others share the record). Rows from before nodes are its own, taken before the
    // runtime starts (it reads its leases).
    const nodeId = nodeIdOf(config.dataDir);
    await claimUnownedRows(db, nodeId);
    const metrics = new Metrics();
    const runtime = options.runtime ?? (await selectRuntime({ config, db, log, metrics }, RUNTIME_CANDIDATES));
    const profiles = new Profiles(db, config);
    const organizations = new Organizations({ db, profiles });
    const quotas = new Quotas({ db, config });
    const admission = new Admission({ config, nodeId });
    const templates = new Templates({ db, runtime, log, nodeId });
    profiles.useTemplates(templates);
    const instances = new Instances({ db, profiles, runtime, quotas, admission, config, log, metrics, warmPoolMaxInstances: config.warmPoolMaxInstances, nodeId, templates });
    metrics.setInstanceSource(() => liveInstanceFigures(db, nodeId, { admission, runtime: 'runtime' in runtime ? runtime.runtime : undefined }));
    const servedFiles = new ServedFiles(db);
    const fileLinks = new FileLinks();
    const commands = new Commands({ db, instances, profiles, servedFiles, fileLinks, quotas, config, log, metrics });
    const reverts = new Reverts({ db, instances, profiles, servedFiles, fileLinks, config });
    const files = new Files({ instances, profiles, servedFiles, config });
    const terminals = new Terminals({ instances, config, log });
    const contexts = new Contexts({ instances, commands, config, log });
    const terminalTickets = new TerminalTickets();
    const consoleSessions = new ConsoleSessions({ db });
    const ports = new Ports({ instances, organizations, tokens: new PreviewTokens(config.dataDir, storeSettings(config).dialect === 'postgres' ? config.nodeSecret : undefined), config });
    const audit = new AuditTrail({ db, log, retentionDays: config.auditRetentionDays });
    const egressAudit = new EgressAudit({ db, audit, log });
    if ('runtime' in runtime) runtime.runtime.onEvent((event) => event.type === 'egress' && egressAudit.record(event.decision));
    const snapshots = new Snapshots({ db, instances, profiles, quotas, runtime, log, nodeId, keptElsewhere: () => templates.layerIds() });
    // The store is the record; make what exists on the host agree with it.
    await instances.reconcile();
    await snapshots.reconcile();
    await templates.reconcile();
    const codeInterpreters = await organizations.addCodeInterpreterProfiles();
    if (codeInterpreters > 0) log.info({ organizations: codeInterpreters }, 'gave organizations made before it the code-interpreter profile');
    const interrupted = await commands.recover();
    if (interrupted > 0) log.warn({ interrupted }, 'commands were running when the service stopped; recorded as interrupted');
    // With a PostgreSQL store, this process is a node among others sharing it; it joins
    // once it listens (join(), from serve), when it knows the address it is reached at.
    const clustered = storeSettings(config).dialect === 'postgres';
    // The keys this node held when it stopped (their requests' answers never came) are freed.
    const idempotencyKeys = new IdempotencyKeys({ db, log, ttlS: config.idempotencyKeyTtlS, owner: nodeId });
    await idempotencyKeys.forgetUnanswered();
    instances.alsoOnExpiryCheck(() => idempotencyKeys.sweep());
    // Nodes of a shared store count request rate limits together, in the store.
    const rateLimitCounters = clustered ? new RateLimitCounters(db) : undefined;
    if (rateLimitCounters !== undefined) instances.alsoOnExpiryCheck(() => rateLimitCounters.sweep());
    const nodes =
      clustered
        ? new NodeRegistry({
            db,
            log,
            nodeId,
            version: pkg.version,
            heartbeatMs: config.nodeHeartbeatMs,
            lostAfterMs: config.nodeLostAfterMs,
            measure: () => nodeFigures(db, runtime, admission, config),
            settleLost: () => instances.settleLostNodes(),
            rejoined: () => instances.releaseLost(),
          })
        : undefined;
    instances.startExpiryChecks(config.expiryCheckIntervalMs);
    instances.warmPool.start(config.expiryCheckIntervalMs);
    servedFiles.startPruning(SERVED_FILES_PRUNE_INTERVAL_MS, (err) => log.error({ err }, 'could not prune the served files of ended instances'));
    audit.startPruning();
    let closed: Promise<void> | undefined;
    return {
      config,
      log,
      db,
      organizations,
      profiles,
      instances,
      snapshots,
      quotas,
      admission,
      commands,
      fileLinks,
      reverts,
      files,
      terminals,
      contexts,
      templates,
      terminalTickets,
      consoleSessions,
      ports,
      runtime,
      metrics,
      audit,
      nodeId,
      idempotencyKeys,
      nodes,
      rateLimitCounters,
      close() {
        closed ??= (async () => {
          await nodes?.leave().catch((err: unknown) => log.error({ err }, 'could not record that this node left'));
          servedFiles.close();
          // Terminals first: their shells are hung up while their instances still run.
          await terminals.close();
          await contexts.close();
          await templates.close();
          await instances.close(config.onShutdown);
          await audit.close();
          if ('runtime' in runtime) await runtime.runtime.close();
          await db.destroy();
        })();
        return closed;
      },
    };
  } catch (err) {
    await db.destroy();
    throw err;
  }
}
