// The instance state machine: the spec's progression, the states after it, and that
// every other move throws.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  assertTransition,
  canTransition,
  IllegalTransitionError,
  LIVE_STATES,
  PROVISION_STATES,
  STATES,
} from '../../src/core/lifecycle.ts';

describe('instance lifecycle', () => {
  it('follows the spec progression active → ... → ready, one step at a time', () => {
    assert.deepEqual(PROVISION_STATES, [
      'active',
      'network_allocated',
      'ftap_created',
      'image_generated',
      'vm_started',
      'vm_booted',
      'ready',
    ]);
    for (let i = 0; i + 1 < PROVISION_STATES.length; i++) {
      assert.doesNotThrow(() => assertTransition(PROVISION_STATES[i]!, PROVISION_STATES[i + 1]!));
    }
  });

  it('refuses skipping or going back a step', () => {
    assert.throws(() => assertTransition('active', 'ready'), IllegalTransitionError);
    assert.throws(() => assertTransition('active', 'ftap_created'), IllegalTransitionError);
    assert.throws(() => assertTransition('ready', 'active'), IllegalTransitionError);
    assert.throws(() => assertTransition('vm_booted', 'vm_started'), IllegalTransitionError);
    assert.throws(() => assertTransition('ready', 'ready'), IllegalTransitionError);
  });

  it('can stop or fail from every live state, and stops only through stopping', () => {
    for (const state of LIVE_STATES) {
      assert.ok(canTransition(state, 'failed'), `${state} -> failed`);
      // A pause or resume under way ends (paused or ready) before a stop begins.
      if (state !== 'stopping' && state !== 'pausing' && state !== 'resuming') assert.ok(canTransition(state, 'stopping'), `${state} -> stopping`);
      if (state !== 'stopping') assert.ok(!canTransition(state, 'stopped'), `${state} -> stopped must go through stopping`);
    }
    assert.doesNotThrow(() => assertTransition('stopping', 'stopped'));
  });

  it('pauses only from ready and resumes only from paused, a failed resume going back to paused', () => {
    assert.doesNotThrow(() => assertTransition('ready', 'pausing'));
    assert.doesNotThrow(() => assertTransition('pausing', 'paused'));
    assert.doesNotThrow(() => assertTransition('paused', 'resuming'));
    assert.doesNotThrow(() => assertTransition('resuming', 'ready'));
    assert.doesNotThrow(() => assertTransition('resuming', 'paused'));
    for (const state of PROVISION_STATES.filter((s) => s !== 'ready')) {
      assert.throws(() => assertTransition(state, 'pausing'), IllegalTransitionError);
    }
    assert.throws(() => assertTransition('paused', 'ready'), IllegalTransitionError);
    assert.throws(() => assertTransition('pausing', 'resuming'), IllegalTransitionError);
    assert.throws(() => assertTransition('paused', 'pausing'), IllegalTransitionError);
    assert.throws(() => assertTransition('pausing', 'stopping'), IllegalTransitionError);
  });

  it('has no way out of stopped or failed', () => {
    for (const to of STATES) {
      assert.throws(() => assertTransition('stopped', to), IllegalTransitionError);
      assert.throws(() => assertTransition('failed', to), IllegalTransitionError);
    }
  });

  it('names both ends of an illegal move', () => {
    assert.throws(
      () => assertTransition('failed', 'ready'),
      (err: unknown) => err instanceof IllegalTransitionError && err.from === 'failed' && err.to === 'ready' && /failed -> ready/.test(err.message),
    );
  });
});
