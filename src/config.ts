// Service configuration: read once at start from flags and ROOMKIT_* environment
// variables, validated, then frozen. Units are part of every numeric name.
import { isIP } from 'node:net';
import { availableParallelism, homedir, totalmem } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseCidr } from './lib/cidr.ts';

export const PACKAGE_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

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

export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

/** Settings given on the command line; they win over the environment. */
export type ConfigOverrides = Partial<Record<keyof Config, string | number | undefined>>;

const ENV_NAMES: Record<keyof Config, string> = {
  host: 'ROOMKIT_HOST',
  port: 'ROOMKIT_PORT',
  dataDir: 'ROOMKIT_DATA_DIR',
  logLevel: 'ROOMKIT_LOG_LEVEL',
  bodyLimitBytes: 'ROOMKIT_BODY_LIMIT_BYTES',
  maxMemoryMb: 'ROOMKIT_MAX_MEMORY_MB',
  maxVcpus: 'ROOMKIT_MAX_VCPUS',
  maxDiskMb: 'ROOMKIT_MAX_DISK_MB',
  runtime: 'ROOMKIT_RUNTIME',
  imagesDir: 'ROOMKIT_IMAGES_DIR',
  ociDir: 'ROOMKIT_OCI_DIR',
  networkPool: 'ROOMKIT_NETWORK_POOL',
  onShutdown: 'ROOMKIT_ON_SHUTDOWN',
  expiryCheckIntervalMs: 'ROOMKIT_EXPIRY_CHECK_INTERVAL_MS',
  maxOutputBytes: 'ROOMKIT_MAX_OUTPUT_BYTES',
  maxStdinBytes: 'ROOMKIT_MAX_STDIN_BYTES',
  filesChangedLimit: 'ROOMKIT_FILES_CHANGED_LIMIT',
  maxFileReadBytes: 'ROOMKIT_MAX_FILE_READ_BYTES',
  maxUploadBytes: 'ROOMKIT_MAX_UPLOAD_BYTES',
  maxCommandsPerInstance: 'ROOMKIT_MAX_COMMANDS_PER_INSTANCE',
  maxRawReadsPerInstance: 'ROOMKIT_MAX_RAW_READS_PER_INSTANCE',
  commandOutputRetainBytes: 'ROOMKIT_COMMAND_OUTPUT_RETAIN_BYTES',
  maxTerminalsPerInstance: 'ROOMKIT_MAX_TERMINALS_PER_INSTANCE',
  terminalIdleTimeoutS: 'ROOMKIT_TERMINAL_IDLE_TIMEOUT_S',
  maxHostTasksPerInstance: 'ROOMKIT_MAX_HOST_TASKS_PER_INSTANCE',
  changeTracking: 'ROOMKIT_CHANGE_TRACKING',
  changeTrackingMaxPaths: 'ROOMKIT_CHANGE_TRACKING_MAX_PATHS',
  undoMaxPoints: 'ROOMKIT_UNDO_MAX_POINTS',
  undoMaxMb: 'ROOMKIT_UNDO_MAX_MB',
  publicUrl: 'ROOMKIT_PUBLIC_URL',
  quotaInstances: 'ROOMKIT_QUOTA_INSTANCES',
  quotaMemoryMb: 'ROOMKIT_QUOTA_MEMORY_MB',
  quotaVcpus: 'ROOMKIT_QUOTA_VCPUS',
  quotaDiskMb: 'ROOMKIT_QUOTA_DISK_MB',
  quotaConcurrentCommands: 'ROOMKIT_QUOTA_CONCURRENT_COMMANDS',
  quotaCommandsPerMinute: 'ROOMKIT_QUOTA_COMMANDS_PER_MINUTE',
  quotaSnapshots: 'ROOMKIT_QUOTA_SNAPSHOTS',
  admitMemoryPercent: 'ROOMKIT_ADMIT_MEMORY_PERCENT',
  admitDiskPercent: 'ROOMKIT_ADMIT_DISK_PERCENT',
  operatorToken: 'ROOMKIT_OPERATOR_TOKEN',
  rateLimitKeyRequests: 'ROOMKIT_RATE_LIMIT_KEY_REQUESTS',
  rateLimitOrgRequests: 'ROOMKIT_RATE_LIMIT_ORG_REQUESTS',
  rateLimitRawClientRequests: 'ROOMKIT_RATE_LIMIT_RAW_CLIENT_REQUESTS',
  rateLimitRawInstanceRequests: 'ROOMKIT_RATE_LIMIT_RAW_INSTANCE_REQUESTS',
  rateLimitWindowS: 'ROOMKIT_RATE_LIMIT_WINDOW_S',
  trustProxy: 'ROOMKIT_TRUST_PROXY',
  metricsToken: 'ROOMKIT_METRICS_TOKEN',
  auditRetentionDays: 'ROOMKIT_AUDIT_RETENTION_DAYS',
  warmPoolMaxInstances: 'ROOMKIT_WARM_POOL_MAX_INSTANCES',
  previewDomain: 'ROOMKIT_PREVIEW_DOMAIN',
  previewUrlMaxExpiryS: 'ROOMKIT_PREVIEW_URL_MAX_EXPIRY_S',
  reservedPorts: 'ROOMKIT_RESERVED_PORTS',
  maxPortConnectionsPerInstance: 'ROOMKIT_MAX_PORT_CONNECTIONS_PER_INSTANCE',
  portProxyTimeoutS: 'ROOMKIT_PORT_PROXY_TIMEOUT_S',
  portProxyIdleTimeoutS: 'ROOMKIT_PORT_PROXY_IDLE_TIMEOUT_S',
  rateLimitPreviewClientRequests: 'ROOMKIT_RATE_LIMIT_PREVIEW_CLIENT_REQUESTS',
};

