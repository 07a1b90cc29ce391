// The channel directory of a node in a cluster: the node's own directory (its owner
// shards) plus the answers of every other node, asked through the primary (adapter/).
//
//   info     subscription_count summed; occupied if anywhere; user_count = distinct users
//            (a user with tabs on two nodes counts once: the nodes answer with user ids)
//   list     union of the channel names, user_count as above
//   members  union by user_id (one entry per user)
//   terminate_connections  every node closes its sockets of the user
//
// A node that does not answer within the cluster's question timeout is left out: the
// answer is what the reachable nodes know (logged and counted as an adapter error by the
// primary). Subscribe, join and leave stay with the local owners: presence across nodes
// is decided by the cluster presence layer, not per question.

import type { ChannelInfo } from '../bus/messages';
import type { ChannelDirectory, ChannelList, MemberList } from './directory';
import { isPresence } from '../protocol/channels';

/** What one node tells another. */
export type ClusterQuestion =
  | { kind: 'info'; app: string; channel: string }
  | { kind: 'list'; app: string; prefix: string }
  | { kind: 'members'; app: string; channel: string }
  | { kind: 'terminate_user'; app: string; userId: string };

interface NodeInfo {
  occupied: boolean;
  subscription_count: number;
  /** Presence: the user ids on that node; null otherwise. */
  user_ids: unknown[] | null;
}

type NodeList = [name: string, userIds: unknown[] | null][];

/** Asks every other node (through the primary); resolves with the answers that came. */
export type AskNodes = (q: ClusterQuestion) => Promise<unknown[]>;

const userKey = (id: unknown) => JSON.stringify(id);

/** This node's answer to a question, from its own directory (asked by the primary for another node). */
export async function nodeAnswer(dir: ChannelDirectory, q: ClusterQuestion): Promise<unknown> {
  switch (q.kind) {
    case 'info': {
      const [info, members] = await Promise.all([
        dir.info(q.app, q.channel),
        isPresence(q.channel) ? dir.members(q.app, q.channel) : null,
      ]);
      const out: NodeInfo = { occupied: info.occupied, subscription_count: info.subscription_count, user_ids: members?.map(([id]) => id) ?? null };
      return out;
    }
    case 'list': {
      const list = await dir.list(q.app, q.prefix);
      const out: NodeList = await Promise.all(list.map(async ([name]) =>
        [name, isPresence(name) ? (await dir.members(q.app, name)).map(([id]) => id) : null] as NodeList[number]));
      return out;
    }
    case 'members':
      return dir.members(q.app, q.channel);
    case 'terminate_user':
      dir.terminateUser(q.app, q.userId);
      return true;
  }
}

export function createClusterDirectory(local: ChannelDirectory, askNodes: AskNodes): ChannelDirectory {
  return {
    subscribe: (app, channel) => local.subscribe(app, channel),
    unsubscribe: (app, channel) => local.unsubscribe(app, channel),
    join: (app, channel, socketId, userId, userInfo) => local.join(app, channel, socketId, userId, userInfo),
    leave: (app, channel, socketId, userKey) => local.leave(app, channel, socketId, userKey),

    async info(app, channel): Promise<ChannelInfo> {
      const q: ClusterQuestion = { kind: 'info', app, channel };
      const [mine, others] = await Promise.all([nodeAnswer(local, q) as Promise<NodeInfo>, askNodes(q) as Promise<NodeInfo[]>]);
      const all = [mine, ...others];
      const users = new Set<string>();
      for (const n of all) for (const id of n.user_ids ?? []) users.add(userKey(id));
      return {
        occupied: all.some((n) => n.occupied),
        subscription_count: all.reduce((sum, n) => sum + n.subscription_count, 0),
        user_count: isPresence(channel) ? users.size : null,
      };
    },

    async list(app, prefix): Promise<ChannelList> {
      const q: ClusterQuestion = { kind: 'list', app, prefix };
      const [mine, others] = await Promise.all([nodeAnswer(local, q) as Promise<NodeList>, askNodes(q) as Promise<NodeList[]>]);
      const channels = new Map<string, Set<string> | null>();
      for (const list of [mine, ...others]) {
        for (const [name, ids] of list) {
          if (!channels.has(name)) channels.set(name, ids ? new Set() : null);
          const set = channels.get(name);
          if (set && ids) for (const id of ids) set.add(userKey(id));
        }
      }
      return [...channels].map(([name, set]) => [name, set ? set.size : null]);
    },

    async members(app, channel): Promise<MemberList> {
      const q: ClusterQuestion = { kind: 'members', app, channel };
      const [mine, others] = await Promise.all([local.members(app, channel), askNodes(q) as Promise<MemberList[]>]);
      const byUser = new Map<string, MemberList[number]>();
      for (const list of [mine, ...others]) for (const m of list) if (!byUser.has(userKey(m[0]))) byUser.set(userKey(m[0]), m);
      return [...byUser.values()];
    },

    terminateUser(app, userId) {
      local.terminateUser(app, userId);
      // other nodes: best effort (the primary logs a node that does not answer)
      void askNodes({ kind: 'terminate_user', app, userId }).catch(() => undefined);
    },
  };
}
