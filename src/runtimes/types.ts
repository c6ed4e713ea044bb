// The contract between core/ and an instance runtime (gVisor today, microVMs later).
// core/ drives the lifecycle and the store; a runtime only does the machine work and
// reports each provisioning step as it completes. Every runtime must pass the same
// contract test suite.
// Over 400 lines: the whole contract in one file, so that a new runtime's author reads it
// from top to bottom.
import type { ReportedDecision } from '../network/egress/decisions.ts';
import type { NetworkPolicy } from '../network/egress/policy.ts';
import type { Logger } from 'pino';

export interface RuntimeCapabilities {
  /** A private network namespace per instance with its own address. */
  network: boolean;
  /** A hard limit on the instance's writable disk. */
  diskLimit: boolean;
  /**
   * Instances can keep a command's stdin open for sendInput() and open terminals
   * (openTerminal()). A runtime may still refuse either for an instance that cannot
   * (e.g. one made before it could): RuntimeFeatureUnavailable.
   */
  interactive: boolean;
  /**
   * Instances can be paused (pause(): their machine stops and holds no memory or CPU,
   * their writable layer stays) and resumed (resume()). Without it, pause() and
   * resume() are absent and core/ stops idle instances instead of pausing them.
   */
  pause: boolean;
  /**
   * A pause can keep the instance's memory and processes (PauseOptions.memory), and a
   * resume brings them back. Without it, every pause keeps files only (`memoryKept:
   * false`) whatever is asked.
   */
  pauseMemory: boolean;
  /**
   * A ready instance can be frozen (freeze(): every process of it stops where it is,
   * holding its memory, and it uses no CPU) and thaws by itself on the next operation.
   */
  freeze: boolean;
  /**
   * Instances' file systems can be saved as snapshots (snapshot()) and new instances
   * started from one (ProvisionRequest.fromSnapshot). Without it, snapshot() and the
   * rest are absent and core/ refuses snapshots and forks with feature_unavailable.
   */
  snapshot: boolean;
  /**
   * A snapshot can keep the instance's memory and processes too (SnapshotOptions.memory),
   * and provision() from such a snapshot restores them in the new instance's own
   * namespace, under its own id and address. Without it, every snapshot keeps files only
   * (`memoryKept: false`) whatever is asked, and an instance from one boots over them.
   */
  snapshotMemory: boolean;
}

/**
 * The steps of making an instance, in the order a runtime completes and reports them;
 * each is a real step of the machine work. core/lifecycle.ts builds the instance's
 * states from them.
 */
export const PROVISION_STEPS = ['network_allocated', 'ftap_created', 'image_generated', 'vm_started', 'vm_booted', 'ready'] as const;
export type ProvisionStep = (typeof PROVISION_STEPS)[number];

/**
 * The machine a runtime makes for an instance: only what the machine work needs. core/
 * derives it from the profile; the profile's other fields (time limits, environment,
 * settings) are core's business.
 */
export interface MachineSpec {
  /** Base image of the root filesystem: `debian:<suite>` or `oci:<name>[:<tag>]`. */
  image: string;
  /** Distribution packages installed into the image. */
  packages: string[];
  /** The unprivileged user commands run as (uid 1000 in the image), and its home. */
  user: string;
  home: string;
  memory_mb: number;
  vcpus: number;
  /** Size of the instance's writable layer. */
  disk_mb: number;
  /** `internet`: outbound traffic to public addresses; `none`: no route out; `allowlist`: what its lists allow (network/egress/policy.ts). */
  network: NetworkPolicy;
  /** The writable layer can keep commands' undo points (revertCommand); only runtimes with revertCommand honour it. */
  keep_undo?: boolean;
}

/** What an instance asks of the host for as long as it lives. */
export type MachineResources = Pick<MachineSpec, 'memory_mb' | 'vcpus' | 'disk_mb'>;

/**
 * The most of the host an instance of given resources may take while it lives: its
 * memory with whatever the runtime adds around the guest (for gVisor, the headroom of
 * the sandbox's host cgroup), and the disk its writable layer may grow to. Host
 * admission adds these up over live instances.
 */
export interface HostCost {
  memoryMb: number;
  diskMb: number;
}

