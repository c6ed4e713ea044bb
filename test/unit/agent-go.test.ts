// The Go agent's own tests (src/images/guest/agent/*_test.go: what it keeps for a
// client that attaches again, within its bounds), run with the Go that builds it.
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AGENT_PACKAGE_DIR } from '../../scripts/generate-agent-protocol.ts';

const hasGo = spawnSync('go', ['version']).status === 0;

test('the agent passes its Go tests', { skip: hasGo ? false : 'no Go on this machine (the agent cannot be built either)' }, () => {
  const cache = mkdtempSync(join(tmpdir(), 'roomkit-go-cache-'));
  try {
    const result = spawnSync('go', ['test', '-count=1', '.'], {
      cwd: AGENT_PACKAGE_DIR,
      env: { ...process.env, CGO_ENABLED: '0', GOCACHE: process.env.GOCACHE ?? cache, GOFLAGS: '-mod=mod', GOPROXY: 'off', GOTOOLCHAIN: 'local' },
      encoding: 'utf8',
      timeout: 300_000,
    });
    assert.equal(result.status, 0, `go test failed:\n${result.stdout}${result.stderr}`);
  } finally {
    rmSync(cache, { recursive: true, force: true });
  }
});
