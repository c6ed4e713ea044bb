// E2B's network options as roomkit's egress policy: `network.allowOut` and `denyOut` of a
// create, `allowInternetAccess`, and the body of PUT /sandboxes/{id}/network.
//
// E2B allows everything unless `allowOut` is given; `denyOut: ["0.0.0.0/0"]` is how its
// users say "nothing but allowOut". Here:
// - `allowOut` given: egress `allowlist` with those entries; `denyOut` less 0.0.0.0/0 is
//   the deny list (a deny wins over an allow here, where E2B lets the allow win);
// - no `allowOut`, and `allowInternetAccess: false` or `denyOut` with 0.0.0.0/0: `none`;
// - `denyOut` of some ranges without `allowOut` (the internet less them): refused, since
//   an allowlist's resolver answers only names it allows;
// - nothing: the template's profile's network (a create), or `internet` (an update,
//   which E2B treats as a whole: a field left out is cleared).
// Header rules and an egress proxy of the caller's own are refused: not served.
import Type from 'typebox';
import type { NetworkChange } from '../../core/network-schema.ts';
import { AppError } from '../../errors.ts';

const ALL_TRAFFIC = '0.0.0.0/0';

export const E2bNetwork = Type.Object({
  allowOut: Type.Optional(Type.Array(Type.String({ maxLength: 263 }), { maxItems: 100 })),
  denyOut: Type.Optional(Type.Array(Type.String({ maxLength: 263 }), { maxItems: 100 })),
  allowPublicTraffic: Type.Optional(Type.Boolean()),
  maskRequestHost: Type.Optional(Type.String()),
  rules: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
  egressProxy: Type.Optional(Type.Unknown()),
});
export type E2bNetwork = Type.Static<typeof E2bNetwork>;

export const NetworkUpdateBody = Type.Object({
  allow_internet_access: Type.Optional(Type.Boolean()),
  allowOut: E2bNetwork.properties.allowOut,
  denyOut: E2bNetwork.properties.denyOut,
  rules: E2bNetwork.properties.rules,
  egressProxy: E2bNetwork.properties.egressProxy,
});

/** The egress policy E2B's options ask for; undefined when they ask for nothing. */
export function egressOf(network: Omit<E2bNetwork, 'allowPublicTraffic' | 'maskRequestHost'> | undefined, allowInternetAccess: boolean | undefined): NetworkChange | undefined {
  if (network?.rules !== undefined && Object.keys(network.rules).length > 0) {
    throw new AppError('validation_error', 'network.rules (headers injected into outbound requests) is not served; the egress policy allows or refuses, it does not rewrite');
  }
  if (network?.egressProxy != null) throw new AppError('validation_error', 'network.egressProxy (an egress proxy of your own) is not served');
  const allowOut = network?.allowOut ?? [];
  const denyOut = network?.denyOut ?? [];
  const denyAll = denyOut.includes(ALL_TRAFFIC);
  if (allowOut.length > 0) return { egress: 'allowlist', allow: allowOut, deny: denyOut.filter((e) => e !== ALL_TRAFFIC) };
  if (allowInternetAccess === false || denyAll) return { egress: 'none', allow: [], deny: [] };
  if (denyOut.length > 0) {
    throw new AppError(
      'validation_error',
      `network.denyOut without allowOut (the internet less ${denyOut.join(', ')}) is not served: name what the sandbox may reach in allowOut, with denyOut ["0.0.0.0/0"]`,
    );
  }
  return undefined;
}
