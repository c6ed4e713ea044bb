// Table types of roomkit's store, as Kysely sees them. Timestamps are ISO-8601 UTC
// strings and structured values are JSON text, so the same schema works on SQLite and
// PostgreSQL.
import type { Generated, Insertable, Selectable, Updateable } from 'kysely';

export interface OrganizationsTable {
  id: string;
  name: string;
  created_at: string;
}

export interface ApiKeysTable {
  id: string;
  organization_id: string;
  env: 'live' | 'test';
  name: string | null;
  /** The first characters of the key, shown in listings and used to find the row. */
  prefix: string;
  /** SHA-256 of the whole key, hex. The key itself is never stored. */
  hash: string;
  created_at: string;
  last_used_at: string | null;
  revoked_at: string | null;
}

export interface ProfilesTable {
  id: string;
  organization_id: string;
  name: string;
  /** JSON of ProfileSpec (everything but id, name and timestamps). */
  spec: string;
  created_at: string;
  updated_at: string;
  deleted_at: string | null;
}

export interface InstancesTable {
  id: string;
  organization_id: string;
  profile_id: string;
  room_id: string;
  state: string;
  failure_reason: string | null;
  runtime: string;
  /** JSON of the resources granted at creation, from `spec` (a later profile change does not alter them; see core/instance-records.ts resourcesOf). */
  resources: string;
  created_at: string;
  updated_at: string;
  /** Set when the caller deleted the instance; it then no longer answers for its room. */
  deleted_at: string | null;
  /** Last command or file request; the idle limit counts from here. */
  last_active_at: string | null;
  /** 0 = no limit. */
  idle_timeout_s: number;
  /** 0 = no limit. */
  max_lifetime_s: number;
  /** What provisioning is doing right now, while it takes long; null otherwise. */
  progress: string | null;
  /** JSON of the ProfileSpec the instance was made from; null for instances made before it was kept. */
  spec: string | null;
  /**
   * Set while the instance is in its profile's warm pool (booted, in no room yet): the
   * profile's warmPoolKey it was made from. Cleared when a room claims it.
   */
  warm_pool_key: string | null;
  /** When a room claimed it from the warm pool; null for an instance created for its room. */
  claimed_at: string | null;
  /** When the instance was last paused; null while it has never been or is running again. */
  paused_at: string | null;
  /** Whether that pause kept its memory (1) or only its files (0); null when not paused. */
  paused_memory_kept: number | null;
  /** Seconds a paused instance is kept before it is removed (from its profile when made); 0 = no limit. */
  paused_retention_s: number;
  /** The snapshot the instance started from; null for one started from its image. */
  snapshot_id: string | null;
  /** JSON of the environment variables its create set; null when none. */
  env: string | null;
  /** Its create's timeout_s; 0 = none. */
  timeout_s: number;
  /** When its deadline passes (timeout_s, moved by keep-alives); null when it has none. */
  expires_at: string | null;
  /** What its deadline does, `pause` or `stop`, when its create said; null: its profile's idle_action. */
  timeout_action: 'pause' | 'stop' | null;
  /** The node whose host runs it (cluster/); null only on rows from before nodes, until a node claims them. */
  node_id: string | null;
}

export interface SnapshotsTable {
  id: string;
  organization_id: string;
  /** The caller's name for it; null when none was given. */
  name: string | null;
  /** `creating` while its files are copied, then `ready`; a failed one is removed. */
  state: 'creating' | 'ready';
  /** The instance it was taken of, and where that one lived. */
  source_instance_id: string;
  profile_id: string;
  room_id: string;
  runtime: string;
  /** JSON of the ProfileSpec of its source: an instance from it keeps the image and disk size. */
  spec: string;
  /** 1 when its memory and processes were saved too; 0: its files only. */
  memory_kept: number;
  /** Bytes of host disk it holds. */
  disk_bytes: number;
  created_at: string;
  /** Set when it was deleted (its files are gone); it then no longer answers. */
  deleted_at: string | null;
  /** The node whose host holds its files; null only on rows from before nodes, until a node claims them. */
  node_id: string | null;
}

