// The runtime's refusals that a caller can act on, as the API's errors: the one place
// where they get their codes (core/ services use it for what they keep, http/errors.ts
// for what a route lets through).
import { AppError } from '../errors.ts';
import { HostOutOfSpace, RuntimeFeatureUnavailable, UndoRefused } from '../runtimes/types.ts';

/** The AppError a runtime error stands for, or undefined when it is not one a caller can act on. */
export function appErrorOfRuntime(err: unknown): AppError | undefined {
  if (err instanceof RuntimeFeatureUnavailable) return new AppError('feature_unavailable', err.message);
  if (err instanceof HostOutOfSpace) return new AppError('no_space', err.message);
  if (err instanceof UndoRefused) {
    return err.kind === 'conflict' ? new AppError('revert_conflict', err.message, { files: err.files }) : new AppError('no_undo_point', err.message);
  }
  return undefined;
}
