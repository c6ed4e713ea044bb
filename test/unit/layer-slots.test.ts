// Instance directories made ahead of creates (runtimes/gvisor/layer-slots.ts): none
// before a create says what size to keep, then a directory with a formatted layer of
// that size, mounted where an instance's layer goes, renamed into place; another size is
// not handed out (and becomes the size kept ready), and close() unmounts and removes
// everything. The mounts are recorded here rather than made (no root needed).
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
  it('keeps directories with layers of the size the last create asked for, mounted, and renames one into place', async () => {
    const mounted: string[] = [];
    const unmounted: string[] = [];
    const slots = new LayerSlots({
      dir: join(dir, 'slots'),
      size: 2,
      log: pino({ level: 'silent' }),
      mountLayer: async (image, mountPoint, sizeMb) => {
        assert.ok(isExt4(image), `${image} is mounted before it is formatted`);
        assert.equal(sizeMb, statSync(image).size / 1024 / 1024);
        mounted.push(mountPoint);
      },
      unmountUnder: async (d) => void unmounted.push(d),
    });
    await slots.removeLeftovers();
    // Nothing is made before a create says which size.
    await slots.fill();
    assert.equal(slots.available, 0);
    assert.equal(slots.take(16, join(dir, 'first')), false);
    assert.equal(existsSync(join(dir, 'first')), false);
    await slots.fill();
    assert.equal(slots.available, 2);
    assert.equal(mounted.length, 2);

    const target = join(dir, 'second');
    assert.equal(slots.take(16, target), true);
    // Laid out as an instance's directory: disk.img, and layer/ where it was mounted.
    assert.equal(statSync(join(target, 'disk.img')).size, 16 * 1024 * 1024);
    assert.ok(isExt4(join(target, 'disk.img')));
    assert.ok(statSync(join(target, 'layer')).isDirectory());
    assert.ok(mounted.every((m) => m.endsWith('/layer')), mounted.join(', '));
    assert.equal(slots.available, 1);

    // A target that is there already takes nothing, and the directory stays ready.
    assert.equal(slots.take(16, target), false);
    assert.equal(slots.available, 1);

    // Another size is not handed out, and the other size's directories are dropped for it.
    assert.equal(slots.take(20, join(dir, 'third')), false);
    assert.equal(existsSync(join(dir, 'third')), false);
    assert.equal(slots.available, 0);
    await slots.fill();
    assert.equal(slots.available, 2);

    await slots.close();
    assert.deepEqual(readdirSync(join(dir, 'slots')), []);
    assert.equal(slots.available, 0);
    // Each directory is unmounted before it is removed: the dropped one, then the whole of them.
    assert.ok(unmounted.includes(join(dir, 'slots')), unmounted.join(', '));
    assert.ok(unmounted.length >= 3, unmounted.join(', '));
  });
});