/** An instance's labels (its create's metadata), one row per key, so that the list filters by them in SQL. */
export interface InstanceMetadataTable {
  instance_id: string;
  key: string;
  value: string;
}

export interface CommandsTable {
  id: string;
  organization_id: string;
  instance_id: string;
  profile_id: string;
  room_id: string;
  command: string;
  /**
   * running, exited, timed_out, killed (a caller asked), interrupted (the service
   * stopped during it), error (it could not run).
   */
  state: string;
  /** 1 when started with `background: true`. */
  background: Generated<number>;
  exit_code: number | null;
  output_bytes: number | null;
  files_changed: number | null;
  started_at: string;
  finished_at: string | null;
  duration_ms: number | null;
  /** Why it ended, as one of the API's end reasons; null while running and for older rows. */
  end_reason: string | null;
}

export interface InstanceEventsTable {
  instance_id: string;
  /** 1, 2, 3... within one instance: the order of its transitions. */
  seq: number;
  state: string;
  at: string;
  reason: string | null;
  /** Why, as one of the API's reason codes (stopping, stopped, failed); null for other steps and older rows. */
  reason_code: string | null;
  /** The API key whose request made this step (a delete); null otherwise. */
  key_id: string | null;
}

export interface NetworkLeasesTable {
  /** The node whose host the block is on; '' only on rows from before nodes, until a node takes them. */
  node_id: string;
  /** Index of the instance's /30 block within the node's address pool. */
  slot: number;
  instance_id: string;
  created_at: string;
}

export interface ServedFilesTable {
  instance_id: string;
  /** sha256 (hex) of the path's bytes in the guest. */
  path_key: string;
}

/** Quotas an operator set for one organization; null means the configured default. */
export interface OrgQuotasTable {
  organization_id: string;
  instances: number | null;
  memory_mb: number | null;
  vcpus: number | null;
  disk_mb: number | null;
  concurrent_commands: number | null;
  commands_per_minute: number | null;
  snapshots: number | null;
  updated_at: string;
}

/** One state-changing request (or MCP tool call); see core/audit-schema.ts for the fields. */
export interface AuditEventsTable {
  /** UUID version 7: sorts by arrival. */
  id: string;
  organization_id: string;
  at: string;
  duration_ms: number;
  request_id: string;
  key_id: string;
  client_address: string;
  via: string;
  method: string;
  route: string;
  action: string;
  tool: string | null;
  profile_id: string | null;
  room_id: string | null;
  instance_id: string | null;
  command_id: string | null;
  command: string | null;
  exit_code: number | null;
  /** Why the command ended (its end_reason), when the request waited for it. */
  end_reason: string | null;
  /** JSON of AuditFilesChanged. */
  files_changed: string | null;
  file_path: string | null;
  signal: string | null;
  target_key_id: string | null;
  status: number;
  decision: string;
  error: string | null;
  /** JSON of AuditEgress: an egress decision's name, address, port, rule and count. */
  egress: string | null;
}

export interface Database {
  organizations: OrganizationsTable;
  api_keys: ApiKeysTable;
  profiles: ProfilesTable;
  instances: InstancesTable;
  instance_metadata: InstanceMetadataTable;
  instance_events: InstanceEventsTable;
  network_leases: NetworkLeasesTable;
  commands: CommandsTable;
  served_files: ServedFilesTable;
  org_quotas: OrgQuotasTable;
  audit_events: AuditEventsTable;
  snapshots: SnapshotsTable;
  nodes: NodesTable;
  idempotency_keys: IdempotencyKeysTable;
  console_sessions: ConsoleSessionsTable;
  operator_console_sessions: OperatorConsoleSessionsTable;
  rate_limit_counters: RateLimitCountersTable;
  templates: TemplatesTable;
  template_builds: TemplateBuildsTable;
  template_layers: TemplateLayersTable;
}

