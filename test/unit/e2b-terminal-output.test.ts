// A pseudo-terminal's output as the E2B adapter keeps it for its streams: every reader
// gets what came after the offset it reads from, the oldest output goes past the bound,
// and a reader waiting for more wakes on output, on the terminal's end, or on abort.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { followTerminal } from '../../src/adapters/e2b/process-service.ts';
import { TerminalOutput } from '../../src/adapters/e2b/terminal-output.ts';
import type { Terminal, TerminalEnd } from '../../src/core/terminals.ts';

function fakeTerminal() {
  let listener: (chunk: Buffer) => void = () => {};
  let end!: (end: TerminalEnd) => void;
  const ended = new Promise<TerminalEnd>((resolve) => (end = resolve));
  const terminal = { onOutput: (l: (chunk: Buffer) => void) => void (listener = l), ended } as unknown as Terminal;
  return { terminal, print: (text: string) => listener(Buffer.from(text)), end };
}

describe("a terminal's kept output", () => {
  it('gives each reader what came after its offset, cutting a chunk it starts inside', () => {
    const { terminal, print } = fakeTerminal();
    const output = new TerminalOutput(terminal);
    print('hello ');
    print('world');
    assert.deepEqual(output.since(0).chunks.map(String), ['hello ', 'world']);
    assert.deepEqual(output.since(3).chunks.map(String), ['lo ', 'world']);
    assert.deepEqual(output.since(11), { chunks: [], next: 11 });
  });

  it('keeps the latest 64 KiB for a reader that reconnects', () => {
    const { terminal, print } = fakeTerminal();
    const output = new TerminalOutput(terminal);
    for (let i = 0; i < 100; i++) print('x'.repeat(1024));
    assert.ok(output.oldest > 0 && 100 * 1024 - output.oldest <= 65 * 1024, String(output.oldest));
    assert.equal(output.since(output.oldest).next, 100 * 1024);
  });

  it('wakes a waiting reader on output and on the end, and says when it waited in vain', async () => {
    const { terminal, print, end } = fakeTerminal();
    const output = new TerminalOutput(terminal);
    const signal = new AbortController().signal;
    assert.equal(await output.wait(0, 10, signal), true, 'nothing came: quiet');
    const woken = output.wait(0, 10_000, signal);
    print('x');
    assert.equal(await woken, false);
    const atEnd = output.wait(1, 10_000, signal);
    end({ kind: 'exit', exitCode: 3 });
    assert.equal(await atEnd, false);
    assert.deepEqual(output.end, { kind: 'exit', exitCode: 3 });
    const aborted = new AbortController();
    const other = new TerminalOutput(fakeTerminal().terminal);
    const waiting = other.wait(0, 10_000, aborted.signal);
    aborted.abort();
    assert.equal(await waiting, false);
  });
});

describe("a terminal's stream of E2B events", () => {
  it('sends output that came while a slow reader took the last chunks, before the end', async () => {
    const { terminal, print, end } = fakeTerminal();
    const output = new TerminalOutput(terminal);
    print('first\n');
    const events = followTerminal(output, 0, new AbortController().signal);
    const first = await events.next();
    assert.equal(String((first.value as { event: { value: { output: { value: Buffer } } } }).event.value.output.value), 'first\n');
    // While the reader holds the first chunk, the program prints its last line and exits.
    print('30 100\n');
    end({ kind: 'exit', exitCode: 7 });
    await terminal.ended;
    const rest: { case: string; value: unknown }[] = [];
    for await (const e of events) rest.push(e.event as { case: string; value: unknown });
    assert.deepEqual(
      rest.map((e) => (e.case === 'data' ? String((e.value as { output: { value: Buffer } }).output.value) : e.case)),
      ['30 100\n', 'end'],
    );
  });
});
