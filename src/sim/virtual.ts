import type { Endpoint, RequestSpec } from '../backends/types.js';
import type { LoadSpec } from '../load.js';
import type { RequestPhase, RequestRecord } from '../record.js';
import { arrivalScheduleForLoad } from '../workload/arrivals.js';
import { countWords, simWordLength, splitWords } from '../workload/words.js';
import { EngineCluster } from './cluster.js';
import { EngineModel, type SequenceListener } from './engineModel.js';
import { promptBlockHashes } from './physical.js';

export interface VirtualRunOptions {
  /** One engine, or data-parallel replicas behind a load balancer. */
  engine: EngineModel | EngineCluster;
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
  /** Steps of all replicas together. */
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
  const engine = o.engine instanceof EngineModel ? new EngineCluster([o.engine]) : o.engine;
  const replicas = engine.replicas;
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
  // One event order over all replicas, so the run is exact and deterministic. At one instant:
  // a step's finished requests first (their slots free up, as the single-engine loop always
  // did), then arrivals, then the replica whose next step starts first (lowest index on ties).
  // A step is computed when it starts and its tokens are delivered when it ends, as the HTTP
  // simulator does, so a replica routed to mid-step shows its state after that step.
  const ended: InFlight[][] = replicas.map(() => []);
  let steps = 0;
  let lastEventNs = 0;
  for (;;) {
    let atNs = Number.POSITIVE_INFINITY;
    let replica = -1;
    let kind: 'ended' | 'arrival' | 'step' | undefined;
    for (let r = 0; r < replicas.length; r++) {
      if (ended[r].length > 0 && replicas[r].now < atNs) {
        atNs = replicas[r].now;
        replica = r;
        kind = 'ended';
      }
    }
    if (schedule && !planDone && nextArrivalNs < atNs) {
      atNs = nextArrivalNs;
      kind = 'arrival';
    }
    for (let r = 0; r < replicas.length; r++) {
      const work = replicas[r].nextWorkNs();
      if (work !== undefined && work < atNs) {
        atNs = work;
        replica = r;
        kind = 'step';
      }
    }
    if (kind === undefined) break;
    lastEventNs = Math.max(lastEventNs, atNs);
    if (kind === 'ended') {
      for (const request of ended[replica]) {
        inFlight--;
        o.onRecord(toRecord(request, o.endpoint));
      }
      ended[replica].length = 0;
      fill(atNs);
    } else if (kind === 'arrival') {
      const p = nextPending(atNs);
      if (!p) continue;
      waiting.push(p);
      fill(atNs);
      nextArrivalNs = nextArrival();
    } else {
      const model = replicas[replica];
      model.advanceTo(atNs);
      if (!model.step()) continue;
      steps++;
      lastEventNs = Math.max(lastEventNs, model.now);
      // Its requests that finished in this step are told at the step's end.
      ended[replica].push(...finished);
      finished.length = 0;
    }
  }
  return { unsentRequests: waiting.length, simulatedS: lastEventNs / 1e9, steps };
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
    if (i > 0 && r.tokenNs[i] === r.tokenNs[i - 1]) {
      // Tokens released together (a multi-step window) travel in one event, as over HTTP.
      tokens[e - 1]++;
      contentChars[e - 1] += simWordLength(i);
      continue;
    }
    dtUs[e] = atUs - previousUs;
    previousUs = atUs;
    tokens[e] = 1;
    contentChars[e++] = simWordLength(i);
  }
  dtUs[e] = 0;
  tokens[e] = 0;
  contentChars[e] = 0;
  if (e + 1 < size) dtUs.length = tokens.length = contentChars.length = e + 1;
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
