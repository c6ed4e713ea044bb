// E2B's lifecycle.onTimeout over a pausable runtime test double, with E2B's own SDK as
// the client: at its deadline a sandbox is killed (E2B's default) or paused ('pause'),
// whatever its profile's idle_action, and a connect to one still being paused waits
// for the pause, then resumes it.
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { NotFoundError, Sandbox } from 'e2b';
import type { PauseOptions, PauseOutcome } from '../../src/runtimes/types.ts';
import { PausableFakeRuntime } from '../support/fake-runtime.ts';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';
import { untilTrue } from '../support/until.ts';

/** A pausable double whose pauses wait until the test lets them finish. */
class HeldPauses extends PausableFakeRuntime {
  hold: Promise<void> | undefined;

  override async pause(instanceId: string, options?: PauseOptions): Promise<PauseOutcome> {
    await this.hold;
    return super.pause(instanceId, options);
  }
}

describe("E2B's onTimeout", () => {
  const runtime = new HeldPauses();
  let t: TestApp;
  let org: TestOrg;
  let opts: { apiKey: string; apiUrl: string; sandboxUrl: string };

  before(async () => {
    t = await startTestApp({ fake: runtime, config: { expiryCheckIntervalMs: 3_600_000 } });
    await t.app.listen({ host: '127.0.0.1', port: 0 });
    const base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    org = await t.newOrg();
    opts = { apiKey: org.apiKey, apiUrl: `${base}/e2b`, sandboxUrl: `${base}/e2b/envd` };
  });
  after(() => t.close());

  it("kills a sandbox at its deadline though its profile pauses idle ones, and pauses one asked to; connect waits for that pause and resumes it", async () => {
    const killed = await Sandbox.create({ ...opts, timeoutMs: 30_000 });
    const paused = await Sandbox.create({ ...opts, timeoutMs: 30_000, lifecycle: { onTimeout: 'pause' } });
    let release!: () => void;
    runtime.hold = new Promise<void>((resolve) => (release = resolve));
    const expiring = t.services.instances.expire(Date.now() + 31_000);
    await untilTrue('the pause under way', async () => (await t.services.instances.getAt({ organizationId: org.organizationId, instanceId: paused.sandboxId })).state === 'pausing');
    const connecting = Sandbox.connect(paused.sandboxId, opts);
    setTimeout(release, 300);
    const again = await connecting;
    assert.equal((await again.getInfo()).state, 'running');
    assert.deepEqual(runtime.pauseOptions.at(-1), { memory: true });
    const expired = await expiring;
    assert.ok(expired.includes(paused.sandboxId) && expired.includes(killed.sandboxId), JSON.stringify(expired));
    await assert.rejects(Sandbox.getInfo(killed.sandboxId, opts), NotFoundError);
    await again.kill();
  });
});
