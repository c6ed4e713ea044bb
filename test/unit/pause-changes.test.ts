// files_changed of a command that ran across a pause with memory: what it changed before
// the pause and after the resume, joined into one list (runtimes/gvisor/command-runner.ts).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { mergeDiffs } from '../../src/runtimes/gvisor/command-runner.ts';

describe('a command\'s changes across a pause', () => {
  it('joins the two lists, each path once, and says the list is incomplete', () => {
    const merged = mergeDiffs(
      {
        changes: [
          { path: '/a', status: 'created', size: 1 },
          { path: '/b', status: 'created', size: 1 },
          { path: '/c', status: 'deleted' },
          { path: '/d', status: 'modified', size: 1 },
          { path: '/e', status: 'modified', size: 1 },
        ],
        incomplete: false,
        method: 'fanotify',
      },
      {
        changes: [
          { path: '/a', status: 'deleted' },
          { path: '/b', status: 'modified', size: 2 },
          { path: '/c', status: 'created', size: 3 },
          { path: '/d', status: 'deleted' },
          { path: '/f', status: 'created', size: 4 },
        ],
        incomplete: false,
        method: 'fanotify',
      },
    );
    const byPath = Object.fromEntries(merged.changes.map((c) => [c.path, c]));
    assert.equal(byPath['/a'], undefined, 'created then deleted: never there');
    assert.deepEqual(byPath['/b'], { path: '/b', status: 'created', size: 2 });
    assert.deepEqual(byPath['/c'], { path: '/c', status: 'modified', size: 3 });
    assert.deepEqual(byPath['/d'], { path: '/d', status: 'deleted' });
    assert.deepEqual(byPath['/e'], { path: '/e', status: 'modified', size: 1 });
    assert.deepEqual(byPath['/f'], { path: '/f', status: 'created', size: 4 });
    assert.equal(merged.incomplete, true);
    assert.equal(merged.method, 'fanotify');
  });

  it('is the later list alone when nothing was read before the pause', () => {
    const later = { changes: [{ path: '/x', status: 'created' as const, size: 1 }], incomplete: false, method: 'walk' as const };
    assert.equal(mergeDiffs(undefined, later), later);
  });
});