export interface ProvisionRequest {
  instanceId: string;
  organizationId: string;
  profileId: string;
  roomId: string;
  spec: MachineSpec;
  /** Aborted when the instance is deleted or the service stops while it is provisioning. */
  signal: AbortSignal;
  /**
   * Called after each step completes, in lifecycle order (network_allocated ...
   * ready). It rejects when the instance should not go on (the signal was aborted);
   * the runtime then undoes what it did and rejects too. `note` says how a step was
   * done where that is not the usual way: the machine restored from a snapshot's memory
   * (`memory_restored`, on vm_started), or booted over its files because that memory
   * could not be restored (`memory_lost`, on vm_started, with why).
   */
  onStep(step: ProvisionStep, note?: ProvisionNote): Promise<void>;
  /** Reports what a long step is doing (e.g. an image build's phases), for callers to see. */
  onProgress(message: string): void;
  log: Logger;
  /**
   * Start from this snapshot's files instead of an empty writable layer (runtimes with
   * `capabilities.snapshot`), and from its memory and processes when it kept them
   * (`capabilities.snapshotMemory`; should they not restore, the instance boots over the
   * files and onStep's note says why). The spec's image and disk_mb are the snapshot's.
   */
  fromSnapshot?: string;
}

/** How a provisioning step was done, when not by booting the image (ProvisionRequest.onStep). */
export interface ProvisionNote {
  code: 'memory_restored' | 'memory_lost';
  /** In words, for the instance's history. */
  reason: string;
}

/** A regular file a command created, modified or deleted (absolute guest path). */
export interface FileChangeEntry {
  path: string;
  status: 'created' | 'modified' | 'deleted';
  /** Bytes, for created and modified files. */
  size?: number;
  mimeType?: string;
}

export interface CommandRequest {
  /** Marks every process the command starts, so a timeout can end all of them. */
  commandId: string;
  /** Run by `sh -c` as the VM user. */
  command: string;
  /**
   * The program and its arguments, run directly (as the VM user, found on its PATH)
   * instead of `command` under `sh -c`, for an adapter whose protocol names a program
   * (E2B's); `command` is then only their text, for the record.
   */
  argv?: string[];
  /** The VM user's home: the working directory, and where relative paths start. */
  home: string;
  /** Working directory, absolute or relative to the home; the home when absent. */
  cwd?: string;
  env: Record<string, string>;
  /** Time limit; 0 for none (the command runs until it ends, is killed or the instance stops). */
  timeoutMs: number;
  /**
   * Silence limit: the command is ended as at its time limit (with `noOutput` in its
   * outcome) once it has printed nothing on stdout or stderr for this long; 0 or absent for none.
   */
  idleOutputTimeoutMs?: number;
  /**
   * Receives the output while the command runs, whole and in order, whatever is kept of
   * it for the outcome, with the stream each chunk came from (`output` when the runtime
   * cannot tell stdout and stderr apart).
   */
  onOutput?: (chunk: Buffer, stream: OutputStream) => void;
  /** Given to the command's stdin at once, which is then closed. Without it or stdinOpen, stdin is empty. */
  stdin?: Buffer;
  /** Keep stdin open for sendInput() until it is closed (runtimes with `interactive` only). */
  stdinOpen?: boolean;
  /**
   * Called once, when the command's first process has started and before its first
   * output: whether its stdout and stderr come apart (`onOutput` will say `stdout` and
   * `stderr`, and the outcome has `streams`). With stdinOpen, sendInput() reaches it
   * from then on. Not called when the command could not be started.
   */
  onStarted?: (info: { streamsApart: boolean }) => void;
  /** Output beyond this is dropped from the middle, keeping its start and end. */
  maxOutputBytes: number;
  /** Whether to compute the files the command changed. */
  trackChanges: boolean;
  /** Keep the layer as it was before the command, for revertCommand (an instance made with keep_undo only). */
  keepUndo?: boolean;
}

/** Where a chunk of output came from: `output` when the runtime cannot tell stdout and stderr apart. */
export type OutputStream = 'stdout' | 'stderr' | 'output';

/** One output stream of a command as kept for its outcome. */
export interface StreamText {
  /** Lossy UTF-8, possibly truncated in the middle like `output`. */
  text: string;
  bytes: number;
  truncated: boolean;
}

