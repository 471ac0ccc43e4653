import type { Endpoint, RequestSpec } from '../backends/types.js';
import type { LoadSpec } from '../load.js';
import type { RequestPhase, RequestRecord } from '../record.js';
import { arrivalScheduleForLoad } from '../workload/arrivals.js';
import { countWords, simWordLength, splitWords } from '../workload/words.js';
import type { EngineModel, SequenceListener } from './engineModel.js';
import { promptBlockHashes } from './physical.js';

export interface VirtualRunOptions {
  engine: EngineModel;
  load: LoadSpec;
  requests?: number;
  durationS?: number;
  warmupRequests: number;
  seed: number;
  nextRequest: (id: number) => RequestSpec;
  /** Shapes the records like the HTTP simulator's streams (chat has a role-only first event). */
  endpoint: Endpoint;
  onRecord: (record: RequestRecord) => void;
}

export interface VirtualRunResult {
  /** Open loop with a concurrency cap: arrivals still waiting at the end (always 0 here). */
  unsentRequests: number;
  /** Engine time the run covered, seconds. */
  simulatedS: number;
  steps: number;
}

/** A request in the engine; it is its own listener, so a token costs no closure call. */
class InFlight implements SequenceListener {
  /** Engine time of each output token (ns); `tokens` of them are set. */
  readonly tokenNs: Float64Array;
  tokens = 0;

  constructor(
    readonly id: number,
    readonly phase: RequestPhase,
    readonly scheduledNs: number,
    readonly sentNs: number,
    readonly spec: RequestSpec,
    readonly promptTokens: number,
    private readonly finished: InFlight[],
  ) {
    this.tokenNs = new Float64Array(spec.requestedOutputTokens);
  }

  onToken(atNs: number, _index: number, last: boolean): void {
    this.tokenNs[this.tokens++] = atNs;
    if (last) this.finished.push(this);
  }
}

/**
 * Runs a workload through the engine model in virtual time: no HTTP, no waiting. The load is
 * applied with the same rules as `runLoadgen` (closed loop, seeded open-loop arrivals, cap,
 * warm-up, request count or duration) and each request becomes the record the real client
 * would have written against the HTTP simulator, with zero network time.
 */
export function simulateRun(o: VirtualRunOptions): VirtualRunResult {
  if (o.requests === undefined && o.durationS === undefined) {
    throw new Error('simulateRun needs requests or durationS');
  }
  const engine = o.engine;
  const measuredEnd = o.warmupRequests + (o.requests ?? Number.POSITIVE_INFINITY);
  let nextId = 0;
  let measureStartNs: number | undefined;
  let planDone = false;
  const finished: InFlight[] = [];
  let inFlight = 0;

  const nextPending = (scheduledNs: number) => {
    if (planDone || nextId >= measuredEnd) {
      planDone = true;
      return undefined;
    }
    const phase: RequestPhase = nextId < o.warmupRequests ? 'warmup' : 'measure';
    if (phase === 'measure') {
      measureStartNs ??= scheduledNs;
      if (o.durationS !== undefined && scheduledNs - measureStartNs >= o.durationS * 1e9) {
        planDone = true;
        return undefined;
      }
    }
    const id = nextId++;
    return { id, phase, scheduledNs, spec: o.nextRequest(id) };
  };

  const send = (p: NonNullable<ReturnType<typeof nextPending>>, sentNs: number) => {
    // Words are only needed for prefix-cache keys; counting them is much cheaper.
    const words = engine.config.prefixCaching ? splitWords(p.spec.prompt) : undefined;
    const promptTokens = words ? words.length : (p.spec.promptWords ?? countWords(p.spec.prompt));
    const maxTokens = p.spec.requestedOutputTokens;
    const request = new InFlight(
      p.id,
      p.phase,
      p.scheduledNs,
      sentNs,
      p.spec,
      promptTokens,
      finished,
    );
    inFlight++;
    const invalid = engine.validate(promptTokens, maxTokens);
    if (invalid !== undefined || maxTokens === 0) {
      inFlight--;
      o.onRecord(toRecord(request, o.endpoint, invalid));
      return;
    }
    engine.add(
      {
        arrivalNs: sentNs,
        promptTokens,
        maxTokens,
        ...(words ? { blockHashes: promptBlockHashes(words, engine.config.blockSize) } : {}),
      },
      request,
    );
  };

  const load = o.load;
  const cap = load.mode === 'closed' ? load.concurrency : (load.maxConcurrency ?? Infinity);
  const waiting: NonNullable<ReturnType<typeof nextPending>>[] = [];
  const schedule = load.mode === 'open' ? arrivalScheduleForLoad(load, o.seed) : undefined;
  // Arrival times as the real client computes them: ms rounded to whole µs. Infinity once the
  // schedule has ended (after a trace's last arrival): no further arrival is waited for.
  const nextArrival = () => (schedule ? Math.round(schedule() * 1000) * 1000 : Infinity);
  let nextArrivalNs = schedule ? nextArrival() : Infinity;

  /** Fills free slots at `atNs`: the next requests (closed loop) or the oldest waiting ones. */
  const fill = (atNs: number) => {
    while (inFlight < cap) {
      const next = load.mode === 'closed' ? nextPending(atNs) : waiting.shift();
      if (!next) return;
      send(next, atNs);
    }
  };
  fill(0);
  let steps = 0;
  for (;;) {
    while (schedule && !planDone && nextArrivalNs <= engine.now) {
      const p = nextPending(nextArrivalNs);
      if (!p) break;
      waiting.push(p);
      fill(nextArrivalNs);
      nextArrivalNs = nextArrival();
    }
    const result = engine.step();
    if (result) {
      steps++;
      for (const request of finished) {
        inFlight--;
        o.onRecord(toRecord(request, o.endpoint));
      }
      if (finished.length > 0) fill(result.endNs);
      finished.length = 0;
      continue;
    }
    const work = engine.nextWorkNs();
    const arrival = schedule && !planDone && nextArrivalNs !== Infinity ? nextArrivalNs : undefined;
    if (work === undefined && arrival === undefined) break;
    engine.advanceTo(Math.min(work ?? Infinity, arrival ?? Infinity));
  }
  return { unsentRequests: waiting.length, simulatedS: engine.now / 1e9, steps };
}

