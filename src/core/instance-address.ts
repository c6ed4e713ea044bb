// How a call into core names the instance it is for: by the instance's id (what a
// protocol that names sandboxes by id, such as E2B's, gives), or by a room of one of the
// organization's profiles, whose live instance is meant (roomkit's own API). Either way
// the organization is part of the address, so another organization's instance is not
// found, exactly like a missing one.
import { AppError } from '../errors.ts';
import type { OperationFacts } from './operations.ts';

/** An instance of the organization, by its id. */
export interface InstanceRef {
  organizationId: string;
  instanceId: string;
}

/** A room of one of the organization's profiles: its live instance. */
export interface RoomRef {
  organizationId: string;
  profileId: string;
  roomId: string;
}

export type InstanceAddress = InstanceRef | RoomRef;

export function isInstanceRef(address: InstanceAddress): address is InstanceRef {
  return 'instanceId' in address;
}

export function roomRef(organizationId: string, profileId: string, roomId: string): RoomRef {
  return { organizationId, profileId, roomId };
}

/** What an address names, for the note of the call under way (core/operations.ts). */
export function addressFacts(address: InstanceAddress): OperationFacts {
  return isInstanceRef(address) ? { instanceId: address.instanceId } : { profileId: address.profileId, roomId: address.roomId };
}

/** instance_not_found for an id the organization has no instance under: missing, ended, or another organization's. */
export function instanceIdNotFound(instanceId: string): AppError {
  return new AppError('instance_not_found', `no instance ${instanceId}`, { instance_id: instanceId });
}
