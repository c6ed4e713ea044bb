// The two output buffers a command's output goes through: the head-and-tail budget of a
// CommandResult and the log that streams and background reads are served from. Memory
// must stay within budget whatever a command prints, and offsets and characters must
// come out exact; each piece is of one stream. And the input a request gives a command.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decodeInput, OpenStdin } from '../../src/core/command-input.ts';
import { completeUtf8Length, OutputLog } from '../../src/core/output-log.ts';
import type { AppError } from '../../src/errors.ts';
import { HeadTailBuffer } from '../../src/host/output.ts';

/** Chunks as a pipe hands them out: fresh 64 KiB buffers of a repeating pattern. */
function* pipeChunks(totalBytes: number, chunkBytes = 65536): Generator<Buffer> {
  for (let sent = 0; sent < totalBytes; sent += chunkBytes) {
    const chunk = Buffer.alloc(Math.min(chunkBytes, totalBytes - sent));
    for (let i = 0; i < chunk.length; i++) chunk[i] = 97 + ((sent + i) % 26);
    yield chunk;
  }
}

describe('HeadTailBuffer', () => {
  it('holds its budget whether a command prints 10 MB or 200 MB', () => {
    const peak = (bytes: number) => {
      const buffer = new HeadTailBuffer(1024 * 1024);
      let most = 0;
      for (const chunk of pipeChunks(bytes)) {
        buffer.push(chunk);
        most = Math.max(most, buffer.retainedBytes);
      }
      assert.equal(buffer.total, bytes);
      return most;
    };
    const small = peak(10_000_000);
    const large = peak(200_000_000);
    assert.ok(small <= 1024 * 1024 + 2 * 65536, `10 MB of output held ${small} bytes`);
    assert.ok(large <= 1024 * 1024 + 2 * 65536, `200 MB of output held ${large} bytes`);
  });

  it('keeps the exact first and last halves and says how much it dropped', () => {
    const buffer = new HeadTailBuffer(10);
    for (const part of ['abc', 'defgh', 'ijklmnop', 'qrstuvwxyz']) buffer.push(Buffer.from(part));
    assert.equal(buffer.truncated, true);
    assert.equal(buffer.text(), 'abcde\n[... 16 bytes of output omitted ...]\nvwxyz');
  });

  it('keeps everything below the budget', () => {
    const buffer = new HeadTailBuffer(100);
    buffer.push(Buffer.from('hello '));
    buffer.push(Buffer.from('world'));
    assert.equal(buffer.truncated, false);
    assert.equal(buffer.text(), 'hello world');
  });
});

describe('OutputLog', () => {
  it('holds at most its budget (plus one chunk) however much is appended', () => {
    const log = new OutputLog(1024 * 1024);
    let most = 0;
    for (const chunk of pipeChunks(100_000_000)) {
      log.append(chunk);
      most = Math.max(most, log.retainedBytes);
    }
    assert.equal(log.total, 100_000_000);
    assert.ok(most <= 1024 * 1024 + 65536, `held ${most} bytes`);
  });

  it('reads from an offset, and from the oldest kept byte when older output was dropped', () => {
    const log = new OutputLog(10);
    log.append(Buffer.from('0123456789'));
    log.append(Buffer.from('abcdef'));
    assert.deepEqual(log.read(12, 100), { data: 'cdef', offset: 12, end: 16 });
    assert.deepEqual(log.read(0, 100), { data: '6789abcdef', offset: 6, end: 16 });
    assert.deepEqual(log.read(8, 3), { data: '89a', offset: 8, end: 11 });
    assert.deepEqual(log.read(16, 100), { data: '', offset: 16, end: 16 });
    assert.deepEqual(log.read(99, 100), { data: '', offset: 16, end: 16 });
  });

  it('hands listeners whole characters with exact byte offsets, even when a chunk splits one', () => {
    const log = new OutputLog(1024);
    const pieces: { data: string; offset: number; end: number }[] = [];
    log.subscribe((p) => pieces.push(p));
    const text = Buffer.from('héllo → wörld 😀!');
    // Cut between every byte: the worst a pipe can do.
    for (let i = 0; i < text.length; i++) log.append(text.subarray(i, i + 1));
    log.flush();
    assert.equal(pieces.map((p) => p.data).join(''), text.toString());
    for (const piece of pieces) assert.equal(Buffer.byteLength(piece.data), piece.end - piece.offset);
    for (let i = 1; i < pieces.length; i++) assert.equal(pieces[i]!.offset, pieces[i - 1]!.end);
    assert.equal(pieces.at(-1)!.end, text.length);
  });

  it('stops a limited read before a character the limit would cut', () => {
    const log = new OutputLog(1024);
    log.append(Buffer.from('ab€cd'));
    assert.deepEqual(log.read(0, 3), { data: 'ab', offset: 0, end: 2 });
    assert.deepEqual(log.read(2, 3), { data: '€', offset: 2, end: 5 });
  });

  it('flushes an unfinished character at the end as a replacement, not silence', () => {
    const log = new OutputLog(1024);
    const pieces: string[] = [];
    log.subscribe((p) => pieces.push(p.data));
    log.append(Buffer.from([0x61, 0xe2, 0x82]));
    assert.deepEqual(pieces, ['a']);
    log.flush();
    assert.equal(pieces.length, 2);
    assert.match(pieces[1]!, /\uFFFD/);
  });
});

