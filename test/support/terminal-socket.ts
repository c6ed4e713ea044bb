// A client of the terminal WebSocket for host tests: it keeps everything the server sent
// (the terminal's bytes as text, the JSON control messages) and waits for output.
export interface TerminalSocket {
  ws: WebSocket;
  /** The terminal's output so far. */
  text(): string;
  /** The server's control messages (`opened`, `exit`, `closed`), in order. */
  messages: Record<string, unknown>[];
  closed: Promise<{ code: number; reason: string }>;
  /** Resolves with the first match of `pattern` in the output, or rejects after `timeoutMs` saying what the output was. */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<string>;
  /** Types `data` into the terminal. */
  send(data: string): void;
}

/** Opens the terminal at `url` (http or https: the WebSocket scheme is derived) with these request headers; resolves once it is open. */
export async function openTerminalSocket(url: string, headers: Record<string, string>): Promise<TerminalSocket> {
  const ws = new WebSocket(url.replace(/^http/, 'ws'), { headers } as unknown as string[]);
  ws.binaryType = 'arraybuffer';
  let output = '';
  const messages: Record<string, unknown>[] = [];
  const waiters = new Set<() => void>();
  ws.addEventListener('message', (event) => {
    if (typeof event.data === 'string') messages.push(JSON.parse(event.data) as Record<string, unknown>);
    else output += Buffer.from(event.data as ArrayBuffer).toString('utf8');
    for (const w of waiters) w();
  });
  const closed = new Promise<{ code: number; reason: string }>((resolve) => ws.addEventListener('close', (e) => resolve({ code: e.code, reason: e.reason })));
  await new Promise<void>((resolve, reject) => {
    ws.addEventListener('open', () => resolve());
    ws.addEventListener('error', () => reject(new Error('the WebSocket did not open')));
  });
  return {
    ws,
    messages,
    closed,
    text: () => output,
    send: (data) => ws.send(new TextEncoder().encode(data)),
    waitFor(pattern, timeoutMs = 15_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const m = pattern.exec(output);
          if (!m) return;
          waiters.delete(check);
          clearTimeout(timer);
          resolve(m[0]);
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`no ${pattern} in the terminal's output within ${timeoutMs} ms; it has: ${JSON.stringify(output.slice(-500))}`));
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
  };
}
