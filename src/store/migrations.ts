// Schema migrations, applied in name order at every start (already applied ones are
// skipped). Only portable SQL: the same migrations must run on SQLite and PostgreSQL.
import { type Kysely, sql } from 'kysely';
import type { Migration, MigrationProvider } from 'kysely/migration';

const migrations: Record<string, Migration> = {
  '0001_initial': {
    async up(db: Kysely<any>) {
      await db.schema
        .createTable('organizations')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('name', 'text', (c) => c.notNull().unique())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .execute();

      await db.schema
        .createTable('api_keys')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('organization_id', 'text', (c) => c.notNull().references('organizations.id'))
        .addColumn('env', 'text', (c) => c.notNull())
        .addColumn('name', 'text')
        .addColumn('prefix', 'text', (c) => c.notNull())
        .addColumn('hash', 'text', (c) => c.notNull().unique())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('last_used_at', 'text')
        .addColumn('revoked_at', 'text')
        .execute();
      await db.schema.createIndex('api_keys_prefix').on('api_keys').column('prefix').execute();
      await db.schema.createIndex('api_keys_org').on('api_keys').column('organization_id').execute();

      await db.schema
        .createTable('profiles')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('organization_id', 'text', (c) => c.notNull().references('organizations.id'))
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('spec', 'text', (c) => c.notNull())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('updated_at', 'text', (c) => c.notNull())
        .addColumn('deleted_at', 'text')
        .execute();
      // Profiles are deleted softly (instances keep pointing at theirs), so a name is
      // unique only among the ones not deleted.
      await db.schema
        .createIndex('profiles_org_name')
        .on('profiles')
        .columns(['organization_id', 'name'])
        .unique()
        .where(sql.ref('deleted_at'), 'is', null)
        .execute();

      await db.schema
        .createTable('instances')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('organization_id', 'text', (c) => c.notNull().references('organizations.id'))
        .addColumn('profile_id', 'text', (c) => c.notNull().references('profiles.id'))
        .addColumn('room_id', 'text', (c) => c.notNull())
        .addColumn('state', 'text', (c) => c.notNull())
        .addColumn('failure_reason', 'text')
        .addColumn('runtime', 'text', (c) => c.notNull())
        .addColumn('resources', 'text', (c) => c.notNull())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('updated_at', 'text', (c) => c.notNull())
        .addColumn('deleted_at', 'text')
        .execute();
      // The database itself guarantees one live instance per room, whatever races the
      // service has: a second insert for the same room fails on this index.
      await db.schema
        .createIndex('instances_one_live_per_room')
        .on('instances')
        .columns(['organization_id', 'profile_id', 'room_id'])
        .unique()
        .where(sql.ref('state'), 'not in', ['stopped', 'failed'])
        .execute();
      await db.schema
        .createIndex('instances_room')
        .on('instances')
        .columns(['organization_id', 'profile_id', 'room_id', 'created_at'])
        .execute();
      await db.schema
        .createIndex('instances_org_created')
        .on('instances')
        .columns(['organization_id', 'created_at', 'id'])
        .execute();

      await db.schema
        .createTable('instance_events')
        .addColumn('instance_id', 'text', (c) => c.notNull().references('instances.id'))
        .addColumn('seq', 'integer', (c) => c.notNull())
        .addColumn('state', 'text', (c) => c.notNull())
        .addColumn('at', 'text', (c) => c.notNull())
        .addColumn('reason', 'text')
        .addPrimaryKeyConstraint('instance_events_pk', ['instance_id', 'seq'])
        .execute();
    },
  },
  '0002_network_leases': {
    async up(db: Kysely<any>) {
      // One row per address block handed to an instance; the primary key makes a
      // block impossible to hand out twice.
      await db.schema
        .createTable('network_leases')
        .addColumn('slot', 'integer', (c) => c.primaryKey())
        .addColumn('instance_id', 'text', (c) => c.notNull().unique())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .execute();
    },
  },
  '0003_instance_expiry': {
    async up(db: Kysely<any>) {
      // What the idle and lifetime limits are measured against; the limits themselves are
      // copied from the profile at creation, like the resources.
      await db.schema.alterTable('instances').addColumn('last_active_at', 'text').execute();
      await db.schema.alterTable('instances').addColumn('idle_timeout_s', 'integer', (c) => c.notNull().defaultTo(0)).execute();
      await db.schema.alterTable('instances').addColumn('max_lifetime_s', 'integer', (c) => c.notNull().defaultTo(0)).execute();
    },
  },
  '0004_instance_progress': {
    async up(db: Kysely<any>) {
      // What a long step is doing right now (e.g. building the image), for callers that poll.
      await db.schema.alterTable('instances').addColumn('progress', 'text').execute();
    },
  },
  '0005_commands': {
    async up(db: Kysely<any>) {
      // What an instance was made from (home, env, time limit...): a later profile edit
      // must not change how its commands run.
      await db.schema.alterTable('instances').addColumn('spec', 'text').execute();
      await db.schema
        .createTable('commands')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('organization_id', 'text', (c) => c.notNull())
        .addColumn('instance_id', 'text', (c) => c.notNull().references('instances.id'))
        .addColumn('profile_id', 'text', (c) => c.notNull())
        .addColumn('room_id', 'text', (c) => c.notNull())
        .addColumn('command', 'text', (c) => c.notNull())
        .addColumn('state', 'text', (c) => c.notNull())
        .addColumn('exit_code', 'integer')
        .addColumn('output_bytes', 'integer')
        .addColumn('files_changed', 'integer')
        .addColumn('started_at', 'text', (c) => c.notNull())
        .addColumn('finished_at', 'text')
        .addColumn('duration_ms', 'integer')
        .execute();
      await db.schema
        .createIndex('commands_room')
        .on('commands')
        .columns(['organization_id', 'profile_id', 'room_id', 'started_at', 'id'])
        .execute();
    },
  },
  '0006_command_background': {
    async up(db: Kysely<any>) {
      // Whether the request waited for the command (0) or started it in the background (1).
      await db.schema.alterTable('commands').addColumn('background', 'integer', (c) => c.notNull().defaultTo(0)).execute();
    },
  },
  '0007_served_files': {
    async up(db: Kysely<any>) {
      // Files a command listed as created or modified, per live instance: what a profile
      // with raw_files `changed` serves publicly. Keyed by a hash of the path's bytes.
      await db.schema
        .createTable('served_files')
        .addColumn('instance_id', 'text', (c) => c.notNull().references('instances.id'))
        .addColumn('path_key', 'text', (c) => c.notNull())
        .addPrimaryKeyConstraint('served_files_pk', ['instance_id', 'path_key'])
        .execute();
    },
  },
  '0008_org_quotas': {
    async up(db: Kysely<any>) {
      // The quotas an operator set for one organization; a null column (or no row)
      // means the configured default.
      await db.schema
        .createTable('org_quotas')
        .addColumn('organization_id', 'text', (c) => c.primaryKey().references('organizations.id'))
        .addColumn('instances', 'integer')
        .addColumn('memory_mb', 'integer')
        .addColumn('vcpus', 'integer')
        .addColumn('disk_mb', 'integer')
        .addColumn('concurrent_commands', 'integer')
        .addColumn('commands_per_minute', 'integer')
        .addColumn('updated_at', 'text', (c) => c.notNull())
        .execute();
      // The commands-per-minute quota counts an organization's commands of the last minute.
      await db.schema.createIndex('commands_org_started').on('commands').columns(['organization_id', 'started_at']).execute();
    },
  },
  '0009_audit_events': {
    async up(db: Kysely<any>) {
      // The audit trail: one row per state-changing request, only ever inserted (and
      // deleted past the retention). No foreign keys: a record outlives what it names.
      await db.schema
        .createTable('audit_events')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('organization_id', 'text', (c) => c.notNull())
        .addColumn('at', 'text', (c) => c.notNull())
        .addColumn('duration_ms', 'integer', (c) => c.notNull())
        .addColumn('request_id', 'text', (c) => c.notNull())
        .addColumn('key_id', 'text', (c) => c.notNull())
        .addColumn('client_address', 'text', (c) => c.notNull())
        .addColumn('via', 'text', (c) => c.notNull())
        .addColumn('method', 'text', (c) => c.notNull())
        .addColumn('route', 'text', (c) => c.notNull())
        .addColumn('action', 'text', (c) => c.notNull())
        .addColumn('tool', 'text')
        .addColumn('profile_id', 'text')
        .addColumn('room_id', 'text')
        .addColumn('instance_id', 'text')
        .addColumn('command_id', 'text')
        .addColumn('command', 'text')
        .addColumn('exit_code', 'integer')
        .addColumn('files_changed', 'text')
        .addColumn('file_path', 'text')
        .addColumn('signal', 'text')
        .addColumn('target_key_id', 'text')
        .addColumn('status', 'integer', (c) => c.notNull())
        .addColumn('decision', 'text', (c) => c.notNull())
        .addColumn('error', 'text')
        .execute();
      await db.schema.createIndex('audit_events_org_at').on('audit_events').columns(['organization_id', 'at', 'id']).execute();
      await db.schema.createIndex('audit_events_at').on('audit_events').column('at').execute();
    },
  },
  '0010_end_reasons': {
    async up(db: Kysely<any>) {
      // Why an instance stopped or failed, and why a command ended, as codes beside the
      // words; rows written before this have none.
      await db.schema.alterTable('instance_events').addColumn('reason_code', 'text').execute();
      await db.schema.alterTable('instance_events').addColumn('key_id', 'text').execute();
      await db.schema.alterTable('commands').addColumn('end_reason', 'text').execute();
    },
  },
  '0011_warm_pools': {
    async up(db: Kysely<any>) {
      // Instances a profile keeps booted before any room asks: the profile version they
      // were made from while they wait, and when a room took one.
      await db.schema.alterTable('instances').addColumn('warm_pool_key', 'text').execute();
      await db.schema.alterTable('instances').addColumn('claimed_at', 'text').execute();
      await db.schema
        .createIndex('instances_warm_pool')
        .on('instances')
        .columns(['profile_id', 'warm_pool_key'])
        .where(sql.ref('warm_pool_key'), 'is not', null)
        .execute();
    },
  },
  '0012_pause': {
    async up(db: Kysely<any>) {
      // Paused instances: since when, what the pause kept, and how long they are kept.
      await db.schema.alterTable('instances').addColumn('paused_at', 'text').execute();
      await db.schema.alterTable('instances').addColumn('paused_memory_kept', 'integer').execute();
      await db.schema.alterTable('instances').addColumn('paused_retention_s', 'integer', (c) => c.notNull().defaultTo(0)).execute();
    },
  },
  '0013_snapshots': {
    async up(db: Kysely<any>) {
      // Saved file systems of instances, owned by the organization; the instance a
      // snapshot started; and the organization's quota of them.
      await db.schema
        .createTable('snapshots')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('organization_id', 'text', (c) => c.notNull().references('organizations.id'))
        .addColumn('name', 'text')
        .addColumn('state', 'text', (c) => c.notNull())
        .addColumn('source_instance_id', 'text', (c) => c.notNull())
        .addColumn('profile_id', 'text', (c) => c.notNull())
        .addColumn('room_id', 'text', (c) => c.notNull())
        .addColumn('runtime', 'text', (c) => c.notNull())
        .addColumn('spec', 'text', (c) => c.notNull())
        .addColumn('memory_kept', 'integer', (c) => c.notNull())
        .addColumn('disk_bytes', 'integer', (c) => c.notNull())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('deleted_at', 'text')
        .execute();
      await db.schema.createIndex('snapshots_org_created').on('snapshots').columns(['organization_id', 'created_at']).execute();
      await db.schema.alterTable('instances').addColumn('snapshot_id', 'text').execute();
      await db.schema.alterTable('org_quotas').addColumn('snapshots', 'integer').execute();
    },
  },
  '0014_instance_options': {
    async up(db: Kysely<any>) {
      // What a create asked beyond its profile: environment variables for its commands, a
      // deadline (timeout_s, moved by keep-alives), and labels, a row per key so that the
      // list can filter by them with plain SQL.
      await db.schema.alterTable('instances').addColumn('env', 'text').execute();
      await db.schema.alterTable('instances').addColumn('timeout_s', 'integer', (c) => c.notNull().defaultTo(0)).execute();
      await db.schema.alterTable('instances').addColumn('expires_at', 'text').execute();
      await db.schema
        .createTable('instance_metadata')
        .addColumn('instance_id', 'text', (c) => c.notNull().references('instances.id'))
        .addColumn('key', 'text', (c) => c.notNull())
        .addColumn('value', 'text', (c) => c.notNull())
        .addPrimaryKeyConstraint('instance_metadata_pk', ['instance_id', 'key'])
        .execute();
      await db.schema.createIndex('instance_metadata_key_value').on('instance_metadata').columns(['key', 'value']).execute();
    },
  },
  '0015_timeout_action': {
    async up(db: Kysely<any>) {
      // What an instance's deadline does when it passes, when its create said (E2B's
      // onTimeout); null: its profile's idle_action.
      await db.schema.alterTable('instances').addColumn('timeout_action', 'text').execute();
    },
  },
  '0016_nodes': {
    async up(db: Kysely<any>) {
      // The roomkit processes that share a PostgreSQL store (cluster/node-registry.ts):
      // each heartbeats its row; one that goes silent is declared lost by another.
      await db.schema
        .createTable('nodes')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('url', 'text', (c) => c.notNull())
        .addColumn('state', 'text', (c) => c.notNull())
        .addColumn('version', 'text', (c) => c.notNull())
        .addColumn('started_at', 'text', (c) => c.notNull())
        .addColumn('heartbeat_at', 'text', (c) => c.notNull())
        .addColumn('lost_at', 'text')
        .addColumn('lost_by', 'text')
        .addColumn('capacity', 'text', (c) => c.notNull())
        .addColumn('load', 'text', (c) => c.notNull())
        .execute();
    },
  },
  '0018_idempotency_keys': {
    async up(db: Kysely<any>) {
      // Requests made with an Idempotency-Key (core/idempotency.ts): the key is the
      // primary key per organization, so of two requests racing with one key (on one
      // node or two) exactly one inserts its row and runs; the other reads the row.
      await db.schema
        .createTable('idempotency_keys')
        .addColumn('organization_id', 'text', (c) => c.notNull().references('organizations.id'))
        .addColumn('key', 'text', (c) => c.notNull())
        .addColumn('fingerprint', 'text', (c) => c.notNull())
        .addColumn('state', 'text', (c) => c.notNull())
        .addColumn('status', 'integer')
        .addColumn('body', 'text')
        .addColumn('owner', 'text', (c) => c.notNull())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('expires_at', 'text', (c) => c.notNull())
        .addPrimaryKeyConstraint('idempotency_keys_pk', ['organization_id', 'key'])
        .execute();
      await db.schema.createIndex('idempotency_keys_expires').on('idempotency_keys').column('expires_at').execute();
      // Why a command the request waited for ended (no_output, time_limit, …), beside its exit code.
      await db.schema.alterTable('audit_events').addColumn('end_reason', 'text').execute();
    },
  },
  '0019_console_sessions': {
    async up(db: Kysely<any>) {
      // The web console's sign-ins (core/console-sessions.ts): the hash of each session's
      // id, the key it was made with (a revoked key ends it), and when it ends.
      await db.schema
        .createTable('console_sessions')
        .addColumn('id_hash', 'text', (c) => c.primaryKey())
        .addColumn('key_id', 'text', (c) => c.notNull().references('api_keys.id'))
        .addColumn('organization_id', 'text', (c) => c.notNull())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('expires_at', 'text', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('console_sessions_expires_at').on('console_sessions').column('expires_at').execute();
    },
  },
  '0020_instance_nodes': {
    async up(db: Kysely<any>) {
      // The node whose host runs an instance, or holds a snapshot's files: each node
      // reconciles, expires, admits and pools only its own. Rows made before nodes
      // existed are claimed by the first node that starts (cluster/unowned-rows.ts).
      await db.schema.alterTable('instances').addColumn('node_id', 'text').execute();
      await db.schema.createIndex('instances_node_state').on('instances').columns(['node_id', 'state']).execute();
      await db.schema.alterTable('snapshots').addColumn('node_id', 'text').execute();
      // A `lost` instance (its node was declared lost) frees its room, as a failed one does.
      await db.schema.dropIndex('instances_one_live_per_room').execute();
      await db.schema
        .createIndex('instances_one_live_per_room')
        .on('instances')
        .columns(['organization_id', 'profile_id', 'room_id'])
        .unique()
        .where(sql.ref('state'), 'not in', ['stopped', 'failed', 'lost'])
        .execute();
      // Address blocks are a host's: each node hands out its own, from its own range
      // (network/pool.ts), so a lease is keyed by node and block. Leases from before
      // nodes get an empty node, which the first node to start takes.
      await db.schema
        .createTable('node_network_leases')
        .addColumn('node_id', 'text', (c) => c.notNull())
        .addColumn('slot', 'integer', (c) => c.notNull())
        .addColumn('instance_id', 'text', (c) => c.notNull().unique())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addPrimaryKeyConstraint('node_network_leases_pk', ['node_id', 'slot'])
        .execute();
      await db
        .insertInto('node_network_leases')
        .columns(['node_id', 'slot', 'instance_id', 'created_at'])
        .expression(db.selectFrom('network_leases').select([sql.lit('').as('node_id'), 'slot', 'instance_id', 'created_at']))
        .execute();
      await db.schema.dropTable('network_leases').execute();
      await db.schema.alterTable('node_network_leases').renameTo('network_leases').execute();
    },
  },
  '0021_templates': {
    async up(db: Kysely<any>) {
      // Templates built from Dockerfiles (core/templates.ts): a name of an organization,
      // its builds, and the layers builds leave (a runtime snapshot of the build
      // instance's files after a step, found again by the step's cache key).
      await db.schema
        .createTable('templates')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('organization_id', 'text', (c) => c.notNull().references('organizations.id'))
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('build_id', 'text', (c) => c.notNull())
        .addColumn('ready_build_id', 'text')
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('updated_at', 'text', (c) => c.notNull())
        .addColumn('deleted_at', 'text')
        .execute();
      await db.schema
        .createIndex('templates_one_name')
        .on('templates')
        .columns(['organization_id', 'name'])
        .unique()
        .where(sql.ref('deleted_at'), 'is', null)
        .execute();
      await db.schema
        .createTable('template_builds')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('template_id', 'text', (c) => c.notNull())
        .addColumn('organization_id', 'text', (c) => c.notNull())
        .addColumn('state', 'text', (c) => c.notNull())
        .addColumn('reason', 'text')
        .addColumn('dockerfile', 'text', (c) => c.notNull())
        .addColumn('log', 'text', (c) => c.notNull())
        .addColumn('steps', 'integer', (c) => c.notNull())
        .addColumn('cached_steps', 'integer', (c) => c.notNull())
        .addColumn('result', 'text')
        .addColumn('node_id', 'text', (c) => c.notNull())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('finished_at', 'text')
        .execute();
      await db.schema.createIndex('template_builds_template').on('template_builds').columns(['template_id', 'created_at']).execute();
      await db.schema
        .createTable('template_layers')
        .addColumn('organization_id', 'text', (c) => c.notNull())
        .addColumn('key', 'text', (c) => c.notNull())
        .addColumn('layer_id', 'text', (c) => c.notNull().unique())
        .addColumn('base_image', 'text', (c) => c.notNull())
        .addColumn('disk_bytes', 'integer', (c) => c.notNull())
        .addColumn('node_id', 'text', (c) => c.notNull())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addPrimaryKeyConstraint('template_layers_pk', ['organization_id', 'key'])
        .execute();
    },
  },
  '0022_audit_egress': {
    async up(db: Kysely<any>) {
      // Egress decisions of allowlisted instances (network/egress/) are audit records too.
      await db.schema.alterTable('audit_events').addColumn('egress', 'text').execute();
    },
  },
  '0024_operator_console_sessions': {
    async up(db: Kysely<any>) {
      // The web console's operator sign-ins (core/console-sessions.ts): the hash of each
      // session's id, a hash of the operator token it was made with (a changed token
      // ends it), and when it ends.
      await db.schema
        .createTable('operator_console_sessions')
        .addColumn('id_hash', 'text', (c) => c.primaryKey())
        .addColumn('token_hash', 'text', (c) => c.notNull())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('expires_at', 'text', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('operator_console_sessions_expires_at').on('operator_console_sessions').column('expires_at').execute();
    },
  },
  '0025_rate_limit_counters': {
    // Request rate-limit counters that nodes of a shared store count together
    // (store/rate-limit-counters.ts): one row per limit and key, for the current window.
    async up(db: Kysely<any>) {
      await db.schema
        .createTable('rate_limit_counters')
        .addColumn('key', 'text', (c) => c.primaryKey())
        .addColumn('count', 'integer', (c) => c.notNull())
        .addColumn('window_ends_at', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('rate_limit_counters_window').on('rate_limit_counters').column('window_ends_at').execute();
    },
  },
};

export const migrationProvider: MigrationProvider = {
  async getMigrations() {
    return migrations;
  },
};