describe('OutputLog with stdout and stderr apart', () => {
  it('hands listeners pieces of one stream each, offsets running on across streams', () => {
    const log = new OutputLog(1024);
    const pieces: { data: string; offset: number; end: number; stream: string }[] = [];
    log.subscribe((p) => pieces.push(p));
    log.append(Buffer.from('out1\n'), 'stdout');
    log.append(Buffer.from('err\n'), 'stderr');
    // A character split across two chunks of the same stream stays whole.
    log.append(Buffer.from('caf\xc3', 'latin1'), 'stdout');
    log.append(Buffer.from('\xa9\n', 'latin1'), 'stdout');
    log.flush();
    assert.deepEqual(pieces, [
      { data: 'out1\n', offset: 0, end: 5, stream: 'stdout' },
      { data: 'err\n', offset: 5, end: 9, stream: 'stderr' },
      { data: 'caf', offset: 9, end: 12, stream: 'stdout' },
      { data: '\u00e9\n', offset: 12, end: 15, stream: 'stdout' },
    ]);
    assert.deepEqual(log.read(0, 100), { data: 'out1\nerr\ncaf\u00e9\n', offset: 0, end: 15 });
  });

  it('reads kept output back as pieces of one stream each, from an offset and within a limit', () => {
    const log = new OutputLog(12);
    log.append(Buffer.from('aaaa'), 'stdout');
    log.append(Buffer.from('bbbb'), 'stderr');
    log.append(Buffer.from('cc'), 'stderr');
    log.append(Buffer.from('dddd'), 'stdout');
    // 14 bytes printed, the last 12 kept: from offset 2.
    assert.deepEqual(
      log.readPieces(0, 100).map((p) => [p.data, p.offset, p.end, p.stream]),
      [
        ['aa', 2, 4, 'stdout'],
        ['bbbbcc', 4, 10, 'stderr'],
        ['dddd', 10, 14, 'stdout'],
      ],
    );
    assert.deepEqual(
      log.readPieces(5, 6).map((p) => [p.data, p.offset, p.end, p.stream]),
      [
        ['bbbcc', 5, 10, 'stderr'],
        ['d', 10, 11, 'stdout'],
      ],
    );
    assert.deepEqual(log.readPieces(14, 100), []);
  });

  it('forgets the runs of output no longer kept', () => {
    const log = new OutputLog(1024);
    for (let i = 0; i < 100_000; i++) log.append(Buffer.from('x'), i % 2 === 0 ? 'stdout' : 'stderr');
    const pieces = log.readPieces(0, 1024);
    assert.equal(pieces[0]!.offset, 100_000 - 1024);
    assert.equal(pieces.length, 1024);
    assert.ok((log as unknown as { runStarts: number[] }).runStarts.length < 4096);
  });
});

describe('stdin given in a request', () => {
  it('is decoded from text or base64 and bounded', () => {
    assert.deepEqual(decodeInput('héllo', undefined, 100, 'stdin'), Buffer.from('héllo'));
    assert.deepEqual(decodeInput('AAH+/w==', 'base64', 100, 'stdin'), Buffer.from([0, 1, 254, 255]));
    assert.deepEqual(decodeInput('', 'base64', 100, 'stdin'), Buffer.alloc(0));
    for (const bad of ['AAH', 'AA==AA==', 'AAH+/w==\n', '****']) {
      assert.throws(() => decodeInput(bad, 'base64', 100, 'stdin'), (err: AppError) => err.code === 'validation_error', bad);
    }
    assert.deepEqual(decodeInput('x'.repeat(100), 'utf8', 100, 'stdin').length, 100);
    assert.throws(() => decodeInput('x'.repeat(101), 'utf8', 100, 'data'), (err: AppError) => err.code === 'stdin_too_large' && err.status === 413 && /^data is 101 bytes/.test(err.message));
  });

  it('is written in order, and not after its close', async () => {
    const stdin = new OpenStdin();
    const sent: (string | null)[] = [];
    const send = async (data: Buffer | null) => {
      await new Promise((r) => setTimeout(r, Math.random() * 5));
      sent.push(data === null ? null : data.toString());
      return true;
    };
    await Promise.all([stdin.write(Buffer.from('a'), false, send), stdin.write(Buffer.from('b'), false, send), stdin.write(Buffer.from('c'), true, send)]);
    assert.deepEqual(sent, ['a', 'b', 'c', null]);
    assert.equal(stdin.total, 3);
    assert.equal(stdin.closed, true);
    await assert.rejects(stdin.write(Buffer.from('d'), false, send), (err: AppError) => err.code === 'stdin_not_open');
    // A command that ended meanwhile: not taken.
    assert.equal(await new OpenStdin().write(Buffer.from('e'), false, async () => false), false);
  });
});

describe('completeUtf8Length', () => {
  it('cuts before a trailing sequence that is not finished, and only then', () => {
    const euro = Buffer.from('€'); // e2 82 ac
    assert.equal(completeUtf8Length(Buffer.from('abc')), 3);
    assert.equal(completeUtf8Length(Buffer.concat([Buffer.from('a'), euro])), 4);
    assert.equal(completeUtf8Length(Buffer.concat([Buffer.from('a'), euro.subarray(0, 2)])), 1);
    assert.equal(completeUtf8Length(Buffer.concat([Buffer.from('a'), euro.subarray(0, 1)])), 1);
    assert.equal(completeUtf8Length(Buffer.from([0x61, 0xff])), 2);
    assert.equal(completeUtf8Length(Buffer.from([0x80, 0x80, 0x80, 0x80])), 4);
  });
});