/** Signals a caller may send to a command's processes. */
export const COMMAND_SIGNALS = ['TERM', 'KILL', 'INT', 'HUP'] as const;
export type CommandSignal = (typeof COMMAND_SIGNALS)[number];

export interface CommandOutcome {
  /** stdout and stderr interleaved as produced (lossy UTF-8), possibly truncated. */
  output: string;
  outputBytes: number;
  outputTruncated: boolean;
  /** stdout and stderr apart; undefined when the runtime could not keep them apart. */
  streams?: { stdout: StreamText; stderr: StreamText };
  /** The shell's exit status; 128+n when it died of signal n; 124 on timeout. */
  exitCode: number;
  timedOut: boolean;
  /** It was its silence limit (idleOutputTimeoutMs) that ended it; `timedOut` is true then too. */
  noOutput?: boolean;
  /** Sorted by path; null when not tracked. */
  changes: FileChangeEntry[] | null;
  /** Some of the instance's tree could not be listed (deeper than the runtime walks): changes there are missing. */
  changesIncomplete?: boolean;
  /** How `changes` was made: from the paths the kernel reported touched, or by listing the whole writable layer. */
  changesMethod?: 'fanotify' | 'walk';
  /** The runtime's memory guard killed at least one process of this command while it ran (the instance was at its memory size). */
  outOfMemory?: boolean;
  /** The instance's writable disk was full when the command ended. */
  diskFull?: boolean;
  /** The instance's machine was gone when the command ended (its sandbox exited): the command did not end on its own. */
  instanceGone?: boolean;
}

/** A guest file operation that failed for a reason the caller can act on. */
export class GuestFileError extends Error {
  readonly kind: 'not_found' | 'permission_denied' | 'is_a_directory' | 'not_a_directory' | 'too_large' | 'invalid_path' | 'no_space' | 'changed';
  readonly size: number | undefined;

  constructor(kind: GuestFileError['kind'], message: string, size?: number) {
    super(message);
    this.name = 'GuestFileError';
    this.kind = kind;
    this.size = size;
  }
}

/** A regular file as the guest's VM user sees it. */
export interface GuestFileInfo {
  /** Absolute path the request resolved to (not following a final link). */
  path: string;
  size: number;
  mtimeMs: number;
  /** Changes whenever the file's content may have: for ETags. */
  version: string;
}

export interface GuestDirEntry {
  name: string;
  type: 'file' | 'directory' | 'symlink' | 'other';
  size: number;
  /** Permission bits, octal, e.g. "644". */
  mode: string;
  mtime: string;
}

export interface FileAccess {
  home: string;
  /** Root in the guest rather than the VM user: what it makes is root's (the VM user may become root anyway, through sudo). */
  asRoot?: boolean;
}

/** A terminal in an instance: a login shell (or a command) on a pseudo-terminal. */
export interface TerminalRequest {
  /** Marks its processes, like a command's id. */
  terminalId: string;
  /** The VM user's name and home (the terminal's working directory). */
  user: string;
  home: string;
  env: Record<string, string>;
  cols: number;
  rows: number;
  /** Run by `sh -c` on the terminal; the user's login shell when absent. */
  command?: string;
}

export interface TerminalSession {
  /** Output of the terminal, as it comes; chunks that came before a listener are kept for it. */
  onOutput(listener: (chunk: Buffer) => void): void;
  write(data: Buffer): void;
  resize(cols: number, rows: number): void;
  /**
   * Stops passing output on until resume(); the terminal's programs then wait as they
   * would on a slow terminal (for a reader that cannot keep up).
   */
  pause(): void;
  resume(): void;
  /** Ends the terminal and every process it started. */
  close(): void;
  /** Lets the terminal go without ending it: its shell goes on, for attachTerminal(). */
  detach(): void;
  /** Settles when the terminal's first process has ended (or the terminal was closed). */
  readonly exited: Promise<{ exitCode: number }>;
}

/** The runtime cannot do this for this instance (see RuntimeCapabilities). */
export class RuntimeFeatureUnavailable extends Error {}

/** The host has not the disk a runtime operation needs (e.g. a snapshot's copy); the message says how much. */
export class HostOutOfSpace extends Error {}

export type RuntimeHealth = { healthy: true } | { healthy: false; reason: string };

