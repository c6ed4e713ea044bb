// Holds the runtime test double that drives the unit tests to the runtime contract, so
// that what core is tested against behaves as a real runtime does (a runtime that can
// pause, and one that cannot). The parts a double cannot do by nature (run a shell) are
// left out by its testDouble flag; the real runtimes run the whole suite as host tests.
import { createLogger } from '../../src/log.ts';
import { PROFILE_DEFAULTS } from '../../src/core/profile-schema.ts';
import { FakeRuntime, PausableFakeRuntime } from '../support/fake-runtime.ts';
import { runtimeContract } from '../support/runtime-contract.ts';

for (const [name, make] of [
  ['the test double', () => new FakeRuntime()],
  ['the test double that pauses', () => new PausableFakeRuntime()],
] as const) {
  runtimeContract(name, async () => ({
    runtime: make(),
    log: createLogger('silent'),
    interactive: false,
    testDouble: true,
    spec: { ...PROFILE_DEFAULTS, memory_mb: 256, disk_mb: 256, network: { egress: 'none', allow: [] }, home: '/home/user' },
    async close() {},
  }));
}
