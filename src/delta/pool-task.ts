// A piscina task of the delta pool (delta/compute.ts): the deltas of one message.
import { inlineComputer } from './compute';
import type { DeltaResult, DeltaTask } from './sequencer';
import { nameThread } from '../thread-name';

nameThread('delta-pool'); // this module is loaded once in each pool thread

let run: Promise<(task: DeltaTask) => DeltaResult | Promise<DeltaResult>> | null = null;

export default async function deltaTask(task: DeltaTask): Promise<DeltaResult> {
  run ??= inlineComputer();
  return (await run)(task);
}
