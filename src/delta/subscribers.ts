// The delta shard's subscriber sets and their stream stepping (delta/shard.ts rules 1–3,
// 6 and 8). A set is the delta sockets of a channel, or of one filter group of it; per
// stream of the sequencer, the set knows which of its sockets are in step.
//
//   uWS topics of a set whose topic is T (`app C`, or `app C\x02<a><filter>` for a group)
//     `T\x01`          every socket of the set that is not paused: full messages
//     `T\x01<id>f|x`   the sockets in step with stream <id> (fossil | xdelta3): its deltas
//
// Stepping in puts the socket on its algorithm's topic of the stream; stepping out takes it
// off (a closed socket has left every topic already: uWS throws on any call to it). A set
// holds the sockets as the shard's connection type S (delta/socket.ts DeltaSocket: a uWS
// WebSocket or an HTTP fallback session); stepping needs only these methods of it.

import type { CompiledFilter } from '../filter/compile';
import { ALGOS, type Algo } from './settings';
import type { ConnSocket } from '../channels/conn';

/** What stepping needs of a socket (delta/socket.ts DeltaSocket has it). */
export type StreamMember = Pick<ConnSocket, 'getUserData' | 'subscribe' | 'unsubscribe'>;

export interface StreamSubs<S> {
  /** Topic per algorithm (ALGOS order). */
  topics: string[];
  inStep: Map<S, Algo>;
  /** In-step sockets per algorithm (ALGOS order): a frame without one algorithm's delta visits its sockets only when there are some. */
  counts: number[];
  lastUsed: number;
}

export interface ChannelSubs<S> {
  /** Unfiltered sets: its sockets per algorithm (ALGOS order), registered with the sequencer (its rule 5). */
  counts?: number[];
  allTopic: string;
  topic: string;
  sockets: Map<S, Algo>;
  /** Slow consumers taken out of the channel's fan-out (rule 6). */
  paused: Map<S, Algo>;
  streams: Map<number, StreamSubs<S>>;
  /** A set with positions (history channels): the epoch of the last frame it got (epoch_changed). */
  epoch?: string;
}

/** Rule 8: the sockets of a channel with one filter and algorithm. */
export interface FilterGroup<S> extends ChannelSubs<S> {
  filter: CompiledFilter;
  algo: Algo;
  /** Until the sequencer has the registration. */
  pending: boolean;
}

/** Rule 8: the filter groups of a channel. */
export interface ChannelGroups<S> {
  /** Group id (algorithm letter + filter key) → group. */
  groups: Map<string, FilterGroup<S>>;
  /** `app C\x01*`: member events and counts for every socket of the groups. */
  internal: string;
  pending: number;
}

/** A group's letter per algorithm (ALGOS order), in its id and topic. */
export const ALGO_LETTER = ['f', 'x'] as const;
export const groupId = (algo: Algo, filter: string) => ALGO_LETTER[ALGOS.indexOf(algo)] + filter;

/** The unfiltered set of the channel whose topic is `topic`. */
export function channelSubs<S>(topic: string): ChannelSubs<S> {
  return { allTopic: topic + '\x01', topic, sockets: new Map(), paused: new Map(), streams: new Map() };
}

/** Stream `id` of the set, made (used at `t`) when new. */
export function streamOf<S>(ch: ChannelSubs<S>, id: number, t: number): StreamSubs<S> {
  let st = ch.streams.get(id);
  if (st === undefined) {
    const base = ch.topic + '\x01' + id;
    st = { topics: [base + 'f', base + 'x'], inStep: new Map(), counts: ALGOS.map(() => 0), lastUsed: t };
    ch.streams.set(id, st);
  }
  return st;
}

export function stepIn<S extends StreamMember>(st: StreamSubs<S>, ws: S, algo: Algo): void {
  const i = ALGOS.indexOf(algo);
  const n = st.inStep.size;
  st.inStep.set(ws, algo);
  if (st.inStep.size > n) st.counts[i]++;
  ws.subscribe(st.topics[i]);
}

export function stepOut<S extends StreamMember>(st: StreamSubs<S>, ws: S): void {
  const algo = st.inStep.get(ws);
  if (algo === undefined) return;
  const i = ALGOS.indexOf(algo);
  st.inStep.delete(ws);
  st.counts[i]--;
  if (!ws.getUserData().closed) ws.unsubscribe(st.topics[i]);
}

export function dropStream<S extends StreamMember>(ch: ChannelSubs<S>, id: number): void {
  const st = ch.streams.get(id);
  if (st === undefined) return;
  for (const ws of [...st.inStep.keys()]) stepOut(st, ws);
  ch.streams.delete(id);
}

/** The socket steps out of every stream of the set (rules 3 and 6, pusher:delta_sync_error). */
export function stepOutAll<S extends StreamMember>(ch: ChannelSubs<S>, ws: S): void {
  for (const st of ch.streams.values()) stepOut(st, ws);
}

/** The socket leaves the set and its streams; true when the set is empty now (its streams are gone). */
export function leave<S extends StreamMember>(ch: ChannelSubs<S>, ws: S): boolean {
  ch.sockets.delete(ws);
  ch.paused.delete(ws);
  for (const st of ch.streams.values()) {
    if (st.inStep.has(ws)) stepOut(st, ws);
  }
  if (ch.sockets.size > 0 || ch.paused.size > 0) return false;
  for (const id of [...ch.streams.keys()]) dropStream(ch, id);
  return true;
}

/** Drops the streams of the set unused since before `t - maxAgeMs` (max_state_age_secs). */
export function dropIdle<S extends StreamMember>(ch: ChannelSubs<S>, t: number, maxAgeMs: number): void {
  for (const [id, st] of ch.streams) if (t - st.lastUsed > maxAgeMs) dropStream(ch, id);
}
