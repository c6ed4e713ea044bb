// The `network` object: an instance's egress policy, as a profile, a create and
// PUT …/network state it. One schema for all three, so they cannot drift.
import Type from 'typebox';
import { MAX_POLICY_ENTRIES } from '../network/egress/policy.ts';

export const EGRESS_MODES = ['none', 'internet', 'allowlist'] as const;
/** The longest entry: a 253-character name with `*.` and a `:port`. */
const MAX_ENTRY_LENGTH = 263;

const entries = (what: string) =>
  Type.Array(Type.String({ minLength: 1, maxLength: MAX_ENTRY_LENGTH }), {
    maxItems: MAX_POLICY_ENTRIES,
    description: what,
    default: [],
  });

export const NETWORK_FIELDS = {
  egress: Type.Enum(EGRESS_MODES, {
    description:
      '`internet`: outbound traffic to public addresses; `none`: no route out; `allowlist`: only what `allow` names (less what `deny` names), ' +
      'through roomkit\'s resolver and egress proxy (docs/api.md, "Egress allowlists").',
    default: 'internet',
  }),
  allow: entries(
    `With egress \`allowlist\`: what instances may reach. Each entry a domain (\`example.com\`; \`*.example.com\` for its subdomains), reached on ports 80 and 443 ` +
      `through the egress proxy, or an IPv4 address or range (\`203.0.113.0/24\`), reached directly over TCP; either with an optional \`:port\`. ` +
      `Private, loopback, link-local and metadata ranges are never reachable. At most ${MAX_POLICY_ENTRIES} entries; empty for other egress modes.`,
  ),
  deny: entries(
    `With egress \`allowlist\`: entries (as in \`allow\`) never reached, even when \`allow\` names them. At most ${MAX_POLICY_ENTRIES}; empty for other egress modes.`,
  ),
};

export const Network = Type.Object(NETWORK_FIELDS, { additionalProperties: false, description: 'Egress policy of the instances.' });
export type Network = Type.Static<typeof Network>;

/** A network as a request gives it: every field optional (defaults: the profile's, or those above). */
export const NetworkChange = Type.Object(
  { egress: Type.Optional(NETWORK_FIELDS.egress), allow: Type.Optional(NETWORK_FIELDS.allow), deny: Type.Optional(NETWORK_FIELDS.deny) },
  { additionalProperties: false, description: 'Egress policy of the instances.' },
);
export type NetworkChange = Type.Static<typeof NetworkChange>;

/** The body of PUT …/network: a whole policy (lists left out are empty). */
export const NetworkBody = Type.Object(
  { egress: NETWORK_FIELDS.egress, allow: Type.Optional(NETWORK_FIELDS.allow), deny: Type.Optional(NETWORK_FIELDS.deny) },
  { additionalProperties: false, description: 'The egress policy the instance runs with from now on (a profile\'s `network` object; `egress` required).' },
);
export type NetworkBody = Type.Static<typeof NetworkBody>;