/**
 * What happens to a running instance outside any request, as the runtime reports it
 * to core/ (which records it): its machine ended by itself (`outOfMemory` when the host
 * says memory was why), or its memory guard killed processes to keep it within its
 * memory size (`commandIds`: the commands those processes belonged to).
 */
export type RuntimeEvent =
  | { type: 'machine_exited'; instanceId: string; outOfMemory: boolean; detail: string }
  | { type: 'memory_kill'; instanceId: string; kind: 'largest_process' | 'all_user_processes'; commandIds: string[]; detail: string }
  /** Egress decisions of an allowlisted instance, aggregated (network/egress/decisions.ts): for the audit trail. */
  | { type: 'egress'; instanceId: string; decision: ReportedDecision };

export interface Runtime {
  readonly name: string;
  readonly capabilities: RuntimeCapabilities;
  /** Prepares the host (e.g. firewall tables) before instances are provisioned or adopted. */
  start(): Promise<void>;
  /**
   * Runs every provisioning step. On failure it undoes the steps already done, so
   * nothing is left behind, and rejects with an error whose message says what failed.
   */
  provision(request: ProvisionRequest): Promise<void>;
  /**
   * Stops the instance's machine and releases everything it holds. Idempotent. Resolves
   * once the machine no longer runs; the rest may be released after that, in the
   * background: `released` settles when it is (it never rejects: a runtime logs a
   * failure, and its next sweep() finishes the release), close() waits for every
   * release under way, and list() names the instance until its release is done.
   */
  destroy(instanceId: string): Promise<{ released: Promise<void> }>;
  /** Ids of the instances this runtime holds resources for (for reconciliation). */
  list(): Promise<string[]>;
  /** Whether an instance that should be running still is and answers. */
  health(instanceId: string): Promise<RuntimeHealth>;
  /** Takes over a healthy instance found running at start (re-applies per-instance rules). */
  adopt(instanceId: string): Promise<void>;
  /**
   * Removes everything the runtime holds that does not belong to an instance in `keep`,
   * including leftovers it cannot attribute to an instance; returns what it removed.
   */
  sweep(keep: ReadonlySet<string>): Promise<string[]>;
  /** Waits for the releases destroy() started, then releases what the runtime itself holds; instances are left as they are. */
  close(): Promise<void>;
  /**
   * Subscribes to what happens to instances it runs (made or adopted) outside any
   * request. A machine that ends by itself is reported once; its resources are still
   * held until destroy().
   */
  onEvent(listener: (event: RuntimeEvent) => void): void;
  /** The most of the host an instance with these resources may take (its limits: for reports, and the disk admission counts). */
  hostCost(resources: MachineResources): HostCost;
  /**
   * Host memory (MiB) the instance's machine holds now, measured (host admission counts
   * it); undefined when there is no machine to measure (not started yet, paused, ended)
   * or this runtime cannot measure it. Cheap: admission reads it of every live instance.
   */
  memoryInUseMb(instanceId: string): number | undefined;
  /**
   * What admission counts for an instance whose machine is still starting, or cannot be
   * measured (MiB): an estimate of what one holds once started, at most its hostCost.
   */
  startingMemoryMb(resources: MachineResources): number;
  /**
   * Present when `capabilities.freeze`: stops every process of a ready instance where it
   * is, keeping its memory, so that an idle one costs the host no CPU; true when it froze.
   * Any later operation on the instance (a command, a file, a terminal, a port, a pause,
   * a snapshot, a destroy) thaws it first, so a caller sees no difference but the time:
   * the instance's clocks jump, as after a suspend.
   */
  freeze?(instanceId: string): boolean;
  /** Whether the instance is frozen now (present with freeze). */
  isFrozen?(instanceId: string): boolean;
  /** CPU time (ms) the instance's machine has used; undefined when there is none or it cannot say. Cheap. */
  cpuUsedMs?(instanceId: string): number | undefined;