/** A request rate limit's count for one key in its current window (store/rate-limit-counters.ts). */
export interface RateLimitCountersTable {
  /** The limit's name and the key it counts by (an API key's id, an address…). */
  key: string;
  count: number;
  /** When the window ends, Unix ms (a bigint: PostgreSQL answers it as a string). */
  window_ends_at: number | string;
}

/** A template of an organization (core/templates.ts): a name, its latest build and the last that succeeded. */
export interface TemplatesTable {
  id: string;
  organization_id: string;
  name: string;
  /** The latest build: the template's state is its state. */
  build_id: string;
  /** The last build that succeeded, whose image new instances get; null until one has. */
  ready_build_id: string | null;
  created_at: string;
  updated_at: string;
  deleted_at: string | null;
}

/** One build of a template: its Dockerfile, log and outcome. */
export interface TemplateBuildsTable {
  id: string;
  template_id: string;
  organization_id: string;
  state: 'building' | 'ready' | 'failed';
  reason: string | null;
  dockerfile: string;
  /** The build's output, as GET …/logs gives it (written at each step and at the end). */
  log: string;
  steps: number;
  cached_steps: number;
  /** JSON of TemplateImage (core/template-image.ts) once ready. */
  result: string | null;
  /** The node that runs the build and holds its layers. */
  node_id: string;
  created_at: string;
  finished_at: string | null;
}

/** A step's result kept for later builds: a runtime snapshot of the build instance's files, by cache key. */
export interface TemplateLayersTable {
  organization_id: string;
  key: string;
  /** The runtime's snapshot id of the files. */
  layer_id: string;
  /** The image its files sit on (`debian:<suite>`). */
  base_image: string;
  disk_bytes: number;
  node_id: string;
  created_at: string;
}

/** A request made with an Idempotency-Key (core/idempotency.ts): one row per organization and key. */
export interface IdempotencyKeysTable {
  organization_id: string;
  key: string;
  /** SHA-256 (hex) of the request's method, path and body: a reuse with another request is refused. */
  fingerprint: string;
  /** `running` while the first request is answered; `done` once its answer is kept. */
  state: 'running' | 'done';
  /** The kept answer's HTTP status and JSON body; null while running. */
  status: number | null;
  body: string | null;
  /** The node whose request holds the key while it runs. */
  owner: string;
  created_at: string;
  /** When the key may be used again for anything (created_at + ROOMKIT_IDEMPOTENCY_KEY_TTL_S). */
  expires_at: string;
}

/** A web console sign-in (core/console-sessions.ts); the session id itself is never stored. */
/** A console session of the operator (core/console-sessions.ts); no key, no organization. */
export interface OperatorConsoleSessionsTable {
  /** SHA-256 of the session id, hex. */
  id_hash: string;
  /** SHA-256 of the operator token it was made with, hex: a session of another token is over. */
  token_hash: string;
  created_at: string;
  expires_at: string;
}

export interface ConsoleSessionsTable {
  /** SHA-256 of the session id, hex. */
  id_hash: string;
  key_id: string;
  organization_id: string;
  created_at: string;
  expires_at: string;
}

/** A roomkit process sharing the store (cluster/node-registry.ts); capacity and load are JSON. */
export interface NodesTable {
  id: string;
  url: string;
  state: string;
  version: string;
  started_at: string;
  heartbeat_at: string;
  lost_at: string | null;
  lost_by: string | null;
  capacity: string;
  load: string;
}

export type OrganizationRow = Selectable<OrganizationsTable>;
export type ApiKeyRow = Selectable<ApiKeysTable>;
export type ProfileRow = Selectable<ProfilesTable>;
export type InstanceRow = Selectable<InstancesTable>;
export type NewInstanceRow = Insertable<InstancesTable>;
export type InstanceUpdate = Updateable<InstancesTable>;
export type InstanceEventRow = Selectable<InstanceEventsTable>;
export type CommandRow = Selectable<CommandsTable>;
export type AuditEventRow = Selectable<AuditEventsTable>;
export type SnapshotRow = Selectable<SnapshotsTable>;
export type NodeRow = Selectable<NodesTable>;
