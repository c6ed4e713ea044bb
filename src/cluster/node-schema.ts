// The shape of a node as the operator API answers it (GET /operator/nodes): one source
// for the route's schema and its type.
import Type from 'typebox';

export const NODE_STATES = ['active', 'draining', 'lost', 'left'] as const;
export type NodeState = (typeof NODE_STATES)[number];

export const NodeInfo = Type.Object(
  {
    node_id: Type.String({ description: 'The node\'s id, kept in its data directory (file node-id) across restarts' }),
    url: Type.String({ description: 'Where other nodes reach it (ROOMKIT_NODE_URL, else the address it listens on)' }),
    state: Type.Enum(NODE_STATES, {
      description:
        '`active`: it heartbeats and takes instances; `draining`: it takes none; `lost`: it stopped heartbeating for ROOMKIT_NODE_LOST_AFTER_MS and another node declared it lost; `left`: it shut down cleanly',
    }),
    version: Type.String({ description: 'The roomkit version it runs' }),
    started_at: Type.String({ format: 'date-time' }),
    heartbeat_at: Type.String({ format: 'date-time', description: 'Its last heartbeat' }),
    heartbeat_age_ms: Type.Integer({ description: 'How long ago that was, by the answering node\'s clock' }),
    lost_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
    lost_by: Type.Union([Type.String(), Type.Null()], { description: 'The node that declared it lost' }),
    capacity: Type.Object(
      {
        memory_mb: Type.Integer({ description: 'What host admission lets its instances use' }),
        vcpus: Type.Integer(),
        disk_mb: Type.Integer({ description: 'What host admission lets its instances\' disks take' }),
      },
      { description: 'What the node offers, as it said at its last heartbeat' },
    ),
    load: Type.Object(
      {
        instances: Type.Integer({ description: 'Live instances on it' }),
        memory_in_use_mb: Type.Integer({ description: 'What they use, measured' }),
      },
      { description: 'What it carries, as it said at its last heartbeat' },
    ),
  },
  { title: 'Node' },
);
export type NodeInfo = Type.Static<typeof NodeInfo>;

export const NodeList = Type.Object({ nodes: Type.Array(NodeInfo), this_node: Type.String({ description: 'The id of the node that answered' }) });
export type NodeList = Type.Static<typeof NodeList>;
