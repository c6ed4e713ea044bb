// The protocol between roomkit and its agent inside an instance, defined once: the
// frames of the wire format, every operation with its request's fields and what it
// answers, the kinds of failure, and the constants both sides share. The TypeScript
// client reads it directly (frames.ts, client.ts); the Go agent's protocol_gen.go is
// generated from it (scripts/generate-agent-protocol.ts) and test/unit/agent-protocol
// fails when either side strays from it.
//
// A field's type is one of: string, bool, int, int64, uint16, uint64, bytes (base64 in
// JSON: names need not be UTF-8), a struct below, or a list of one (`[]`); `?` marks a
// field that may be left out.

export const AGENT_PROTOCOL = {
  version: 1,
  constants: {
    /** The agent's TCP port on the instance's address; below 1024, so no user but root can take it while the agent restarts. */
    port: 905,
    /** Where the agent reads the instance's key, in a directory only guest root may enter. */
    keyFile: '/run/roomkit-agent/key',
    /** The environment variable that marks every process of a command (inherited by its children), so its whole tree can be found. */
    commandMarker: 'ROOMKIT_COMMAND_ID',
    /** The largest frame either side takes; a larger one ends the connection. */
    maxFrameBytes: 16 * 1024 * 1024,
    /** Tasks the root service and everything started through it may have at once (its pids cgroup's limit). */
    rootServiceTasks: 256,
    /** The most of a command's latest output the agent keeps for a client that attaches later (ring buffer, per command). */
    keptOutputBytes: 1024 * 1024,
    /** How many ended commands the agent keeps (their end and kept output) for a late attach, the oldest dropped first. */
    endedKept: 16,
    /** How long the agent keeps an ended command for a late attach. */
    endedKeepMs: 10 * 60 * 1000,
  },
  /** One byte of type, four bytes of payload length (big-endian), the payload. */
  frames: {
    request: { code: 'Q', from: 'host', carries: 'the operation (JSON: a request with the instance key)' },
    reply: { code: 'R', from: 'agent', carries: 'the operation started or is done (JSON: its reply)' },
    fail: { code: 'F', from: 'agent', carries: 'the operation failed (JSON: failure)' },
    stdout: { code: 'o', from: 'agent', carries: 'output of a command (stdout, or its terminal)' },
    stderr: { code: 'e', from: 'agent', carries: 'stderr of a command' },
    end: { code: 'x', from: 'agent', carries: "a command ended, a read's data ended, a write is done (JSON: the operation's end)" },
    data: { code: 'd', from: 'agent', carries: 'content of a file being read' },
    input: { code: 'i', from: 'host', carries: 'stdin of a command, or content of a file being written' },
    close: { code: 'c', from: 'host', carries: 'the end of that input' },
    resize: { code: 'z', from: 'host', carries: "a terminal's new size (JSON: winsize)" },
    signal: { code: 'k', from: 'host', carries: "a signal for a command's processes (JSON: signalRequest)" },
  },
  structs: {
    winsize: { cols: 'uint16', rows: 'uint16' },
    fileInfo: { size: 'int64', mtime_ns: 'int64', ctime_ns: 'int64', ino: 'uint64' },
    entry: { name: 'bytes', type: 'string', size: 'int64', mode: 'string', mtime_ns: 'int64' },
    failure: { kind: 'string', message: 'string' },
    signalRequest: { signal: 'string' },
    /** What a ready instance must allow: its VM user (uid, gid) enters and writes its home and can start a shell. */
    readyCheck: { home: 'string', uid: 'int', gid: 'int' },
    /** The outcome of a readyCheck: `error` is empty when the instance is ready, else what failed. */
    readiness: { error: 'string' },
  },
  /**
   * Every request also carries `key` and `op`. `reply` is the first answer (a reply
   * frame); `end`, where present, the last (an end frame) after the operation's stream.
   */
  operations: {
    /**
     * Whether the agent runs, and how its boot went. With `ready_check`, it also checks
     * the instance's readiness in place of a command run for it, and answers `ready`;
     * an agent older than that field answers without `ready`.
     */
    hello: {
      request: { ready_check: 'readyCheck?' },
      reply: { agent: 'string', protocol: 'int', pid: 'int', uptime_ms: 'int64', boot_error: 'string', ready: 'readiness?' },
    },
    /**
     * Runs a program. `timeout_ms` bounds its run and `idle_output_ms` the time it may go
     * without printing (0 or absent: no bound); past either its whole tree is killed and
     * the end says `timed_out`, with `no_output` when it was the silence.
     */
    exec: {
      request: { argv: '[]string', env: '[]string', dir: 'string', uid: 'int', gid: 'int', command_id: 'string', timeout_ms: 'int64', idle_output_ms: 'int64?', stdin: 'bool', pty: 'winsize?' },
      reply: { pid: 'int' },
      end: { exit_code: 'int', signal: 'string?', timed_out: 'bool', no_output: 'bool?' },
    },
    /**
     * Connects to a command started by exec (by command_id, or by pid when command_id is
     * empty), running or recently ended: replays its output from `offset` (a count of
     * output bytes, stdout and stderr together; `dropped` says how many of those were no
     * longer kept), then passes on live output and ends with the command's end frame.
     * Input, close, resize and signal frames act on it as on exec's connection. A previous
     * connection of the command is closed: one client at a time.
     */
    attach: {
      request: { command_id: 'string', pid: 'int', offset: 'int64' },
      reply: { pid: 'int', command_id: 'string', offset: 'int64', dropped: 'int64', output_bytes: 'int64', pty: 'bool', running: 'bool' },
      end: { exit_code: 'int', signal: 'string?', timed_out: 'bool', no_output: 'bool?' },
    },
    kill: { request: { command_id: 'string', signal: 'string' }, reply: { signalled: 'int' } },
    stat: { request: { path: 'bytes', uid: 'int', gid: 'int' }, reply: 'fileInfo' },
    read: { request: { path: 'bytes', uid: 'int', gid: 'int', offset: 'int64', length: 'int64' }, reply: 'fileInfo', end: {} },
    write: { request: { path: 'bytes', uid: 'int', gid: 'int' }, reply: { ready: 'bool' }, end: { info: 'fileInfo', existed: 'bool' } },
    list: { request: { path: 'bytes', uid: 'int', gid: 'int', limit: 'int' }, reply: { entries: '[]entry' } },
    delete: { request: { path: 'bytes', uid: 'int', gid: 'int' }, reply: {} },
    heads: { request: { paths: '[]bytes', bytes: 'int' }, reply: { heads: '[]bytes' } },
    // Changes of a file system's tree, as the user named (uid, gid): what E2B's file
    // system service asks for, done by the agent rather than by a shell in the guest.
    /** Makes a directory and its missing parents; `created` is false when a directory was there already. */
    mkdir: { request: { path: 'bytes', uid: 'int', gid: 'int' }, reply: { created: 'bool' } },
    /** Renames `path` to `target` (replacing a file there), making the target's missing parents. */
    rename: { request: { path: 'bytes', target: 'bytes', uid: 'int', gid: 'int' }, reply: {} },
    /** Removes a file, or a directory with everything under it. */
    rmtree: { request: { path: 'bytes', uid: 'int', gid: 'int' }, reply: {} },
  },
  /** What each `type` of a listing's entry means. */
  entryTypes: { file: 'f', directory: 'd', symlink: 'l', other: 'o' },
  /** The kinds a failure frame names. */
  failures: [
    'bad_request',
    'unauthorized',
    'not_found',
    'start_failed',
    'pty_failed',
    'permission_denied',
    'is_a_directory',
    'not_a_directory',
    'invalid_path',
    'no_space',
    'changed',
    'io_error',
  ],
} as const;

