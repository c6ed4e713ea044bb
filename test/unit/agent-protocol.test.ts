// The agent protocol is defined once (src/runtimes/agent/protocol.ts): the host's client
// reads it, and the Go agent's protocol_gen.go is generated from it. These checks fail
// when one side changes alone: the definition without a fresh protocol_gen.go (or that
// file edited by hand), or the agent's code declaring or handling what the definition
// does not say.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { AGENT_PACKAGE_DIR, GENERATED_GO, goName, renderGo } from '../../scripts/generate-agent-protocol.ts';
import { AGENT_PROTOCOL } from '../../src/runtimes/agent/protocol.ts';
import { FRAME } from '../../src/runtimes/agent/frames.ts';

/** The agent's own Go sources (not the generated file, not tests), by name. */
function agentSources(): Map<string, string> {
  const names = readdirSync(AGENT_PACKAGE_DIR).filter((n) => n.endsWith('.go') && n !== 'protocol_gen.go' && !n.endsWith('_test.go'));
  return new Map(names.map((n) => [n, readFileSync(join(AGENT_PACKAGE_DIR, n), 'utf8')]));
}

/** The names a Go source declares as constants and types. */
function declarations(source: string): { constants: string[]; types: string[] } {
  const blocks = [...source.matchAll(/^const \(\n([\s\S]*?)^\)/gm)].flatMap((m) => [...(m[1] ?? '').matchAll(/^\t(\w+)\b/gm)].map((c) => c[1] ?? ''));
  const single = [...source.matchAll(/^const (\w+)/gm)].map((m) => m[1] ?? '');
  return { constants: [...blocks, ...single], types: [...source.matchAll(/^type (\w+)/gm)].map((m) => m[1] ?? '') };
}

describe('the agent protocol', () => {
  it("the agent's protocol_gen.go is what the definition renders (npm run agent:generate writes it)", () => {
    assert.equal(readFileSync(GENERATED_GO, 'utf8'), renderGo());
  });

  it('the agent declares no frame, operation, failure kind, entry type, request or answer of its own', () => {
    const generated = declarations(readFileSync(GENERATED_GO, 'utf8'));
    // Positive control: the parse finds what protocol_gen.go declares.
    assert.ok(generated.constants.includes('frameRequest') && generated.constants.includes('failIOError'), generated.constants.join(' '));
    assert.ok(generated.types.includes('request') && generated.types.includes('execEnd'), generated.types.join(' '));
    for (const [name, source] of agentSources()) {
      const own = declarations(source);
      for (const ident of [...own.constants, ...own.types]) {
        assert.ok(!generated.constants.includes(ident) && !generated.types.includes(ident), `${name} declares ${ident}, which protocol_gen.go declares`);
      }
      for (const ident of own.constants) assert.doesNotMatch(ident, /^(frame|op|fail|entry)[A-Z]/, `${name} declares ${ident} outside the protocol's definition`);
      // Kinds of failure and answers come from the definition, not from literals.
      assert.doesNotMatch(source, /\.fail\("/, `${name} names a kind of failure of its own`);
      assert.doesNotMatch(source, /sendJSON\(frame\w+, map\[/, `${name} answers with a map rather than the definition's reply or end`);
    }
  });

  it('the agent handles exactly the operations the definition lists, and answers each with its reply and end', () => {
    const sources = agentSources();
    const serve = sources.get('serve.go') ?? '';
    const dispatch = /switch req\.Op \{\n([\s\S]*?)\n\t\}/.exec(serve)?.[1] ?? '';
    const handled = [...dispatch.matchAll(/^\tcase (.+):$/gm)].map((m) => m[1]);
    const defined = Object.keys(AGENT_PROTOCOL.operations).map((op) => `op${goName(op)}`);
    assert.deepEqual([...handled].sort(), [...defined].sort());
    const all = [...sources.values()].join('\n');
    for (const [op, operation] of Object.entries(AGENT_PROTOCOL.operations)) {
      const answers: [string, unknown][] = [['Reply', operation.reply], ...('end' in operation ? [['End', operation.end] as [string, unknown]] : [])];
      for (const [suffix, answer] of answers) {
        // An answer that is one of the shared structs is sent as that struct (e.g. stat's fileInfo).
        const type = typeof answer === 'string' ? answer : `${goName(op, false)}${suffix}`;
        assert.match(all, new RegExp(`\\b${type}\\{`), `nothing of the agent sends ${op}'s ${suffix.toLowerCase()} (${type})`);
      }
    }
  });

  it("the host's frames are the definition's", () => {
    for (const [name, frame] of Object.entries(AGENT_PROTOCOL.frames)) assert.equal(FRAME[name as keyof typeof FRAME], frame.code, name);
    const codes = Object.values(AGENT_PROTOCOL.frames).map((f) => f.code);
    assert.equal(new Set(codes).size, codes.length, 'two frames share a type byte');
  });
});