  /** Runs a shell command as the VM user; resolves whatever its exit code. */
  runCommand(instanceId: string, request: CommandRequest): Promise<CommandOutcome>;
  /**
   * Sends a signal (default KILL) to every process a command started, e.g. one
   * interrupted by a crash of the service, or one a caller asked to stop. Resolves with
   * how many processes it signalled (0 when none had started yet or all had ended).
   */
  killCommand(instanceId: string, commandId: string, signal?: CommandSignal): Promise<number>;
  /**
   * Writes to the stdin of a running command started with `stdinOpen`, or closes it
   * (`data` null). Resolves false when no such command is running.
   */
  sendInput(instanceId: string, commandId: string, data: Buffer | null): Promise<boolean>;
  /** Opens a terminal in the instance; rejects with RuntimeFeatureUnavailable where it cannot. */
  openTerminal(instanceId: string, request: TerminalRequest): Promise<TerminalSession>;
  /**
   * Attaches again to a terminal that was let go without ending (detach(), or its
   * instance paused with its memory), replaying its recent output; fails when the
   * terminal's shell is no longer there. Absent: terminals cannot be attached again.
   */
  attachTerminal?(instanceId: string, terminalId: string): Promise<TerminalSession>;
  /**
   * Opens a regular file for reading as the VM user: its info, and its bytes from
   * `start` to `end` (inclusive) as a stream. Fails with GuestFileError.
   */
  openFile(
    instanceId: string,
    path: string,
    options: FileAccess & { maxBytes: number; range?: { start: number; end: number } },
  ): Promise<{ info: GuestFileInfo; body: NodeJS.ReadableStream }>;
  /** Information about a regular file without reading it (for range checks). */
  statFile(instanceId: string, path: string, options: FileAccess): Promise<GuestFileInfo>;
  /** Creates or replaces a file as the VM user (or root: asRoot), with its parent directories. */
  writeFile(instanceId: string, path: string, data: Buffer, options: FileAccess): Promise<{ info: GuestFileInfo; created: boolean }>;
  listDirectory(instanceId: string, path: string, options: FileAccess & { limit: number }): Promise<{ path: string; entries: GuestDirEntry[]; truncated: boolean }>;
  deleteFile(instanceId: string, path: string, options: FileAccess): Promise<{ path: string }>;
  /** Makes a directory and its missing parents; `created` is false when a directory was there already. */
  makeDirectory(instanceId: string, path: string, options: FileAccess): Promise<{ path: string; created: boolean }>;
  /** Renames a file or directory (replacing a file at `target`), making the target's missing parents. */
  renamePath(instanceId: string, path: string, target: string, options: FileAccess): Promise<{ path: string; target: string }>;
  /** Removes a file, or a directory with everything under it (a link itself, never what it points to). */
  removeTree(instanceId: string, path: string, options: FileAccess): Promise<{ path: string }>;
  /**
   * Puts every file a command run with keepUndo changed back as it was before it; the
   * files the revert changed. Rejects with UndoRefused when it cannot or should not.
   * Absent in runtimes that cannot keep undo points.
   */
  revertCommand?(instanceId: string, commandId: string, options: { force: boolean }): Promise<RevertOutcome>;
  /** Present when `capabilities.pause` is true (PausableRuntime). */
  pause?: PausableRuntime['pause'];
  resume?: PausableRuntime['resume'];
  /** Present when `capabilities.snapshot` is true (SnapshotRuntime). */
  snapshot?: SnapshotRuntime['snapshot'];
  deleteSnapshot?: SnapshotRuntime['deleteSnapshot'];
  listSnapshots?: SnapshotRuntime['listSnapshots'];
  /**
   * Creates of `count` instances are about to be asked for together (a fork's copies):
   * the runtime may make ahead, in one go, what each would otherwise make on its own
   * path (gVisor: their networks). Resolves when that is done; never rejects (a create
   * makes what it does not find). Absent where there is nothing to make ahead.
   */
  prepareCreates?(count: number): Promise<void>;
  /**
   * Where the host reaches TCP ports that programs inside the instance listen on, and
   * the ports the runtime itself uses there (which no one else may reach). Undefined for
   * an instance that has no such address; absent in runtimes whose instances have none.
   */
  portEndpoint?(instanceId: string): PortEndpoint | undefined;
  /**
   * Puts a new egress policy in force for a running instance: its firewall rules, and
   * the resolver its guest is told of. Absent in runtimes that cannot change it live.
   */
  setNetwork?(instanceId: string, network: NetworkPolicy): Promise<void>;
}

/** An instance's TCP ports as the host reaches them. */
export interface PortEndpoint {
  /** The instance's own address. */
  host: string;
  /** Ports of the runtime's own (e.g. its agent's) in the instance. */
  reservedPorts: readonly number[];
}

