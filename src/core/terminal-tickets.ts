// Terminal tickets: how a client that cannot set the Authorization header on a WebSocket
// (a browser) opens a terminal. An authenticated POST gets a ticket; the WebSocket's
// URL carries it once. A ticket is random, single-use, lives TICKET_TTL_MS, and opens
// a terminal only in the room it was made for, for the key that asked (checked again
// when it is used, so a revoked key's ticket fails). Only its hash is kept, in memory:
// a restart forgets tickets, which only costs a client another POST.
import { createHash, randomBytes } from 'node:crypto';
import { AppError } from '../errors.ts';
import type { Caller } from './orgs.ts';
import { noteOperation } from './operations.ts';

/** How long a ticket can be used after it was made. */
export const TICKET_TTL_MS = 30_000;
/** Tickets kept at most (the oldest go first beyond it); rate limits bound how fast they are made. */
const MAX_TICKETS = 10_000;
const TICKET_PREFIX = 'rkt_';

interface Held {
  caller: Caller;
  profileId: string;
  roomId: string;
  expiresAt: number;
}

export class TerminalTickets {
  /** By the ticket's hash, oldest first. */
  private readonly held = new Map<string, Held>();

  issue(caller: Caller, profileId: string, roomId: string, now = Date.now()): { ticket: string; expiresAt: string } {
    noteOperation('terminal.ticket', { profileId, roomId });
    this.prune(now);
    while (this.held.size >= MAX_TICKETS) {
      const oldest = this.held.keys().next().value;
      if (oldest === undefined) break;
      this.held.delete(oldest);
    }
    const ticket = TICKET_PREFIX + randomBytes(32).toString('base64url');
    const expiresAt = now + TICKET_TTL_MS;
    this.held.set(hashOf(ticket), { caller, profileId: profileId.toLowerCase(), roomId, expiresAt });
    return { ticket, expiresAt: new Date(expiresAt).toISOString() };
  }

  /** The caller a ticket was made for; it is used up whether or not the room matches. */
  redeem(ticket: string, profileId: string, roomId: string, now = Date.now()): Caller {
    const key = hashOf(ticket);
    const held = this.held.get(key);
    this.held.delete(key);
    if (!held || held.expiresAt <= now || held.profileId !== profileId.toLowerCase() || held.roomId !== roomId) {
      throw new AppError(
        'invalid_terminal_ticket',
        `the terminal ticket is unknown, used, expired (a ticket lasts ${TICKET_TTL_MS / 1000} s and opens one terminal) or made for another room`,
        undefined,
        { code: 'new_terminal_ticket' },
      );
    }
    return held.caller;
  }

  private prune(now: number): void {
    for (const [key, held] of this.held) {
      if (held.expiresAt > now) break; // in order of issue, so of expiry
      this.held.delete(key);
    }
  }
}

function hashOf(ticket: string): string {
  return createHash('sha256').update(ticket).digest('hex');
}
