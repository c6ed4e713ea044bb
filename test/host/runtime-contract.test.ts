// Runs the runtime contract against every runtime this build has, on the real host.
import { nodeIdOf } from '../../src/host/node-identity.ts';
import { rmSync } from 'node:fs';
import { readFileSync } from 'node:fs';
import { openStore } from '../../src/store/db.ts';
import { createLogger } from '../../src/log.ts';
import { GvisorRuntime } from '../../src/runtimes/gvisor/gvisor-runtime.ts';
import { AddressPool } from '../../src/network/pool.ts';
import { ImageStore } from '../../src/images/builder.ts';
import { hostDnsServers } from '../../src/network/firewall.ts';
import { PROFILE_DEFAULTS } from '../../src/core/profile-schema.ts';
import { runtimeContract } from '../support/runtime-contract.ts';
import { TEST_IMAGES_DIR, testDataDir } from '../support/app.ts';
import { DEFAULT_HOST_TASKS_PER_INSTANCE } from '../../src/config.ts';

runtimeContract('gvisor', async () => {
  const pool = '10.218.0.0/24';
  const dataDir = testDataDir('roomkit-contract-', pool);
  const db = await openStore({ dataDir });
  const log = createLogger('silent');
  const runtime = new GvisorRuntime({
    dataDir,
    pool: new AddressPool(db, pool, nodeIdOf(dataDir)),
    images: new ImageStore({ dir: TEST_IMAGES_DIR, log }),
    log,
    dnsServers: hostDnsServers(readFileSync('/etc/resolv.conf', 'utf8')),
    maxHostTasks: DEFAULT_HOST_TASKS_PER_INSTANCE,
  });
  await runtime.start();
  return {
    runtime,
    log,
    interactive: true,
    spec: { ...PROFILE_DEFAULTS, memory_mb: 256, disk_mb: 256, network: { egress: 'none', allow: [] }, home: '/home/user' },
    async close() {
      await runtime.close();
      await db.destroy();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
});
