// The C helpers roomkit compiles on first use: concurrent first uses in one process must
// share one build rather than race on its output file.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, describe, it } from 'node:test';
import { compiled } from '../../src/host/native.ts';

const scratch = mkdtempSync(join(tmpdir(), 'roomkit-native-'));
after(() => rmSync(scratch, { recursive: true, force: true }));

describe('compiled', () => {
  it('builds once for callers that ask at the same time, leaving no temporary file', async () => {
    const source = join(scratch, 'hello.c');
    writeFileSync(source, '#include <stdio.h>\nint main(void) { puts("built"); return 0; }\n');
    const cache = join(scratch, 'cache');
    const paths = await Promise.all(Array.from({ length: 4 }, () => compiled(source, 'hello', cache)));
    assert.equal(new Set(paths).size, 1);
    assert.equal(execFileSync(paths[0]!, { encoding: 'utf8' }), 'built\n');
    assert.deepEqual(readdirSync(dirname(paths[0]!)), ['hello']);
    // Cached: a later call answers with the same file without building.
    assert.equal(await compiled(source, 'hello', cache), paths[0]);
  });

  it('says how to get a compiler when the source does not build', async () => {
    const source = join(scratch, 'broken.c');
    writeFileSync(source, 'int main(void) { return missing; }\n');
    await assert.rejects(compiled(source, 'broken', join(scratch, 'cache')), /cannot compile broken .*apt-get install gcc/s);
  });
});
