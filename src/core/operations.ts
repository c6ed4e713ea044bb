// What a call into core did, said by core itself: each state-changing operation names
// its audit action (one of AUDIT_ACTIONS) and the objects it acted on, into the note of
// the call under way. An adapter opens a note around each call it makes (a request, a
// tool call) and records what the note holds, adding only who called, from where and
// what was decided; so a call through any adapter is recorded the same way, without a
// table of that adapter's routes or tools.
//
// The note travels with the call through AsyncLocalStorage, so the services need no
// parameter for it; outside a note (the CLI, background work) noting does nothing.
import { AsyncLocalStorage } from 'node:async_hooks';
import type { AuditAction } from './audit-schema.ts';

/** The objects an operation acted on, as far as it knows them. */
export interface OperationFacts {
  profileId?: string | undefined;
  roomId?: string | undefined;
  instanceId?: string | undefined;
  commandId?: string | undefined;
  /** A command's text (never its input or environment). */
  command?: string | undefined;
  /** The absolute path of a file written or deleted (never its contents). */
  filePath?: string | undefined;
  signal?: string | undefined;
  /** The key a key operation created or revoked. */
  targetKeyId?: string | undefined;
}

export interface OperationNote {
  /** What core said the call did: the first state-changing operation it entered. */
  action?: AuditAction;
  /**
   * What the adapter expects the call to do, for a call refused before core ran (a
   * validation error, a rate limit): an action, or null for a call that changes nothing
   * unless core says otherwise.
   */
  expected?: AuditAction | null;
  /** What core named as it ran. */
  facts: OperationFacts;
  /** What the adapter's caller named (a tool's arguments), for what core did not get to name. */
  asked: OperationFacts;
  /** The tool the call came through, when it came through one. */
  tool?: string;
}

const current = new AsyncLocalStorage<OperationNote>();

export function newOperationNote(expected?: AuditAction | null): OperationNote {
  return expected === undefined ? { facts: {}, asked: {} } : { expected, facts: {}, asked: {} };
}

/** Runs fn with note as the note of the call under way. */
export function withOperationNote<T>(note: OperationNote, fn: () => T): T {
  return current.run(note, fn);
}

/**
 * Core: the operation now under way, and what it acts on. The outermost operation names
 * the action (a fork that creates instances is a fork); facts fill in what is not yet known.
 */
export function noteOperation(action: AuditAction, facts: OperationFacts = {}): void {
  const note = current.getStore();
  if (!note) return;
  note.action ??= action;
  noteFacts(facts);
}

/** Core: an operation turned out to be another of its kind (a create served from the warm pool is a claim). */
export function refineOperation(from: AuditAction, to: AuditAction): void {
  const note = current.getStore();
  if (note?.action === from) note.action = to;
}

/** Core: objects the operation under way learned of as it went (the instance it created, the command it started). */
export function noteFacts(facts: OperationFacts): void {
  const note = current.getStore();
  if (!note) return;
  for (const [key, value] of Object.entries(facts) as [keyof OperationFacts, string | undefined][]) {
    if (value !== undefined && note.facts[key] === undefined) note.facts[key] = value;
  }
}

/**
 * Adapter: what the adapter expects the call to do, should core not say (see
 * OperationNote.expected), the tool it came through and what its caller named.
 */
export function expectOperation(expected: AuditAction | null, options: { tool?: string; asked?: OperationFacts } = {}): void {
  const note = current.getStore();
  if (!note) return;
  note.expected = expected;
  if (options.tool !== undefined) note.tool = options.tool;
  if (options.asked) note.asked = { ...options.asked };
}

/** The action to record for a note: core's, else the adapter's expectation; null: nothing to record. */
export function actionOf(note: OperationNote): AuditAction | null {
  return note.action ?? (note.expected === undefined ? 'other' : note.expected);
}