const us = (ns: number) => Math.round(ns / 1000);

/** The record the client would write for this request against the HTTP simulator. */
function toRecord(r: InFlight, endpoint: Endpoint, rejected?: string): RequestRecord {
  const sentUs = us(r.sentNs);
  const base = {
    id: r.id,
    phase: r.phase,
    scheduledAt: us(r.scheduledNs) / 1000,
    sentAt: sentUs / 1000,
    requestedInputTokens: r.spec.requestedInputTokens,
    requestedOutputTokens: r.spec.requestedOutputTokens,
  };
  if (rejected !== undefined) {
    return {
      ...base,
      headersAt: sentUs / 1000,
      endAt: sentUs / 1000,
      status: 400,
      outputTokens: 0,
      outputTokensSource: 'events',
      events: { dtUs: [], tokens: [], contentChars: [] },
      error: { kind: 'http_4xx', message: rejected, status: 400 },
    };
  }
  const n = r.tokens;
  const chat = endpoint === 'chat';
  // Role-only first event (chat), one event per token, then the usage-only event.
  const size = n + (chat ? 2 : 1);
  const dtUs = new Array<number>(size);
  const tokens = new Array<number>(size);
  const contentChars = new Array<number>(size);
  let e = 0;
  let previousUs = sentUs;
  if (chat) {
    dtUs[e] = us(r.tokenNs[0]) - sentUs;
    tokens[e] = 0;
    contentChars[e++] = 0;
    previousUs = us(r.tokenNs[0]);
  }
  for (let i = 0; i < n; i++) {
    const atUs = us(r.tokenNs[i]);
    dtUs[e] = atUs - previousUs;
    previousUs = atUs;
    tokens[e] = 1;
    contentChars[e++] = simWordLength(i);
  }
  dtUs[e] = 0;
  tokens[e] = 0;
  contentChars[e] = 0;
  const firstAt = us(r.tokenNs[0]) / 1000;
  const lastAt = us(r.tokenNs[n - 1]) / 1000;
  return {
    ...base,
    headersAt: sentUs / 1000,
    firstTokenAt: firstAt,
    firstContentAt: firstAt,
    lastTokenAt: lastAt,
    endAt: lastAt,
    status: 200,
    inputTokens: r.promptTokens,
    inputTokensSource: 'server',
    outputTokens: n,
    outputTokensSource: 'server',
    finishReason: 'length',
    events: { dtUs, tokens, contentChars },
  };
}
