// E2B's in-sandbox protocol is defined once, in src/adapters/e2b/proto/; the TypeScript
// the adapter serves it with is generated from there and checked in. This fails when
// the two differ (a definition changed without `npm run e2b:generate`, or the output
// edited by hand), and when the definitions lose a method the e2b SDK calls.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { describe, it } from 'node:test';
import { Filesystem } from '../../src/adapters/e2b/generated/filesystem/filesystem_pb.js';
import { Process } from '../../src/adapters/e2b/generated/process/process_pb.js';

const ROOT = join(import.meta.dirname, '..', '..');
const GENERATED = join(ROOT, 'src/adapters/e2b/generated');

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => relative(dir, join(entry.parentPath, entry.name)))
    .sort();
}

describe("E2B's in-sandbox protocol", () => {
  it('the checked-in generated code is what the definitions generate (npm run e2b:generate writes it)', () => {
    const out = mkdtempSync(join(tmpdir(), 'roomkit-e2b-proto-'));
    try {
      const bin = join(ROOT, 'node_modules/.bin');
      execFileSync(join(bin, 'buf'), ['generate', 'src/adapters/e2b/proto', '--template', 'src/adapters/e2b/proto/buf.gen.yaml', '-o', out], {
        cwd: ROOT,
        // protoc-gen-es is a Node script: the Node running this test runs it.
        env: { ...process.env, PATH: `${bin}:${dirname(process.execPath)}:${process.env.PATH ?? ''}` },
      });
      const fresh = join(out, 'src/adapters/e2b/generated');
      const names = filesUnder(fresh);
      assert.deepEqual(filesUnder(GENERATED), names);
      assert.ok(names.length >= 2, names.join(' '));
      for (const name of names) assert.equal(readFileSync(join(GENERATED, name), 'utf8'), readFileSync(join(fresh, name), 'utf8'), `${name} differs`);
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });

  it('keeps the wire names the SDK calls', () => {
    assert.equal(Process.typeName, 'process.Process');
    assert.equal(Filesystem.typeName, 'filesystem.Filesystem');
    const methods = (service: { methods: { name: string }[] }) => service.methods.map((m) => m.name).sort();
    assert.deepEqual(methods(Process), ['CloseStdin', 'Connect', 'List', 'SendInput', 'SendSignal', 'Start', 'StreamInput', 'Update']);
    assert.deepEqual(methods(Filesystem), ['CreateWatcher', 'GetWatcherEvents', 'ListDir', 'MakeDir', 'Move', 'Remove', 'RemoveWatcher', 'Stat', 'WatchDir']);
  });
});
