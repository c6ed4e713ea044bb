// The runtime double for template builds: snapshots of nothing (a build's layers, kept
// as ids), what each sandbox was started from, a RUN of `false` failing with output, and
// one naming nul-output printing a NUL.
import type { CommandOutcome, CommandRequest, SnapshotOutcome } from '../../src/runtimes/types.ts';
import { FakeRuntime } from './fake-runtime.ts';

/** The double, with snapshots of nothing (a build's layers) and a RUN of `false` failing. */
export class BuildingRuntime extends FakeRuntime {
  override readonly capabilities = { ...new FakeRuntime().capabilities, snapshot: true };
  readonly snapshots = new Set<string>();
  readonly provisioned: (string | undefined)[] = [];

  override async provision(request: Parameters<FakeRuntime['provision']>[0]): Promise<void> {
    this.provisioned.push(request.fromSnapshot);
    return super.provision(request);
  }

  override async runCommand(instanceId: string, request: CommandRequest): Promise<CommandOutcome> {
    const outcome = await super.runCommand(instanceId, request);
    if (request.command.includes('nul-output')) request.onOutput?.(Buffer.from('x\u0000y\n'), 'stdout');
    if (!request.command.includes("'false'")) return outcome;
    request.onOutput?.(Buffer.from('it went wrong\n'), 'stderr');
    return { ...outcome, exitCode: 1 };
  }

  async snapshot(_instanceId: string, snapshotId: string): Promise<SnapshotOutcome> {
    this.snapshots.add(snapshotId);
    return { memoryKept: false, diskBytes: 4096 } as SnapshotOutcome;
  }

  async deleteSnapshot(snapshotId: string): Promise<void> {
    this.snapshots.delete(snapshotId);
  }

  async listSnapshots(): Promise<string[]> {
    return [...this.snapshots];
  }
}