export interface RevertOutcome {
  changes: FileChangeEntry[];
  changesMethod?: CommandOutcome['changesMethod'];
}

/** Why a runtime does not revert a command: it kept no undo point, one was already used, or later commands changed its files (`files`). */
export class UndoRefused extends Error {
  readonly kind: 'no_undo_point' | 'already_reverted' | 'conflict';
  readonly files: string[];

  constructor(kind: UndoRefused['kind'], message: string, files: string[] = []) {
    super(message);
    this.name = 'UndoRefused';
    this.kind = kind;
    this.files = files;
  }
}

/** What a pause kept of the instance. */
export interface PauseOutcome {
  /**
   * Its memory and processes were saved and come back at resume; false: they ended, and
   * only its files (the writable layer) are kept.
   */
  memoryKept: boolean;
}

/** What a pause is asked to keep. */
export interface PauseOptions {
  /**
   * Keep memory and processes too, where the runtime can (`capabilities.pauseMemory`);
   * false: files only, the instance's processes end.
   */
  memory: boolean;
}

/** What a resume brought back. */
export interface ResumeOutcome {
  /** The instance's memory and processes came back as they were at its pause. */
  memoryRestored: boolean;
  /**
   * Set when the pause had kept memory but it could not be restored: why, in words. The
   * instance was booted over its files instead (its processes from before the pause are
   * gone), as after a files-only pause.
   */
  memoryLost?: string;
}

export interface ResumeRequest {
  instanceId: string;
  /** The machine it was made as (the same spec its provision() had). */
  spec: MachineSpec;
  log: Logger;
}

/**
 * Pause and resume, for runtimes whose `capabilities.pause` is true. Both may be called
 * again after a crash interrupted them and finish or undo what was half done: pause()
 * of an instance in any condition (running, half-paused, half-resumed, already paused)
 * leaves it paused; resume() that fails leaves it paused again (and rejects).
 */
export interface PausableRuntime {
  /**
   * Stops the instance's machine, keeping its writable layer (and its memory, when asked
   * and possible: the outcome says). Without options, memory is kept where it can be.
   */
  pause(instanceId: string, options?: PauseOptions): Promise<PauseOutcome>;
  /**
   * Starts a paused instance's machine again (from its saved memory when its pause kept
   * it, else over its writable layer); resolves once it is ready. A saved memory that
   * cannot be restored is not an error: the instance boots over its files and the
   * outcome says why its memory was lost.
   */
  resume(request: ResumeRequest): Promise<ResumeOutcome>;
}

/** What a snapshot kept of the instance, and what it costs. */
export interface SnapshotOutcome {
  /** Its memory and processes too (a new instance from it goes on running them); false: its files only. */
  memoryKept: boolean;
  /** Bytes of host disk the snapshot holds. */
  diskBytes: number;
}

/** What a snapshot is asked to keep. */
export interface SnapshotOptions {
  /**
   * Memory and processes too, where the runtime can (`capabilities.snapshotMemory`): a
   * running instance's are saved while it goes on running; a paused one's only when its
   * pause kept them. False: files only.
   */
  memory: boolean;
}

/**
 * Snapshots, for runtimes whose `capabilities.snapshot` is true: a copy of an
 * instance's file system (and memory, where the outcome says so) that outlives it, from
 * which provision() starts new instances (ProvisionRequest.fromSnapshot).
 */
export interface SnapshotRuntime {
  /**
   * Saves a ready or paused instance's state under `snapshotId`; the instance stays as it
   * was (a running one goes on running). Without options, memory is kept where it can be.
   */
  snapshot(instanceId: string, snapshotId: string, options?: SnapshotOptions): Promise<SnapshotOutcome>;
  /** Removes a snapshot's files. Idempotent. */
  deleteSnapshot(snapshotId: string): Promise<void>;
  /** Ids of the snapshots the runtime holds files for (for reconciliation). */
  listSnapshots(): Promise<string[]>;
}

/** Why no runtime can run instances on this host, for the 503 the API answers with. */
export interface RuntimeUnavailable {
  reason: string;
}

export type RuntimeSelection = { runtime: Runtime } | { unavailable: RuntimeUnavailable };
