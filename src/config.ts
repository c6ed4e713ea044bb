// Service configuration: read once at start from flags and ROOMKIT_* environment
// variables, validated, then frozen. Units are part of every numeric name. This file
// holds each setting's default and bounds (loadConfig); what each setting is (the Config
// type, with why each exists) is in config/settings.ts, the variable names in
// config/env-names.ts and the readers that check a value of each kind in
// config/setting-readers.ts. Everything is exported from here.
import { availableParallelism, totalmem } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  CHANGE_TRACKING_METHODS,
  type Config,
  type ConfigOverrides,
  LOG_LEVELS,
  RUNTIME_CHOICES,
  SHUTDOWN_POLICIES,
} from './config/settings.ts';
import { SettingReaders } from './config/setting-readers.ts';

export * from './config/settings.ts';

export const PACKAGE_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

export { ConfigError } from './config/config-error.ts';

/**
 * The default host task limit of one sandbox. Measured with the guest's limits in place
 * (128 tasks of the VM user, and more under sudo): bursts of both at once, in three
 * instances at once, took each sandbox to about 1,100 host tasks on the systrap platform,
 * and to 4,000-4,600 on ptrace (each guest process keeps a traced host process with a
 * thread per gVisor thread that ran it, reused after it ends); the default leaves room
 * for ptrace, the platform an operator may still choose.
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
  const read = new SettingReaders(overrides, env);
  const hostMemoryMb = Math.floor(totalmem() / (1024 * 1024));
  const hostCpus = availableParallelism();
  const dataDir = read.path('dataDir') ?? join(PACKAGE_ROOT, '.roomkit');

  const config: Config = {
    host: read.raw('host') ?? '127.0.0.1',
    port: read.int('port', 8080, 0, 65535),
    dataDir,
    databaseUrl: read.databaseUrl('databaseUrl'),
    databasePoolSize: read.int('databasePoolSize', 10, 1, 1000),
    nodeUrl: read.origin('nodeUrl'),
    nodeHeartbeatMs: read.int('nodeHeartbeatMs', 2000, 100, 60_000),
    nodeLostAfterMs: read.int('nodeLostAfterMs', 10_000, 1000, 600_000),
    nodeSecret: read.token('nodeSecret'),
    logLevel: read.oneOf('logLevel', LOG_LEVELS, 'info'),
    bodyLimitBytes: read.int('bodyLimitBytes', 1024 * 1024, 1024, 1024 * 1024 * 1024),
    maxMemoryMb: read.int('maxMemoryMb', hostMemoryMb, 128, 1024 * 1024),
    maxVcpus: read.int('maxVcpus', hostCpus, 1, 1024),
    maxDiskMb: read.int('maxDiskMb', 64 * 1024, 256, 1024 * 1024 * 1024),
    runtime: read.oneOf('runtime', RUNTIME_CHOICES, 'auto'),
    imagesDir: read.path('imagesDir') ?? join(dataDir, 'images'),
    ociDir: read.path('ociDir') ?? join(dataDir, 'oci'),
    networkPool: read.cidr('networkPool', '10.213.0.0/16'),
    networkSlots: read.int('networkSlots', 2, 0, 64),
    egressDnsServers: Object.freeze(read.addresses('egressDnsServers')),
    restoresAtOnce: read.int('restoresAtOnce', hostCpus, 1, 64),
    onShutdown: read.oneOf('onShutdown', SHUTDOWN_POLICIES, 'keep'),
    expiryCheckIntervalMs: read.int('expiryCheckIntervalMs', 5000, 100, 3_600_000),
    maxOutputBytes: read.int('maxOutputBytes', 1024 * 1024, 1024, 64 * 1024 * 1024),
    maxStdinBytes: read.int('maxStdinBytes', 1024 * 1024, 1024, 64 * 1024 * 1024),
    filesChangedLimit: read.int('filesChangedLimit', 1000, 1, 100_000),
    maxFileReadBytes: read.int('maxFileReadBytes', 50 * 1024 * 1024, 1024, 512 * 1024 * 1024),
    maxUploadBytes: read.int('maxUploadBytes', 50 * 1024 * 1024, 1024, 1024 * 1024 * 1024),
    maxCommandsPerInstance: read.int('maxCommandsPerInstance', 16, 1, 1024),
    maxRawReadsPerInstance: read.int('maxRawReadsPerInstance', 4, 1, 64),
    commandOutputRetainBytes: read.int('commandOutputRetainBytes', 64 * 1024 * 1024, 0, 4 * 1024 * 1024 * 1024),
    maxTerminalsPerInstance: read.int('maxTerminalsPerInstance', 8, 1, 256),
    terminalIdleTimeoutS: read.int('terminalIdleTimeoutS', 3600, 0, 7 * 24 * 3600),
    maxHostTasksPerInstance: read.int('maxHostTasksPerInstance', DEFAULT_HOST_TASKS_PER_INSTANCE, MIN_HOST_TASKS_PER_INSTANCE, 1 << 22),
    changeTracking: read.oneOf('changeTracking', CHANGE_TRACKING_METHODS, 'auto'),
    changeTrackingMaxPaths: read.int('changeTrackingMaxPaths', 65_536, 16, 1 << 22),
    undoMaxPoints: read.int('undoMaxPoints', 20, 1, 1000),
    undoMaxMb: read.int('undoMaxMb', 512, 1, 1024 * 1024),
    publicUrl: read.origin('publicUrl'),
    quotaInstances: read.int('quotaInstances', 20, 0, 100_000),
    quotaMemoryMb: read.int('quotaMemoryMb', 16 * 1024, 0, 1024 * 1024 * 1024),
    quotaVcpus: read.int('quotaVcpus', 16, 0, 100_000),
    quotaDiskMb: read.int('quotaDiskMb', 64 * 1024, 0, 1024 * 1024 * 1024),
    quotaConcurrentCommands: read.int('quotaConcurrentCommands', 64, 0, 100_000),
    quotaCommandsPerMinute: read.int('quotaCommandsPerMinute', 600, 0, 1_000_000),
    quotaSnapshots: read.int('quotaSnapshots', 50, 0, 1_000_000),
    admitMemoryPercent: read.int('admitMemoryPercent', 85, 1, 100),
    admitDiskPercent: read.int('admitDiskPercent', 90, 1, 1000),
    admitReserveMb: read.int('admitReserveMb', 2048, 0, 1024 * 1024 * 1024),
    admitHostMemoryMb: read.int('admitHostMemoryMb', 0, 0, 1024 * 1024 * 1024),
    pressureIdleS: read.int('pressureIdleS', 60, 0, 30 * 24 * 3600),
    freezeCpuPercent: read.int('freezeCpuPercent', 70, 0, 100),
    operatorToken: read.token('operatorToken'),
    rateLimitKeyRequests: read.int('rateLimitKeyRequests', 600, 0, 1_000_000),
    rateLimitOrgRequests: read.int('rateLimitOrgRequests', 1800, 0, 1_000_000),
    rateLimitRawClientRequests: read.int('rateLimitRawClientRequests', 300, 0, 1_000_000),
    rateLimitRawInstanceRequests: read.int('rateLimitRawInstanceRequests', 600, 0, 1_000_000),
    rateLimitWindowS: read.int('rateLimitWindowS', 60, 1, 86_400),
    authFailureBurst: read.int('authFailureBurst', 20, 0, 1_000_000),
    authFailureWindowS: read.int('authFailureWindowS', 60, 1, 86_400),
    idempotencyKeyTtlS: read.int('idempotencyKeyTtlS', 86_400, 60, 30 * 86_400),
    trustProxy: Object.freeze(read.addresses('trustProxy')),
    metricsToken: read.secret('metricsToken'),
    auditRetentionDays: read.int('auditRetentionDays', 90, 0, 36_500),
    warmPoolMaxInstances: read.int('warmPoolMaxInstances', DEFAULT_WARM_POOL_MAX_INSTANCES, 0, 10_000),
    previewDomain: read.domain('previewDomain'),
    previewUrlMaxExpiryS: read.int('previewUrlMaxExpiryS', 24 * 3600, 60, 30 * 24 * 3600),
    reservedPorts: Object.freeze(read.ports('reservedPorts')),
    maxPortConnectionsPerInstance: read.int('maxPortConnectionsPerInstance', 64, 1, 100_000),
    portProxyTimeoutS: read.int('portProxyTimeoutS', 60, 1, 3600),
    portProxyIdleTimeoutS: read.int('portProxyIdleTimeoutS', 300, 1, 7 * 24 * 3600),
    rateLimitPreviewClientRequests: read.int('rateLimitPreviewClientRequests', 1200, 0, 1_000_000),
  };
  return Object.freeze(config);
}
