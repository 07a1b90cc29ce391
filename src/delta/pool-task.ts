// A piscina task of the delta pool (delta/compute.ts): the deltas of one message.
import { inlineComputer } from './compute';
import type { DeltaResult, DeltaTask } from './sequencer';

let run: Promise<(task: DeltaTask) => DeltaResult | Promise<DeltaResult>> | null = null;

export default async function deltaTask(task: DeltaTask): Promise<DeltaResult> {
  run ??= inlineComputer();
  return (await run)(task);
}
