// Egress decisions into the audit trail: the runtime reports them aggregated (a record
// for the first decision of a kind, one for its repeats each minute, network/egress/
// decisions.ts), and each becomes a record of the instance's organization, with
// via `egress`, action `egress.dns` or `egress.connect`, and what was decided in `egress`.
// There is no request behind one: its key is the nil UUID and its request id `egress`.
import type { Logger } from 'pino';
import { timeOrderedUuid } from '../lib/ids.ts';
import type { ReportedDecision } from '../network/egress/decisions.ts';
import type { Db } from '../store/db.ts';
import type { AuditTrail } from './audit.ts';

/** The key id of records no API key made. */
export const NO_KEY_ID = '00000000-0000-0000-0000-000000000000';
/** Instances whose organization, profile and room are kept at hand. */
const OWNERS_KEPT = 1024;

interface Owner {
  organizationId: string;
  profileId: string;
  roomId: string;
}

export class EgressAudit {
  private readonly db: Db;
  private readonly audit: AuditTrail;
  private readonly log: Logger;
  private readonly owners = new Map<string, Owner | undefined>();

  constructor(deps: { db: Db; audit: AuditTrail; log: Logger }) {
    this.db = deps.db;
    this.audit = deps.audit;
    this.log = deps.log;
  }

  record(decision: ReportedDecision): void {
    void this.ownerOf(decision.instanceId).then(
      (owner) => {
        if (!owner) return;
        const now = Date.now();
        this.audit.record({
          eventId: timeOrderedUuid(now),
          organizationId: owner.organizationId,
          at: new Date(now).toISOString(),
          durationMs: 0,
          requestId: 'egress',
          keyId: NO_KEY_ID,
          clientAddress: '',
          via: 'egress',
          method: decision.kind === 'dns' ? 'DNS' : 'CONNECT',
          route: '',
          action: decision.kind === 'dns' ? 'egress.dns' : 'egress.connect',
          profileId: owner.profileId,
          roomId: owner.roomId,
          instanceId: decision.instanceId,
          status: decision.allowed ? 200 : 403,
          decision: decision.allowed ? 'allowed' : 'denied_egress',
          ...(decision.allowed ? {} : { error: 'egress_denied' }),
          egress: { name: decision.name ?? null, address: decision.address ?? null, port: decision.port ?? null, rule: decision.rule, count: decision.count },
        });
      },
      (err: unknown) => this.log.warn({ err, instanceId: decision.instanceId }, 'could not record an egress decision'),
    );
  }

  private async ownerOf(instanceId: string): Promise<Owner | undefined> {
    if (this.owners.has(instanceId)) return this.owners.get(instanceId);
    const row = await this.db.selectFrom('instances').select(['organization_id', 'profile_id', 'room_id']).where('id', '=', instanceId).executeTakeFirst();
    const owner = row ? { organizationId: row.organization_id, profileId: row.profile_id, roomId: row.room_id } : undefined;
    if (this.owners.size >= OWNERS_KEPT) this.owners.delete(this.owners.keys().next().value as string);
    this.owners.set(instanceId, owner);
    return owner;
  }
}
