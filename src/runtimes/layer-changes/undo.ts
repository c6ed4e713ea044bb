// Undo points of an instance whose writable layer is btrfs (a profile with keep_undo):
// before a command that keeps one, a read-only snapshot of the layer's `state` subvolume
// (overlay upper and work) is taken at `layer/undo/<command id>`; a journal beside the
// instance (undo.json) records, for every command since the oldest point, the files it
// changed, so that a revert can see whether later commands touched the same files. The
// points are bounded per instance by count and by the disk they hold alone (btrfs
// qgroups), the oldest dropped first. What a revert writes, and how, is undo-apply.ts.
import { existsSync, readFileSync, renameSync, statfsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { deleteSubvolume, exclusiveBytes, snapshotReadOnly } from '../../host/btrfs.ts';
import { KeyedSerial } from '../../lib/keyed-serial.ts';
import { type FileChangeEntry, UndoRefused } from '../types.ts';

/**
 * An instance's btrfs writable layer, as its runtime lays it out: what undo points are
 * taken of and kept in, and where its journal lives.
 */
export interface UndoLayer {
  readonly id: string;
  /** The instance's own directory, which holds the journal. */
  readonly dir: string;
  /** The layer's mount point (its free space and qgroups bound the points). */
  readonly layer: string;
  /** The subvolume with the overlay's upper and work directories, which a point is a snapshot of. */
  readonly state: string;
  /** Where the points are. */
  readonly undoDir: string;
}

export interface UndoLimits {
  /** Undo points one instance keeps at most. */
  maxPoints: number;
  /** Bytes its undo points may hold alone (beyond what its current files share with them). */
  maxBytes: number;
}

/** One command (or revert) of the instance, as the journal keeps it. */
interface JournalEntry {
  id: string;
  /** It has an undo point now. */
  point: boolean;
  /** Its point was dropped to keep the instance within its bounds. */
  dropped?: boolean;
  reverted?: boolean;
  /** The absolute paths it changed; null while it runs (or when they could not be read). */
  paths: string[] | null;
}

export class UndoPoints {
  private readonly limits: UndoLimits;
  private readonly log: Logger;
  /** Per instance: the tail of its journal updates, so that they apply one at a time. */
  private readonly updates = new KeyedSerial<string>();

  constructor(options: { limits: UndoLimits; log: Logger }) {
    this.limits = options.limits;
    this.log = options.log;
  }

  /** Where a command's undo point is: its `upper` is the overlay's upper directory as it was before the command. */
  pointOf(h: UndoLayer, commandId: string): string {
    return join(h.undoDir, commandId);
  }

  /**
   * Called before each command of an instance with a btrfs layer: records it in the
   * journal, and with `keep` takes its undo point, first dropping the oldest ones that
   * the bounds leave no room for.
   */
  beforeCommand(h: UndoLayer, commandId: string, keep: boolean): Promise<void> {
    return this.serial(h, async () => {
      const journal = readJournal(h);
      if (keep) {
        await this.makeRoom(h, journal);
        await snapshotReadOnly(h.state, this.pointOf(h, commandId));
      }
      journal.push({ id: commandId, point: keep, paths: null });
      writeJournal(h, trimmed(journal));
    });
  }

  /** Records what a command (or a revert, `id`) changed; null when that is unknown. */
  afterCommand(h: UndoLayer, id: string, changes: FileChangeEntry[] | null): Promise<void> {
    return this.serial(h, async () => {
      const journal = readJournal(h);
      const paths = changes?.map((c) => c.path) ?? null;
      const entry = journal.find((e) => e.id === id);
      if (entry) entry.paths = paths;
      else if (journal.some((e) => e.point)) journal.push({ id, point: false, paths });
      writeJournal(h, trimmed(journal));
    });
  }

  /**
   * What a revert of `commandId` puts back: the files it changed. Refuses (UndoRefused)
   * a command without an undo point, one still running or already reverted, and, unless
   * `force`, one whose files a later command changed too.
   */
  async plan(h: UndoLayer, commandId: string, force: boolean): Promise<{ point: string; paths: string[] }> {
    await this.updates.idle(h.id);
    const journal = readJournal(h);
    const at = journal.findIndex((e) => e.id === commandId);
    const entry = journal[at];
    // A reverted entry keeps no point any more: said first, so it is not taken for one that never had one.
    if (entry?.reverted) throw new UndoRefused('already_reverted', `command ${commandId} was already reverted; its undo point was used`);
    if (!entry || (!entry.point && !entry.dropped)) {
      throw new UndoRefused('no_undo_point', `command ${commandId} kept no undo point: only commands run with keep_undo (on the command, or on its profile) can be reverted`);
    }
    if (entry.dropped) {
      throw new UndoRefused(
        'no_undo_point',
        `the undo point of command ${commandId} was dropped to keep the instance within its undo bounds (${this.limits.maxPoints} points, ${Math.round(this.limits.maxBytes / 1024 / 1024)} MiB): it can no longer be reverted`,
      );
    }
    if (entry.paths === null) throw new UndoRefused('no_undo_point', `command ${commandId} is still running (or its files_changed could not be read): revert it once it has ended`);
    const mine = new Set(entry.paths);
    const touched = new Set<string>();
    for (const later of journal.slice(at + 1)) {
      for (const path of later.paths ?? []) if (mine.has(path)) touched.add(path);
    }
    if (touched.size > 0 && !force) {
      const files = [...touched].sort();
      throw new UndoRefused(
        'conflict',
        `later commands changed ${files.length} of the files command ${commandId} changed (${files.slice(0, 5).join(', ')}${files.length > 5 ? ', …' : ''}): ` +
          'reverting would undo their changes to those files too; send {"force": true} to revert anyway',
        files,
      );
    }
    return { point: this.pointOf(h, commandId), paths: [...mine].sort() };
  }

  /** Marks a command reverted and lets its undo point go. */
  reverted(h: UndoLayer, commandId: string): Promise<void> {
    return this.serial(h, async () => {
      const journal = readJournal(h);
      const entry = journal.find((e) => e.id === commandId);
      if (!entry) return;
      entry.reverted = true;
      entry.point = false;
      await deleteSubvolume(this.pointOf(h, commandId)).catch((err: unknown) => this.log.warn({ instanceId: h.id, commandId, err }, 'could not drop a used undo point'));
      writeJournal(h, trimmed(journal));
    });
  }

  /** Drops the oldest undo points until one more fits the count bound, and those they hold fit the disk bound. */
  private async makeRoom(h: UndoLayer, journal: JournalEntry[]): Promise<void> {
    const points = journal.filter((e) => e.point);
    while (points.length >= this.limits.maxPoints && points.length > 0) await this.drop(h, points.shift()!, 'count');
    if (points.length === 0) return;
    // Undo points cannot hold more than the whole file system uses: no need to ask btrfs.
    const fs = statfsSync(h.layer);
    if ((fs.blocks - fs.bfree) * fs.bsize <= this.limits.maxBytes) return;
    const sizes = await exclusiveBytes(h.layer);
    let held = points.reduce((sum, e) => sum + (sizes.get(`undo/${e.id}`) ?? 0), 0);
    while (held > this.limits.maxBytes && points.length > 0) {
      const oldest = points.shift()!;
      held -= sizes.get(`undo/${oldest.id}`) ?? 0;
      await this.drop(h, oldest, 'disk');
    }
  }

  private async drop(h: UndoLayer, entry: JournalEntry, bound: 'count' | 'disk'): Promise<void> {
    await deleteSubvolume(this.pointOf(h, entry.id));
    entry.point = false;
    entry.dropped = true;
    this.log.info({ instanceId: h.id, commandId: entry.id, bound }, 'undo point dropped to keep the instance within its undo bounds');
  }

  private serial<T>(h: UndoLayer, work: () => Promise<T>): Promise<T> {
    return this.updates.run(h.id, work);
  }
}

/** The journal without what no revert can need: entries before the oldest undo point (kept: dropped ones, which say why). */
function trimmed(journal: JournalEntry[]): JournalEntry[] {
  const first = journal.findIndex((e) => e.point || e.paths === null);
  const kept = first < 0 ? [] : journal.slice(first);
  // A few dropped and reverted entries stay to answer why they cannot be reverted.
  const gone = journal.slice(0, first < 0 ? journal.length : first).filter((e) => e.dropped || e.reverted).slice(-100);
  return [...gone, ...kept];
}

function journalFile(h: UndoLayer): string {
  return join(h.dir, 'undo.json');
}

function readJournal(h: UndoLayer): JournalEntry[] {
  const file = journalFile(h);
  if (!existsSync(file)) return [];
  return JSON.parse(readFileSync(file, 'utf8')) as JournalEntry[];
}

function writeJournal(h: UndoLayer, journal: JournalEntry[]): void {
  const file = journalFile(h);
  writeFileSync(`${file}.new`, JSON.stringify(journal), { mode: 0o600 });
  renameSync(`${file}.new`, file);
}
