// What each setting of the service is: the Config type (with why each setting exists),
// the choices of the settings that take one of a few words, and the overrides a command
// line gives. config.ts reads them (defaults and bounds) and re-exports all of it.

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export const RUNTIME_CHOICES = ['auto', 'gvisor', 'none'] as const;
export const SHUTDOWN_POLICIES = ['keep', 'stop'] as const;
export type ShutdownPolicy = (typeof SHUTDOWN_POLICIES)[number];
/** How files_changed is made: fanotify where the kernel allows (auto), always (an instance that cannot be watched fails to start), or a walk of the layer. */
export const CHANGE_TRACKING_METHODS = ['auto', 'fanotify', 'walk'] as const;
export type ChangeTracking = (typeof CHANGE_TRACKING_METHODS)[number];
export type RuntimeChoice = (typeof RUNTIME_CHOICES)[number];

export interface Config {
  readonly host: string;
  readonly port: number;
  readonly dataDir: string;
  /**
   * The PostgreSQL database the store is in (`postgres://user:password@host:port/name`),
   * for several nodes sharing one record; unset: SQLite in the data directory.
   */
  readonly databaseUrl: string | undefined;
  /** Connections this process keeps open to PostgreSQL at most (unused with SQLite). */
  readonly databasePoolSize: number;
  /**
   * The address other nodes reach this one at (with a PostgreSQL store, every `roomkit
   * serve` is a node); unset: the address it listens on.
   */
  readonly nodeUrl: string | undefined;
  /** How often a node says in the store that it is alive. */
  readonly nodeHeartbeatMs: number;
  /** A node silent this long is declared lost (by one other node). */
  readonly nodeLostAfterMs: number;
  /**
   * The secret every node of one store shares: a node forwards a request for an instance
   * that another node runs to that node with it, and takes a forwarded request only
   * with it. Unset: nothing is forwarded (such requests answer 421 instance_on_another_node).
   */
  readonly nodeSecret: string | undefined;
  readonly logLevel: LogLevel;
  /** Largest accepted request body. */
  readonly bodyLimitBytes: number;
  /** Upper bounds a profile may ask for; default to what this host has. */
  readonly maxMemoryMb: number;
  readonly maxVcpus: number;
  readonly maxDiskMb: number;
  /** Which instance runtime to use: `auto` probes the ones this build has, in order. */
  readonly runtime: RuntimeChoice;
  /** Where built images are cached; several data directories may share one. */
  readonly imagesDir: string;
  /** Where `oci:<name>` images are found: OCI image layouts, as directories or .tar files. */
  readonly ociDir: string;
  /** IPv4 range split into one /30 per instance. */
  readonly networkPool: string;
  /**
   * Networks (namespace, veth pair, address) kept made ahead of creates, each taken by
   * one create and made again in the background; 0 makes each create's network on its
   * path. Each holds an address block of networkPool.
   */
  readonly networkSlots: number;
  /**
   * Resolvers the egress resolver and proxy ask for the names an allowlist allows
   * (network/egress/); empty: the host's resolv.conf, loopback resolvers included.
   */
  readonly egressDnsServers: readonly string[];
  /**
   * Sandboxes restored from saved memory at once (a fork's copies, creates from a
   * snapshot with memory); more wait their turn. The host's CPU count by default: each
   * restore is a burst of CPU, and more at once than the cores only slow each other.
   */
  readonly restoresAtOnce: number;
  /** On SIGTERM: `keep` instances running for the next start to adopt, or `stop` them. */
  readonly onShutdown: ShutdownPolicy;
  /** How often idle and lifetime limits are checked. */
  readonly expiryCheckIntervalMs: number;
  /** Output of one command kept in its result: the first and the last half of it. */
  readonly maxOutputBytes: number;
  /**
   * Input one request may give a command's stdin (the `stdin` field, or one write to a
   * running command), decoded. The command routes accept bodies larger than
   * bodyLimitBytes by what this takes in base64.
   */
  readonly maxStdinBytes: number;
  /** Entries of files_changed in one result; the total is reported beyond it. */
  readonly filesChangedLimit: number;
  /** Largest file the JSON file endpoint returns (the raw endpoint streams any size). */
  readonly maxFileReadBytes: number;
  /** Largest file written in one PUT. */
  readonly maxUploadBytes: number;
  /** Commands running at once in one instance. */
  readonly maxCommandsPerInstance: number;
  /**
   * Unauthenticated raw file reads streaming from one instance at once. Each holds a
   * process of the VM user while it streams, so anyone with an instance id could
   * otherwise use up the tenant's process limit.
   */
  readonly maxRawReadsPerInstance: number;
  /** Output of finished commands kept in memory, all together, for reading by command id. */
  readonly commandOutputRetainBytes: number;
  /** Terminals open at once in one instance (each holds a shell and an agent connection). */
  readonly maxTerminalsPerInstance: number;
  /**
   * A terminal with neither input nor output for this long is closed (0: never). An open
   * terminal keeps its instance from idling out, so a forgotten one would keep it forever.
   */
  readonly terminalIdleTimeoutS: number;
  /**
   * Host tasks (processes and threads) one instance's sandbox may hold: the pids limit of
   * its host cgroup. The guest's own process limits bind first; this bounds what an
   * instance can take of the host's threads (kernel.threads-max) whatever it does.
   */
  readonly maxHostTasksPerInstance: number;
  /**
   * How a command's files_changed is made: `auto` watches each instance's writable layer
   * with fanotify where the kernel and the host allow it and walks it otherwise;
   * `fanotify` requires the watch (an instance that cannot get one fails to start);
   * `walk` lists the layer before and after each command.
   */
  readonly changeTracking: ChangeTracking;
  /**
   * Distinct paths (and inodes) of one instance the change watcher keeps between two
   * questions (a command's start and end); beyond it, that command's list is made by a
   * walk of the layer. Bounds the watcher's memory per instance (~100 bytes a path).
   */
  readonly changeTrackingMaxPaths: number;
  /** Undo points (keep_undo) one instance keeps at most; the oldest is dropped for a new one. */
  readonly undoMaxPoints: number;
  /** Disk, MiB, one instance's undo points may hold beyond what its current files share with them; the oldest are dropped first. */
  readonly undoMaxMb: number;
  /**
   * The address clients reach the service at (e.g. behind a proxy), for the whole URLs
   * tool results give; without it, the address each request came to.
   */
  readonly publicUrl: string | undefined;
  /**
   * Each organization's quotas unless the operator set others for it (`roomkit orgs
   * quota`): live instances, their memory, CPUs and writable disk together, commands
   * running at once and commands started per minute, across the organization, and the
   * snapshots it keeps.
   */
  readonly quotaInstances: number;
  readonly quotaMemoryMb: number;
  readonly quotaVcpus: number;
  readonly quotaDiskMb: number;
  readonly quotaConcurrentCommands: number;
  readonly quotaCommandsPerMinute: number;
  readonly quotaSnapshots: number;
  /**
   * Host admission: the share of the host's memory that live instances may commit
   * together (each its memory_mb plus the headroom its runtime gives it), and the share
   * of the data directory's free space their writable disks may add up to.
   */
  readonly admitMemoryPercent: number;
  readonly admitDiskPercent: number;
  /**
   * Memory (MiB) host admission keeps free beside what instances use (measured), so that
   * running instances have room to grow: a create is admitted while the instances' use,
   * the new one's starting estimate and this reserve fit within the memory share.
   */
  readonly admitReserveMb: number;
  /**
   * The host memory (MiB) admission takes its share of, instead of the host's own (0):
   * a smaller figure makes a small host, for tests. The host's real free memory still
   * bounds admission.
   */
  readonly admitHostMemoryMb: number;
  /**
   * How long (s) an instance must have had no request, command or terminal before memory
   * pressure may pause it to make room for a create or a resume.
   */
  readonly pressureIdleS: number;
  /**
   * CPU pressure (core/cpu-pressure.ts): when the host's CPUs were busier than this
   * percent between two expiry checks, idle and quiet instances are frozen (they thaw on
   * their next request). 0 turns freezing off.
   */
  readonly freezeCpuPercent: number;
  /** Bearer token of the operator API under /operator/; off (no such routes) when unset. */
  readonly operatorToken: string | undefined;
  /**
   * Requests one API key may make per rate-limit window; 0 turns the limit off. An
   * agent loop makes a few per second at most, so the default is far above it.
   */
  readonly rateLimitKeyRequests: number;
  /** Requests all keys of one organization may make together per window; 0: off. */
  readonly rateLimitOrgRequests: number;
  /** Unauthenticated raw file requests per client address per window; 0: off. */
  readonly rateLimitRawClientRequests: number;
  /** Unauthenticated raw file requests per instance per window, from all clients; 0: off. */
  readonly rateLimitRawInstanceRequests: number;
  /** The window the rate limits count in. */
  readonly rateLimitWindowS: number;
  /**
   * Rejected API keys one client address may present per authFailureWindowS before
   * every request from it is refused (429 auth_throttled) until the window ends; 0: off.
   */
  readonly authFailureBurst: number;
  /** The window failed authentications are counted in, per client address. */
  readonly authFailureWindowS: number;
  /** How long an Idempotency-Key and its kept answer last from the key's first use, seconds. */
  readonly idempotencyKeyTtlS: number;
  /**
   * Proxies in front of the service (addresses or CIDR ranges): their X-Forwarded-For
   * gives the client address, and their X-Request-Id is kept as the request id.
   */
  readonly trustProxy: readonly string[];
  /** When set, GET /metrics needs `Authorization: Bearer <token>`; `off` disables /metrics. */
  readonly metricsToken: string | undefined;
  /** Days audit records are kept; 0 keeps them forever. */
  readonly auditRetentionDays: number;
  /**
   * Instances the profiles' warm pools may keep booted on this host, all together; 0
   * turns warm pools off (profiles keep their `warm_pool`, nothing is pooled).
   */
  readonly warmPoolMaxInstances: number;
  /**
   * The wildcard domain of preview host names, `{port}-{instance_id}.{domain}` (a host
   * name, with `:port` when browsers reach the service on a port of its own); requests
   * with such a Host go to that port of that instance. Unset: no host-name form.
   */
  readonly previewDomain: string | undefined;
  /** Longest life a signed preview URL may be given. */
  readonly previewUrlMaxExpiryS: number;
  /** Ports no one may reach through the port proxy, besides the runtime's own (e.g. its agent's). */
  readonly reservedPorts: readonly number[];
  /**
   * Proxied requests and WebSockets open into one instance at once. Each holds a
   * connection of the host into the instance and memory of the service.
   */
  readonly maxPortConnectionsPerInstance: number;
  /** How long a proxied request waits for the instance's program to connect and send its answer's headers. */
  readonly portProxyTimeoutS: number;
  /** A proxied request or WebSocket with no bytes either way for this long is closed. */
  readonly portProxyIdleTimeoutS: number;
  /** Requests through signed preview URLs (no API key) per client address per window; 0: off. */
  readonly rateLimitPreviewClientRequests: number;
}

/** Settings given on the command line; they win over the environment. */
export type ConfigOverrides = Partial<Record<keyof Config, string | number | undefined>>;
