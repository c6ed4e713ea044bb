// Writable layers made ahead of creates (runtimes/gvisor/layer-slots.ts): none before a
// create says what size to keep, then a formatted layer of that size moved into place;
// another size is not handed out (and becomes the size kept ready), and close() leaves
// nothing behind.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import pino from 'pino';
import { LayerSlots } from '../../src/runtimes/gvisor/layer-slots.ts';

const hasMkfs = spawnSync('mkfs.ext4', ['-V']).error === undefined;
const dir = mkdtempSync(join(tmpdir(), 'roomkit-layer-slots-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** Whether `path` holds an ext4 file system: its superblock's magic number at byte 1080. */
function isExt4(path: string): boolean {
  return readFileSync(path).readUInt16LE(1080) === 0xef53;
}

describe('writable layers made ahead', { skip: hasMkfs ? false : 'no mkfs.ext4 on this machine' }, () => {
  it('keeps layers of the size the last create asked for, and moves one into place', async () => {
    const slots = new LayerSlots({ dir: join(dir, 'slots'), size: 2, log: pino({ level: 'silent' }) });
    slots.removeLeftovers();
    // Nothing is made before a create says which size.
    await slots.fill();
    assert.equal(slots.available, 0);
    assert.equal(slots.take(16, join(dir, 'first.img')), false);
    await slots.fill();
    assert.equal(slots.available, 2);

    const target = join(dir, 'second.img');
    assert.equal(slots.take(16, target), true);
    assert.equal(statSync(target).size, 16 * 1024 * 1024);
    assert.ok(isExt4(target));
    assert.equal(slots.available, 1);

    // Another size is not handed out, and the other size's layers are dropped for it.
    assert.equal(slots.take(20, join(dir, 'third.img')), false);
    assert.equal(existsSync(join(dir, 'third.img')), false);
    assert.equal(slots.available, 0);
    await slots.fill();
    assert.equal(slots.available, 2);

    await slots.close();
    assert.deepEqual(readdirSync(join(dir, 'slots')), []);
    assert.equal(slots.available, 0);
  });
});
