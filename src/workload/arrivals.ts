import type { ArrivalKind, OpenLoadSpec, RampUp, TraceReplay } from '../load.js';
import { createRng } from '../rng.js';
import { gammaDeviate } from './distributions.js';

export type ArrivalProcess = ArrivalKind;

/** What the arrival kinds beyond rate and process need (the open-loop LoadSpec's fields). */
export interface ArrivalOptions {
  /** Gamma arrivals: the gaps' shape (default 1, Poisson). */
  burstiness?: number;
  /** Poisson, constant or gamma: a linear ramp of the rate from `fromRate` to the rate. */
  rampUp?: RampUp;
  /** Trace arrivals: the times to replay. */
  trace?: TraceReplay;
}

/**
 * Arrival times in ms from the start of sending, for an open-loop run. Absolute times, so a
 * late timer never shifts later arrivals (no cumulative drift); the first is 0, as in vLLM and
 * GuideLLM. Each call returns the next arrival; a trace returns Infinity after its last entry,
 * and the engine then stops scheduling.
 *
 * - `poisson`: exponential gaps with mean 1000 / rate ms (seeded).
 * - `constant`: gaps of exactly 1000 / rate ms.
 * - `gamma`: gamma gaps with shape = burstiness and scale = 1000 / (rate x burstiness) ms, as
 *   vLLM's --burstiness: mean gap 1000 / rate, coefficient of variation 1 / sqrt(burstiness).
 *   Unlike vLLM, the times are not rescaled to end at N / rate: the stream has no end.
 * - with `rampUp`: the process above at rate 1 gives the "operational times" S_k (S_0 = 0), and
 *   arrival k is at Λ⁻¹(S_k), Λ being the integrated rate: linear from `fromRate` to `rate` over
 *   `seconds`, then flat. For Poisson this is exactly a non-homogeneous Poisson process (time
 *   rescaling), solved in closed form, with no thinning and no timer.
 * - `trace`: (timesMs[i] - timesMs[0]) / speed, then Infinity.
 *
 * Throws an Error listing what is wrong with the options (see openLoadProblems).
 */
export function createArrivalSchedule(
  ratePerS: number,
  process: ArrivalProcess,
  seed: number,
  options: ArrivalOptions = {},
): () => number {
  const problems = arrivalProblems(ratePerS, process, options);
  if (problems.length > 0) throw new Error(`invalid arrivals: ${problems.join('; ')}`);
  if (process === 'trace') {
    const { timesMs, speed } = options.trace as TraceReplay;
    const first = timesMs[0];
    let index = 0;
    return () =>
      index < timesMs.length ? (timesMs[index++] - first) / speed : Number.POSITIVE_INFINITY;
  }
  const rng = createRng(seed);
  const ramp = options.rampUp;
  const burstiness = options.burstiness ?? 1;
  if (!ramp) {
    const meanGapMs = 1000 / ratePerS;
    let index = 0;
    let at = 0;
    return () => {
      if (process === 'constant') return index++ * meanGapMs;
      // The first request goes out at once, as in vLLM and GuideLLM.
      if (index++ > 0) {
        at +=
          process === 'gamma'
            ? gammaDeviate(rng, burstiness) * (meanGapMs / burstiness)
            : rng.exponential(meanGapMs);
      }
      return at;
    };
  }
  // Operational time: the process at rate 1 per second (S in expected arrivals).
  let index = 0;
  let s = 0;
  const toTime = rampInverse(ramp.fromRate, ratePerS, ramp.seconds);
  return () => {
    if (process === 'constant') s = index;
    else if (index > 0) {
      s += process === 'gamma' ? gammaDeviate(rng, burstiness) / burstiness : rng.exponential(1);
    }
    index++;
    return toTime(s) * 1000;
  };
}

/** The schedule of an open-loop LoadSpec (what runLoadgen and simulateRun use). */
export function arrivalScheduleForLoad(load: OpenLoadSpec, seed: number): () => number {
  return createArrivalSchedule(load.rate, load.arrival, seed, load);
}

