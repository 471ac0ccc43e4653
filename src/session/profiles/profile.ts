/**
 * Load profiles: small generators that decide the next load from the last one's result
 * (GuideLLM's Profile strategies). A profile yields a Point and is resumed with what it
 * measured; one driver runs every profile against a PointRunner and handles the stop signal.
 */
import type { Scenario } from '../../workload/scenarios.js';
import type { Point, PointResult, PointRunner } from '../point.js';

/**
 * Yields the next point and gets its result back; `undefined` means the session was stopped:
 * no more points run, the profile wraps up what it has and returns.
 */
export type Profile<R> = AsyncGenerator<Point, R, PointResult | undefined>;

/**
 * Runs `profile` point by point until it ends. Once `stop` is aborted no point runs: the
 * profile gets `undefined` for every point it still asks for, and must wrap up.
 */
export async function runProfile<R>(
  profile: Profile<R>,
  runner: Pick<PointRunner, 'run'>,
  stop: AbortSignal,
): Promise<R> {
  let step = await profile.next(undefined);
  while (!step.done) {
    step = await profile.next(stop.aborted ? undefined : await runner.run(step.value));
  }
  return step.value;
}

/**
 * Runs a search that measures through a callback (analysis's searchMaxLoad) as profile steps:
 * each call of `measure` becomes one yielded point. Stopped, the search is abandoned and the
 * result is `undefined`.
 */
export async function* searchSteps<T, R>(
  search: (measure: (arg: T) => Promise<PointResult>) => Promise<R>,
  pointFor: (arg: T) => Point,
): AsyncGenerator<Point, R | undefined, PointResult | undefined> {
  type Ask = { arg: T; reply: (r: PointResult) => void; abandon: (err: Error) => void };
  let asks: (ask: Ask) => void = () => {};
  const nextAsk = () => new Promise<Ask>((resolve) => (asks = resolve));
  let ask = nextAsk();
  const outcome = search(
    (arg) => new Promise<PointResult>((reply, abandon) => asks({ arg, reply, abandon })),
  );
  for (;;) {
    const next = await Promise.race([
      outcome.then((done) => ({ done })),
      ask.then((asked) => ({ asked })),
    ]);
    if ('done' in next) return next.done;
    ask = nextAsk();
    const result = yield pointFor(next.asked.arg);
    if (!result) {
      next.asked.abandon(new Error('stopped'));
      await outcome.catch(() => {});
      return undefined;
    }
    next.asked.reply(result);
  }
}

/** The scenario a shaped point stands for (its requests come from the point's nextRequest). */
export function fixedScenario(name: string, input: number, output: number): Scenario {
  return {
    name,
    input: { kind: 'fixed', value: input },
    output: { kind: 'fixed', value: output },
  };
}
