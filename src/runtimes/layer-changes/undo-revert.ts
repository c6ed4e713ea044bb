// A revert of one command of an instance reached through roomkit's agent: what undo.ts allows (its undo point, no
// conflict unless forced), written back through the guest (undo-apply.ts) while the
// change tracker watches, so that the answer lists what the revert changed exactly as a
// command's files_changed would; then the point is let go and the revert journaled like a
// command (a later revert of an earlier command sees the files it touched).
import { agentRun } from '../agent/commands.ts';
import { AS_ROOT, writeFile } from '../agent/files.ts';
import type { AgentEndpoint } from '../agent/client.ts';
import type { RevertOutcome } from '../types.ts';
import { applyRevert } from './undo-apply.ts';
import type { UndoLayer, UndoPoints } from './undo.ts';

const GUEST_STEP_TIMEOUT_MS = 60_000;

export async function revertCommand(options: {
  h: UndoLayer;
  commandId: string;
  force: boolean;
  undo: UndoPoints;
  walker: () => Promise<string>;
  rootfs: string;
  endpoint: AgentEndpoint;
  /** Runs `work` between a mark of the layer and its diff: the files it changed. */
  track: (work: () => Promise<void>) => Promise<RevertOutcome>;
}): Promise<RevertOutcome> {
  const { h, commandId, undo, endpoint } = options;
  const plan = await undo.plan(h, commandId, options.force);
  const walker = await options.walker();
  const outcome = await options.track(() =>
    applyRevert({
      walker,
      point: plan.point,
      rootfs: options.rootfs,
      paths: plan.paths,
      guest: {
        runAsRoot: (argv) => agentRun(endpoint, argv, { identity: { as: 'root' }, timeoutMs: GUEST_STEP_TIMEOUT_MS }),
        writeAsRoot: async (path, data) => void (await writeFile(endpoint, path, data, { home: '/' }, AS_ROOT)),
      },
    }),
  );
  await undo.reverted(h, commandId);
  await undo.afterCommand(h, `revert:${commandId}`, outcome.changes);
  return outcome;
}
