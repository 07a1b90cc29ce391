// The delta sequencer's thread: one more endpoint of the ring mesh (thread index
// shards + 1; the primary is `shards`), like the primary's end in channels/bridge.ts but
// with its own thread so that numbering and deltas never wait behind the primary's work.
// It owns no socket, so the primary may terminate it at any time.

import { parentPort, workerData } from 'node:worker_threads';
import { Bus } from '../bus/bus';
import { Interest } from '../channels/interest';
import { deepFreeze } from '../config/freeze';
import { createLogger } from '../log';
import { threadMetrics } from '../metrics/lazy';
import { Ev, outName } from '../protocol/events';
import { createComputer } from './compute';
import { createSequencer } from './sequencer';
import type { SequencerCommand, SequencerEvent, SequencerInit } from './init';
import { nameThread } from '../thread-name';

const init = workerData as SequencerInit;
nameThread('delta');
const config = deepFreeze(init.config);
const log = createLogger(config.log, { thread: 'delta' });
const post = (e: SequencerEvent) => parentPort!.postMessage(e);
const bus = new Bus(init.index, init.topology);
const promMetrics = threadMetrics(config.metrics);

async function main(): Promise<void> {
  const computer = await createComputer(config.delta_compression.pool_size, config.delta_compression.pool_max_queue);
  const sequencer = createSequencer({
    config,
    bus,
    interest: {
      fossil: new Interest(init.interest.fossil, init.shards, -1),
      xdelta3: new Interest(init.interest.xdelta3, init.shards, -1),
    },
    compute: computer.compute,
    log,
    metrics: promMetrics ?? undefined,
    deltaEvent: outName(Ev.Delta, config.protocol.event_prefix),
    // backpressure (sequencer.ts rule 3): not read while a full shard's backlog waits
    hold: (ms) => bus.pauseDraining(ms),
  });
  bus.start({
    onPublish: (f) => sequencer.publish(f),
    onControl: (msg, from) => sequencer.control(msg, from),
    onError: (err, type) => log.error({ err, frameType: type }, 'delta sequencer: bus frame handler failed'),
  });
  const sweep = setInterval(() => sequencer.sweep(), Math.min(10_000, config.delta_compression.max_state_age_secs * 1000));
  parentPort!.on('message', (cmd: SequencerCommand) => {
    if (cmd.type === 'rewire') {
      bus.rewire(cmd.shard, cmd.toPeer, cmd.fromPeer, cmd.doorbell);
      sequencer.forgetShard(cmd.shard);
      post({ type: 'rewired', shard: cmd.shard });
    } else if (cmd.type === 'metrics') {
      // a /metrics scrape (metrics/server.ts asks this thread as it asks the shards)
      if (!promMetrics) post({ type: 'metrics', req: cmd.req, metrics: [] });
      else promMetrics.json().then((m) => post({ type: 'metrics', req: cmd.req, metrics: m }), (err: unknown) => log.error({ err }, 'could not collect metrics'));
    } else if (cmd.type === 'test_pause_bus') {
      if (!init.testHooks) return;
      bus.pauseDraining(cmd.ms);
      post({ type: 'test_bus_paused' });
    } else if (cmd.type === 'shutdown') {
      clearInterval(sweep);
      bus.stop();
      void computer.close().finally(() => {
        post({ type: 'stopped' });
        parentPort!.close();
      });
    }
  });
  post({ type: 'ready' });
}

main().catch((err: unknown) => {
  log.fatal({ err }, 'delta sequencer could not start');
  post({ type: 'failed', error: String(err) });
});