type Protocol = typeof AGENT_PROTOCOL;
type Structs = Protocol['structs'];
export type OperationName = keyof Protocol['operations'];
export type FrameName = keyof Protocol['frames'];
export type FailureKind = Protocol['failures'][number];

/** The TypeScript value a field of the definition's type is sent as. */
type Value<T extends string> = T extends `${infer Inner}?`
  ? Value<Inner>
  : T extends `[]${infer Item}`
    ? Value<Item>[]
    : T extends 'string' | 'bytes'
      ? string
      : T extends 'bool'
        ? boolean
        : T extends 'int' | 'int64' | 'uint16' | 'uint64'
          ? number
          : T extends keyof Structs
            ? Fields<Structs[T]>
            : never;

type Fields<F> = { [K in keyof F as F[K] extends `${string}?` ? never : K]: Value<F[K] & string> } & {
  [K in keyof F as F[K] extends `${string}?` ? K : never]?: Value<F[K] & string>;
};

/** The fields of an operation's request (besides key and op). */
export type RequestOf<Op extends OperationName> = Fields<Protocol['operations'][Op]['request']>;

type Answer<A> = A extends keyof Structs ? Structs[A] : A;
/**
 * An operation's reply as it arrives: the guest is not trusted, so each field is
 * unknown until checked, and only the fields the definition names can be read.
 */
export type ReplyOf<Op extends OperationName> = Partial<Record<keyof Answer<Protocol['operations'][Op]['reply']>, unknown>>;
export type EndOf<Op extends OperationName> = Protocol['operations'][Op] extends { end: infer E } ? Partial<Record<keyof Answer<E>, unknown>> : never;