/**
 * The expected number of arrivals from 0 to `t` seconds, Λ(t), for a rate ramping linearly from
 * `fromRate` to `rate` over `seconds` and flat after.
 */
export function rampIntegral(fromRate: number, rate: number, seconds: number, t: number): number {
  if (t <= 0) return 0;
  if (t >= seconds) return ((fromRate + rate) / 2) * seconds + rate * (t - seconds);
  return fromRate * t + ((rate - fromRate) * t * t) / (2 * seconds);
}

/** Λ⁻¹: seconds at which `s` arrivals are expected, in closed form. */
function rampInverse(fromRate: number, rate: number, seconds: number): (s: number) => number {
  const atEnd = ((fromRate + rate) / 2) * seconds;
  const a = (rate - fromRate) / (2 * seconds);
  return (s) => {
    if (s <= 0) return 0;
    if (s >= atEnd) return seconds + (s - atEnd) / rate;
    // a t² + fromRate t = s; this form of the root is stable for a -> 0 and fromRate = 0.
    return (2 * s) / (fromRate + Math.sqrt(fromRate * fromRate + 4 * a * s));
  };
}

/** What is wrong with an open-loop LoadSpec's arrival fields (empty when nothing). */
export function openLoadProblems(load: OpenLoadSpec): string[] {
  const problems = arrivalProblems(load.rate, load.arrival, load);
  if (
    load.maxConcurrency !== undefined &&
    !(Number.isInteger(load.maxConcurrency) && load.maxConcurrency >= 1)
  ) {
    problems.push('maxConcurrency must be a whole number >= 1');
  }
  return problems;
}

function arrivalProblems(rate: number, process: ArrivalProcess, o: ArrivalOptions): string[] {
  const problems: string[] = [];
  const kinds: ArrivalProcess[] = ['poisson', 'constant', 'gamma', 'trace'];
  if (!kinds.includes(process)) {
    return [`arrival "${process}" is not one of ${kinds.join(', ')}`];
  }
  if (process !== 'trace' && !(Number.isFinite(rate) && rate > 0)) {
    problems.push(`rate must be a number > 0, got ${rate}`);
  }
  if (o.burstiness !== undefined) {
    if (process !== 'gamma') problems.push('burstiness applies only to gamma arrivals');
    else if (!(Number.isFinite(o.burstiness) && o.burstiness > 0)) {
      problems.push(`burstiness must be a number > 0, got ${o.burstiness}`);
    }
  }
  if (o.rampUp !== undefined) {
    const { fromRate, seconds } = o.rampUp;
    if (process === 'trace') problems.push('a trace cannot ramp up; change its speed instead');
    if (!(Number.isFinite(fromRate) && fromRate >= 0)) {
      problems.push(`the ramp's fromRate must be a number >= 0, got ${fromRate}`);
    }
    if (!(Number.isFinite(seconds) && seconds > 0)) {
      problems.push(`the ramp's seconds must be a number > 0, got ${seconds}`);
    }
  }
  if (process === 'trace') {
    const trace = o.trace;
    if (!trace) problems.push('trace arrivals need the trace times');
    else {
      if (!(Number.isFinite(trace.speed) && trace.speed > 0)) {
        problems.push(`the trace speed must be a number > 0, got ${trace.speed}`);
      }
      if (trace.timesMs.length === 0) problems.push('the trace has no arrivals');
      for (let i = 0; i < trace.timesMs.length; i++) {
        const t = trace.timesMs[i];
        if (!Number.isFinite(t) || (i > 0 && t < trace.timesMs[i - 1])) {
          problems.push(`trace time ${i} (${t}) is not a number >= the one before`);
          break;
        }
      }
    }
  } else if (o.trace !== undefined) {
    problems.push(`trace times apply only to trace arrivals, not ${process}`);
  }
  return problems;
}
