// How a runtime reaches an instance through its agent, the one way in: the endpoint
// from what the runtime recorded when it made the instance, and an agent that cannot be
// reached turned into the contract's refusal (RuntimeFeatureUnavailable), saying so.
import { RuntimeFeatureUnavailable } from '../types.ts';
import { AGENT_PORT, type AgentEndpoint, AgentUnavailable } from './client.ts';

/** The agent's endpoint from an instance's record: its address and key; undefined when it has none. */
export function agentEndpointOf(record: { guestAddress?: string | undefined; agentKey?: string | undefined } | undefined): AgentEndpoint | undefined {
  if (!record?.agentKey || !record.guestAddress) return undefined;
  return { host: record.guestAddress, port: AGENT_PORT, key: record.agentKey };
}

/**
 * Runs an operation through the agent. An instance without one, or an agent that cannot
 * be reached (nothing ran), fails it with RuntimeFeatureUnavailable; `onUnreachable`
 * hears of the latter (e.g. to log it). The agent's init starts its server again when
 * it ends (images/guest/agent/init.go), so a later call may find it back.
 */
export async function throughAgent<T>(
  endpoint: AgentEndpoint | undefined,
  operation: (endpoint: AgentEndpoint) => Promise<T>,
  onUnreachable?: (err: AgentUnavailable) => void,
): Promise<T> {
  if (!endpoint) {
    throw new RuntimeFeatureUnavailable("this instance runs without roomkit's agent (an older roomkit made it), the only way into it: delete the instance and create it again");
  }
  try {
    return await operation(endpoint);
  } catch (err) {
    if (!(err instanceof AgentUnavailable)) throw err;
    onUnreachable?.(err);
    throw new RuntimeFeatureUnavailable(`the instance's agent does not answer (${err.message}); try again in a moment, and if it goes on, delete the instance and create it again`);
  }
}