/**
 * The default host task limit of one sandbox. Measured with the guest's limits in place
 * (128 tasks of the VM user, 256 under sudo whatever the user): bursts of both at once,
 * in three instances at once, took each sandbox to about 4,000-4,600 host tasks under the
 * ptrace platform (each guest process keeps a traced host process with a thread per
 * gVisor thread that ran it, reused after it ends); the default leaves room for that to grow.
 */
export const DEFAULT_HOST_TASKS_PER_INSTANCE = 12_288;
/** Below this a sandbox cannot carry the guest's own limits, and would die at the host limit. */
export const MIN_HOST_TASKS_PER_INSTANCE = 4096;

/**
 * Pooled instances a host keeps at most by default. A default instance commits 1.5 GiB
 * of host memory (1 GiB and the sandbox's headroom), so 8 leave room for the instances
 * rooms use on a host of 24 GiB; pools also give way to any create that needs their room.
 */
export const DEFAULT_WARM_POOL_MAX_INSTANCES = 8;

export function loadConfig(overrides: ConfigOverrides = {}, env: NodeJS.ProcessEnv = process.env): Config {
  const raw = (key: keyof Config): string | undefined => {
    const fromFlag = overrides[key];
    if (fromFlag !== undefined) return String(fromFlag);
    const fromEnv = env[ENV_NAMES[key]];
    return fromEnv === undefined || fromEnv === '' ? undefined : fromEnv;
  };
  const where = (key: keyof Config) =>
    overrides[key] !== undefined ? `option ${key}` : `environment variable ${ENV_NAMES[key]}`;

  const int = (key: keyof Config, fallback: number, min: number, max: number): number => {
    const value = raw(key);
    if (value === undefined) return fallback;
    const n = Number(value);
    if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < min || n > max) {
      throw new ConfigError(`${where(key)} must be a whole number from ${min} to ${max}, got "${value}"`);
    }
    return n;
  };
  const oneOf = <T extends string>(key: keyof Config, choices: readonly T[], fallback: T): T => {
    const value = raw(key);
    if (value === undefined) return fallback;
    if (!(choices as readonly string[]).includes(value)) {
      throw new ConfigError(`${where(key)} must be one of ${choices.join(', ')}, got "${value}"`);
    }
    return value as T;
  };

  const cidr = (key: keyof Config, fallback: string): string => {
    const value = raw(key) ?? fallback;
    try {
      const { prefixLength } = parseCidr(value);
      if (prefixLength > 28) throw new Error('it must be a /28 or larger');
    } catch (err) {
      throw new ConfigError(`${where(key)} must be an IPv4 range such as 10.213.0.0/16: ${(err as Error).message}`);
    }
    return value;
  };

  const hostMemoryMb = Math.floor(totalmem() / (1024 * 1024));
  const hostCpus = availableParallelism();
  const path = (key: keyof Config): string | undefined => {
    const value = raw(key);
    return value === undefined ? undefined : resolve(value.replace(/^~(?=\/|$)/, homedir()));
  };
  const dataDir = path('dataDir') ?? join(PACKAGE_ROOT, '.roomkit');

  const origin = (key: keyof Config): string | undefined => {
    const value = raw(key);
    if (value === undefined) return undefined;
    let url: URL;
    try {
      url = new URL(value);
    } catch {
      throw new ConfigError(`${where(key)} must be a URL such as https://roomkit.example.com, got "${value}"`);
    }
    if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.search !== '' || url.hash !== '' || url.username !== '') {
      throw new ConfigError(`${where(key)} must be an http(s) URL without credentials, query or fragment, got "${value}"`);
    }
    return `${url.origin}${url.pathname.replace(/\/+$/, '')}`;
  };

  const token = (key: keyof Config): string | undefined => {
    const value = raw(key);
    if (value === undefined) return undefined;
    if (!/^[\x21-\x7e]{32,256}$/.test(value)) {
      throw new ConfigError(`${where(key)} must be 32 to 256 printable characters without spaces (e.g. from \`openssl rand -hex 32\`)`);
    }
    return value;
  };

  const addresses = (key: keyof Config): string[] => {
    const value = raw(key);
    if (value === undefined) return [];
    return value.split(',').map((entry) => {
      const item = entry.trim();
      const [address = '', prefix, extra] = item.split('/');
      const family = isIP(address);
      const bits = family === 4 ? 32 : 128;
      const prefixOk = prefix === undefined || (/^\d{1,3}$/.test(prefix) && Number(prefix) <= bits);
      if (family === 0 || !prefixOk || extra !== undefined) {
        throw new ConfigError(`${where(key)} must be addresses or CIDR ranges separated by commas (e.g. 127.0.0.1,10.0.0.0/8), got "${item}"`);
      }
      return item;
    });
  };

  const secret = (key: keyof Config): string | undefined => {
    const value = raw(key);
    if (value === undefined || value === 'off') return value;
    if (!/^[\x21-\x7e]{16,256}$/.test(value)) {
      throw new ConfigError(`${where(key)} must be 16 to 256 printable characters without spaces, or "off"`);
    }
    return value;
  };

  const domain = (key: keyof Config): string | undefined => {
    const value = raw(key)?.toLowerCase();
    if (value === undefined) return undefined;
    const match = /^((?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)(?::(\d{1,5}))?$/.exec(value);
    if (!match || (match[2] !== undefined && (Number(match[2]) < 1 || Number(match[2]) > 65535))) {
      throw new ConfigError(`${where(key)} must be a domain name, with :port when it has one (e.g. preview.example.com), without a scheme or a leading "*.", got "${value}"`);
    }
    return value;
  };

  const ports = (key: keyof Config): number[] => {
    const value = raw(key);
    if (value === undefined) return [];
    const found = new Set<number>();
    for (const entry of value.split(',')) {
      const match = /^\s*(\d{1,5})(?:-(\d{1,5}))?\s*$/.exec(entry);
      const from = Number(match?.[1]);
      const to = match?.[2] === undefined ? from : Number(match[2]);
      if (!match || from < 1 || to > 65535 || to < from || to - from > 65535) {
        throw new ConfigError(`${where(key)} must be ports or ranges separated by commas (e.g. 22,6000-6010), got "${entry.trim()}"`);
      }
      for (let p = from; p <= to; p++) found.add(p);
    }
    return [...found].sort((a, b) => a - b);
  };

  const config: Config = {
    host: raw('host') ?? '127.0.0.1',
    port: int('port', 8080, 0, 65535),
    dataDir,
    logLevel: oneOf('logLevel', LOG_LEVELS, 'info'),
    bodyLimitBytes: int('bodyLimitBytes', 1024 * 1024, 1024, 1024 * 1024 * 1024),
    maxMemoryMb: int('maxMemoryMb', hostMemoryMb, 128, 1024 * 1024),
    maxVcpus: int('maxVcpus', hostCpus, 1, 1024),
    maxDiskMb: int('maxDiskMb', 64 * 1024, 256, 1024 * 1024 * 1024),
    runtime: oneOf('runtime', RUNTIME_CHOICES, 'auto'),
    imagesDir: path('imagesDir') ?? join(dataDir, 'images'),
    ociDir: path('ociDir') ?? join(dataDir, 'oci'),
    networkPool: cidr('networkPool', '10.213.0.0/16'),
    onShutdown: oneOf('onShutdown', SHUTDOWN_POLICIES, 'keep'),
    expiryCheckIntervalMs: int('expiryCheckIntervalMs', 5000, 100, 3_600_000),
    maxOutputBytes: int('maxOutputBytes', 1024 * 1024, 1024, 64 * 1024 * 1024),
    maxStdinBytes: int('maxStdinBytes', 1024 * 1024, 1024, 64 * 1024 * 1024),
    filesChangedLimit: int('filesChangedLimit', 1000, 1, 100_000),
    maxFileReadBytes: int('maxFileReadBytes', 50 * 1024 * 1024, 1024, 512 * 1024 * 1024),
    maxUploadBytes: int('maxUploadBytes', 50 * 1024 * 1024, 1024, 1024 * 1024 * 1024),
    maxCommandsPerInstance: int('maxCommandsPerInstance', 16, 1, 1024),
    maxRawReadsPerInstance: int('maxRawReadsPerInstance', 4, 1, 64),
    commandOutputRetainBytes: int('commandOutputRetainBytes', 64 * 1024 * 1024, 0, 4 * 1024 * 1024 * 1024),
    maxTerminalsPerInstance: int('maxTerminalsPerInstance', 8, 1, 256),
    terminalIdleTimeoutS: int('terminalIdleTimeoutS', 3600, 0, 7 * 24 * 3600),
    maxHostTasksPerInstance: int('maxHostTasksPerInstance', DEFAULT_HOST_TASKS_PER_INSTANCE, MIN_HOST_TASKS_PER_INSTANCE, 1 << 22),
    changeTracking: oneOf('changeTracking', CHANGE_TRACKING_METHODS, 'auto'),
    changeTrackingMaxPaths: int('changeTrackingMaxPaths', 65_536, 16, 1 << 22),
    undoMaxPoints: int('undoMaxPoints', 20, 1, 1000),
    undoMaxMb: int('undoMaxMb', 512, 1, 1024 * 1024),
    publicUrl: origin('publicUrl'),
    quotaInstances: int('quotaInstances', 20, 0, 100_000),
    quotaMemoryMb: int('quotaMemoryMb', 16 * 1024, 0, 1024 * 1024 * 1024),
    quotaVcpus: int('quotaVcpus', 16, 0, 100_000),
    quotaDiskMb: int('quotaDiskMb', 64 * 1024, 0, 1024 * 1024 * 1024),
    quotaConcurrentCommands: int('quotaConcurrentCommands', 64, 0, 100_000),
    quotaCommandsPerMinute: int('quotaCommandsPerMinute', 600, 0, 1_000_000),
    quotaSnapshots: int('quotaSnapshots', 50, 0, 1_000_000),
    admitMemoryPercent: int('admitMemoryPercent', 85, 1, 100),
    admitDiskPercent: int('admitDiskPercent', 90, 1, 100),
    operatorToken: token('operatorToken'),
    rateLimitKeyRequests: int('rateLimitKeyRequests', 600, 0, 1_000_000),
    rateLimitOrgRequests: int('rateLimitOrgRequests', 1800, 0, 1_000_000),
    rateLimitRawClientRequests: int('rateLimitRawClientRequests', 300, 0, 1_000_000),
    rateLimitRawInstanceRequests: int('rateLimitRawInstanceRequests', 600, 0, 1_000_000),
    rateLimitWindowS: int('rateLimitWindowS', 60, 1, 86_400),
    trustProxy: Object.freeze(addresses('trustProxy')),
    metricsToken: secret('metricsToken'),
    auditRetentionDays: int('auditRetentionDays', 90, 0, 36_500),
    warmPoolMaxInstances: int('warmPoolMaxInstances', DEFAULT_WARM_POOL_MAX_INSTANCES, 0, 10_000),
    previewDomain: domain('previewDomain'),
    previewUrlMaxExpiryS: int('previewUrlMaxExpiryS', 24 * 3600, 60, 30 * 24 * 3600),
    reservedPorts: Object.freeze(ports('reservedPorts')),
    maxPortConnectionsPerInstance: int('maxPortConnectionsPerInstance', 64, 1, 100_000),
    portProxyTimeoutS: int('portProxyTimeoutS', 60, 1, 3600),
    portProxyIdleTimeoutS: int('portProxyIdleTimeoutS', 300, 1, 7 * 24 * 3600),
    rateLimitPreviewClientRequests: int('rateLimitPreviewClientRequests', 1200, 0, 1_000_000),
  };
  return Object.freeze(config);
}
