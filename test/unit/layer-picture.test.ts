// The picture of a writable layer that fanotify keeps up to date (layer-picture.ts) must
// give the lists the walk gives: for random layers changed at random, the changes since
// a mark, applied as change-watch.c reports them (a reset of each touched path, then the
// path and what is below it as it is now), equal diffLayers over the two whole listings.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { diffLayers, Listing, type LowerIndex } from '../../src/runtimes/layer-changes/changes.ts';
import { LayerPicture, type WatchRecord } from '../../src/runtimes/layer-changes/layer-picture.ts';

/** A small deterministic random source, so that a failure repeats. */
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state * 1664525 + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
}

const NAMES = ['a', 'b', 'c'];
const lower: LowerIndex = new Map([
  ['etc', { type: 'd', size: 0 }],
  ['etc/a', { type: 'f', size: 10 }],
  ['etc/b', { type: 'f', size: 20 }],
  ['etc/c', { type: 'd', size: 0 }],
  ['etc/c/a', { type: 'f', size: 30 }],
  ['home', { type: 'd', size: 0 }],
]);

let clock = 1;
const file = (size: number, ino: number) => `f 644 ${size} ${clock++} ${clock} ${ino} -`;
const dir = (opaque = false) => `d 755 4096 ${clock++} ${clock} ${clock} ${opaque ? 'O' : '-'}`;

/** A random change to a listing: files written, created, removed, whiteouts, opaque directories, renames. */
function mutate(listing: Listing, rnd: () => number): Listing {
  const next = new Listing();
  for (const [k, v] of listing) next.set(k, v);
  const parent = ['etc', 'home', 'etc/c', 'home/c'][Math.floor(rnd() * 4)]!;
  const path = `${parent}/${NAMES[Math.floor(rnd() * NAMES.length)]!}`;
  const ensureParents = (p: string) => {
    const parts = p.split('/');
    for (let i = 1; i < parts.length; i++) {
      const up = parts.slice(0, i).join('/');
      if (!next.get(up)?.startsWith('d ')) next.set(up, dir());
    }
  };
  const removeBelow = (p: string) => {
    for (const k of [...next.keys()]) if (k.startsWith(`${p}/`)) next.delete(k);
  };
  switch (Math.floor(rnd() * 6)) {
    case 0: // write (create or modify)
      ensureParents(path);
      removeBelow(path);
      next.set(path, file(Math.floor(rnd() * 100), Math.floor(rnd() * 1000)));
      break;
    case 1: // delete: a whiteout where the image has something, else gone
      removeBelow(path);
      if (lower.has(path)) next.set(path, 'w 0 0 1 1 5 -');
      else next.delete(path);
      break;
    case 2: // an opaque directory over whatever was there
      ensureParents(path);
      removeBelow(path);
      next.set(path, dir(true));
      break;
    case 3: // a plain directory with a file in it
      ensureParents(path);
      if (!next.get(path)?.startsWith('d ')) next.set(path, dir());
      next.set(`${path}/a`, file(5, Math.floor(rnd() * 1000)));
      break;
    case 4: { // rename a subtree elsewhere
      const to = `home/${NAMES[Math.floor(rnd() * NAMES.length)]!}`;
      if (!next.has(path) || to === path || path.startsWith(`${to}/`) || to.startsWith(`${path}/`)) break;
      removeBelow(to);
      ensureParents(to);
      for (const [k, v] of [...next]) if (k === path || k.startsWith(`${path}/`)) next.set(to + k.slice(path.length), v);
      removeBelow(path);
      next.delete(path);
      break;
    }
    case 5: // chmod: the header changes, nothing else
      if (next.get(path)?.startsWith('f ')) next.set(path, next.get(path)!.replace('644', '600'));
      break;
  }
  return next;
}

/** What change-watch.c reports for the paths that differ between two listings. */
function report(was: Listing, now: Listing): WatchRecord[] {
  const touched = new Set<string>();
  for (const [k, v] of now) if (was.get(k) !== v) touched.add(k);
  for (const k of was.keys()) if (!now.has(k)) touched.add(k);
  const records: WatchRecord[] = [];
  for (const path of [...touched].sort()) {
    records.push({ kind: 'reset', path });
    for (const [k, v] of now) if (k === path || k.startsWith(`${path}/`)) records.push({ kind: 'entry', path: k, header: v });
  }
  return records;
}

const shown = (changes: { path: string; status: string; size?: number }[]) => changes.map((c) => `${c.status} ${c.path} ${c.size ?? ''}`);

describe('LayerPicture', () => {
  it('lists what the walk lists, for random changes over 300 commands', () => {
    const rnd = random(12);
    const picture = new LayerPicture();
    let state = new Listing();
    for (let i = 0; i < 20; i++) state = mutate(state, rnd);
    picture.apply([{ kind: 'reset', path: '' }, ...[...state].map(([path, header]): WatchRecord => ({ kind: 'entry', path, header }))]);
    for (let command = 0; command < 300; command++) {
      const start = state;
      const mark = picture.mark();
      const steps = 1 + Math.floor(rnd() * 4);
      for (let s = 0; s < steps; s++) {
        const next = mutate(state, rnd);
        picture.apply(report(state, next));
        state = next;
      }
      const { changes, walked } = picture.changesSince(mark, lower);
      picture.release(mark);
      assert.equal(walked, undefined);
      assert.deepEqual(shown(changes), shown(diffLayers(start, state, lower)), `command ${command}`);
    }
  });

  it('gives each of several open marks the changes of its own window', () => {
    const rnd = random(7);
    const picture = new LayerPicture();
    let state = new Listing();
    const first = picture.mark();
    const atFirst = state;
    state = mutate(mutate(state, rnd), rnd);
    picture.apply(report(atFirst, state));
    const second = picture.mark();
    const atSecond = state;
    const next = mutate(mutate(state, rnd), rnd);
    picture.apply(report(state, next));
    state = next;
    assert.deepEqual(shown(picture.changesSince(second, lower).changes), shown(diffLayers(atSecond, state, lower)));
    picture.release(second);
    assert.deepEqual(shown(picture.changesSince(first, lower).changes), shown(diffLayers(atFirst, state, lower)));
    picture.release(first);
  });

  it('asks for the other names of a file that changed, and of an inode touched without a name', () => {
    const picture = new LayerPicture();
    picture.apply([
      { kind: 'entry', path: 'home', header: 'd 755 0 1 1 2 -' },
      { kind: 'entry', path: 'home/a', header: 'f 644 3 1 1 77 -' },
      { kind: 'entry', path: 'home/b', header: 'f 644 3 1 1 77 -' },
    ]);
    assert.deepEqual(picture.apply([{ kind: 'reset', path: 'home/a' }, { kind: 'entry', path: 'home/a', header: 'f 644 9 2 2 77 -' }]), ['home/b']);
    assert.deepEqual(picture.apply([{ kind: 'inode', ino: '77' }]).sort(), ['home/a', 'home/b']);
  });

  it('says a window saw a whole listing when events were lost in it', () => {
    const picture = new LayerPicture();
    const mark = picture.mark();
    picture.apply([{ kind: 'overflow', why: 'test' }, { kind: 'reset', path: '' }, { kind: 'entry', path: 'home', header: 'd 755 0 1 1 2 -' }]);
    assert.equal(picture.changesSince(mark, lower).walked, 'test');
    picture.release(mark);
    assert.equal(picture.changesSince(picture.mark(), lower).walked, undefined);
  });
});
