import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { newInstanceRow } from '../../src/core/instance-records.ts';
import { decodeEnv, decodeInstance, decodeResources, decodeSpec, encodeInstance, StoredShapeError } from '../../src/core/stored-json.ts';
import { PROFILE_DEFAULTS, type ProfileSpec } from '../../src/core/profile-schema.ts';

const SPEC: ProfileSpec = {
  image: 'debian:bookworm',
  packages: [],
  memory_mb: 512,
  vcpus: 1,
  disk_mb: 1024,
  user: 'user',
  home: '/home/user',
  env: {},
  command_timeout_s: 60,
  command_idle_output_timeout_s: 5,
  idle_timeout_s: 0,
  idle_action: 'stop',
  paused_retention_s: 3600,
  max_lifetime_s: 0,
  network: { egress: 'none', allow: [], deny: [] },
  settings: {},
  raw_files: 'all',
  warm_pool: 0,
  keep_undo: false,
};

describe('stored JSON columns', () => {
  it('gives a spec stored before later fields existed their defaults', () => {
    const { raw_files: _r, warm_pool: _w, keep_undo: _k, idle_action: _i, paused_retention_s: _p, command_idle_output_timeout_s: _o, ...old } = SPEC;
    const spec = decodeSpec(JSON.stringify(old), 'profile p');
    assert.equal(spec.idle_action, PROFILE_DEFAULTS.idle_action);
    assert.equal(spec.command_idle_output_timeout_s, 0);
    assert.equal(spec.paused_retention_s, PROFILE_DEFAULTS.paused_retention_s);
    assert.equal(spec.keep_undo, false);
    assert.equal(spec.memory_mb, 512);
  });

  it('reads a spec beyond this host\'s bounds as it was stored', () => {
    assert.equal(decodeSpec(JSON.stringify({ ...SPEC, memory_mb: 10_000_000 }), 'profile p').memory_mb, 10_000_000);
  });

  it('refuses a spec, resources or env of another shape, naming the row, the column and the field', () => {
    assert.throws(() => decodeSpec(JSON.stringify({ ...SPEC, memory_mb: 'lots' }), 'instance i-1'), (err: unknown) => {
      assert.ok(err instanceof StoredShapeError);
      assert.match(err.message, /^instance i-1 has a spec in the store that does not match its schema: \/memory_mb /);
      return true;
    });
    assert.throws(() => decodeSpec('[1]', 'profile p'), /profile p has a spec .*not an object/);
    assert.throws(() => decodeResources('{"memory_mb":512,"vcpus":1}', 'instance i-2'), /instance i-2 has a resources .*disk_mb/);
    assert.throws(() => decodeResources('{not json', 'instance i-3'), /instance i-3 has a resources .*not JSON/);
    assert.throws(() => decodeEnv('{"A":1}', 'instance i-4'), /instance i-4 has a env .*\/A/);
    assert.deepEqual(decodeEnv('{"A":"1"}', 'instance i-4'), { A: '1' });
  });

  it('gives back the record an instance row was encoded from', () => {
    const record = newInstanceRow({ organizationId: 'o', profileId: 'p', roomId: 'r', runtime: 'fake', spec: SPEC, nodeId: 'n' });
    const row = encodeInstance(record);
    assert.equal(typeof row.spec, 'string');
    assert.equal(typeof row.resources, 'string');
    assert.deepEqual(decodeInstance(row), record);
    assert.deepEqual(record.resources, { memory_mb: 512, vcpus: 1, disk_mb: 1024 });
    assert.equal(decodeInstance({ ...row, spec: null }).spec, null);
  });
});
