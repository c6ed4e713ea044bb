// The contract every instance runtime must pass. A runtime is added by making this
// suite pass against it; core/ relies on nothing else.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { Logger } from 'pino';
import { type MachineSpec, PROVISION_STEPS, type ProvisionRequest, type ProvisionStep, type Runtime } from '../../src/runtimes/types.ts';

export interface ContractSubject {
  runtime: Runtime;
  spec: MachineSpec;
  log: Logger;
  /** Removes what the subject made (data directories and the like). */
  close(): Promise<void>;
}

export function runtimeContract(name: string, make: () => Promise<ContractSubject>): void {
  describe(`runtime contract: ${name}`, () => {
    let subject: ContractSubject;
    const made: string[] = [];
    before(async () => {
      subject = await make();
    });
    after(async () => {
      for (const id of made) await (await subject.runtime.destroy(id)).released;
      await subject.close();
    });

    function request(overrides: Partial<ProvisionRequest> = {}): ProvisionRequest & { steps: ProvisionStep[] } {
      const steps: ProvisionStep[] = [];
      const instanceId = randomUUID();
      made.push(instanceId);
      return {
        instanceId,
        organizationId: randomUUID(),
        profileId: randomUUID(),
        roomId: 'contract',
        spec: subject.spec,
        signal: new AbortController().signal,
        log: subject.log,
        onStep: async (step) => {
          steps.push(step);
        },
        onProgress: () => {},
        steps,
        ...overrides,
      };
    }

    it('states a host cost of at least what the instance asks for, growing with it (host admission adds these up)', () => {
      const small = subject.runtime.hostCost({ memory_mb: 512, vcpus: 1, disk_mb: 1024 });
      const large = subject.runtime.hostCost({ memory_mb: 4096, vcpus: 2, disk_mb: 8192 });
      assert.ok(small.memoryMb >= 512 && small.diskMb >= 1024, JSON.stringify(small));
      assert.ok(large.memoryMb >= 4096 && large.diskMb >= 8192, JSON.stringify(large));
      assert.ok(large.memoryMb > small.memoryMb && large.diskMb > small.diskMb);
    });

    it('reports every provisioning step once, in lifecycle order, and the instance is then healthy', async () => {
      const req = request();
      await subject.runtime.provision(req);
      assert.deepEqual(req.steps, PROVISION_STEPS);
      assert.deepEqual(await subject.runtime.health(req.instanceId), { healthy: true });
      assert.ok((await subject.runtime.list()).includes(req.instanceId));
    });

    it('destroys an instance: stopped when destroy resolves, gone completely once released; destroying again is harmless', async () => {
      const req = request();
      await subject.runtime.provision(req);
      const teardown = await subject.runtime.destroy(req.instanceId);
      assert.equal((await subject.runtime.health(req.instanceId)).healthy, false);
      await teardown.released;
      assert.ok(!(await subject.runtime.list()).includes(req.instanceId));
      await (await subject.runtime.destroy(req.instanceId)).released;
      await (await subject.runtime.destroy(randomUUID())).released;
    });

    it('undoes its steps and rejects when a step is refused', async () => {
      const steps: ProvisionStep[] = [];
      const req = request({
        onStep: async (step) => {
          steps.push(step);
          if (step === 'image_generated') throw new Error('refused by core');
        },
      });
      await assert.rejects(subject.runtime.provision(req), /refused by core/);
      assert.deepEqual(steps, ['network_allocated', 'ftap_created', 'image_generated']);
      assert.ok(!(await subject.runtime.list()).includes(req.instanceId));
    });

    it('stops, undoes and rejects when its signal is aborted', async () => {
      const abort = new AbortController();
      const req = request({
        signal: abort.signal,
        onStep: async (step) => {
          if (step === 'ftap_created') abort.abort(new Error('deleted while starting'));
          abort.signal.throwIfAborted();
        },
      });
      await assert.rejects(subject.runtime.provision(req), /deleted while starting/);
      assert.ok(!(await subject.runtime.list()).includes(req.instanceId));
    });

    it('sweeps what belongs to no kept instance, and keeps the rest healthy', async () => {
      const keep = request();
      const drop = request();
      await subject.runtime.provision(keep);
      await subject.runtime.provision(drop);
      const removed = await subject.runtime.sweep(new Set([keep.instanceId]));
      assert.ok(removed.some((r) => r.includes(drop.instanceId)), JSON.stringify(removed));
      const listed = await subject.runtime.list();
      assert.ok(listed.includes(keep.instanceId));
      assert.ok(!listed.includes(drop.instanceId));
      assert.deepEqual(await subject.runtime.health(keep.instanceId), { healthy: true });
    });
  });
}
