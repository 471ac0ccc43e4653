import type { Answer, BackendOptions, Endpoint, RequestSpec } from '../backends/types.js';
import type { LoadSpec } from '../load.js';
import type { RequestPhase, RequestRecord } from '../record.js';
import { arrivalScheduleForLoad } from '../workload/arrivals.js';
import {
  type CallGraph,
  CallGraphRun,
  type Conversation,
  type ConversationStep,
  type ConversationWorkload,
  SESSION_ID_STRIDE,
  type TurnOutcome,
} from '../workload/conversations.js';
import { requestRng, streamSeed } from '../workload/distributions.js';
import { countWords, simWordLength, splitWords } from '../workload/words.js';
import { type AnswerOptions, DEFAULT_ANSWER_OPTIONS } from './answer.js';
import { EngineCluster } from './cluster.js';
import { EngineModel, type SequenceListener } from './engineModel.js';
import { promptBlockHashes } from './physical.js';
import { type Emission, WireRequest } from './wire.js';

export interface VirtualRunOptions {
  /** One engine, or data-parallel replicas behind a load balancer. */
  engine: EngineModel | EngineCluster;
  load: LoadSpec;
  /** Measured units (requests, or sessions with `nextSession`) to send after warm-up. */
  requests?: number;
  durationS?: number;
  warmupRequests: number;
  seed: number;
  /**
   * A closed loop's client turnaround, ms: each unit is sent this long on average (exponential,
   * seeded by its id) after its slot frees, as a real client's sends straggle. Without it a
   * closed loop's users all send at the same instants, and equal requests run in lockstep for
   * ever (every prompt in one step, none beside another's decode), which no server sees: its
   * p99 ITL reads a tenth of the server's. Absent: none (replays of recorded sends).
   */
  clientTurnaroundMs?: number;
  /** Request `id` of a single-request workload; exactly one of it and `nextSession`. */
  nextRequest?: (id: number) => RequestSpec;
  /**
   * Session `id` of a session workload (multi-turn chat, agent tasks): ids, counts and the load
   * then count sessions, as in runLoadgen. A workload that builds turns from answers needs `wire`.
   */
  nextSession?: ConversationWorkload;
  /** Shapes the records like the HTTP simulator's streams (chat has a role-only first event). */
  endpoint: Endpoint;
  /**
   * The client's request options (model, reasoning, extra body) and the simulator's answer
   * knobs: given, each request is sent, answered and read as over HTTP (wire.ts), which sessions
   * need (their next turn is built from the answer) and which reasoning and tool calls show;
   * without, a plain answer's record is written directly, at a fraction of the cost.
   */
  wire?: { options: BackendOptions; answers?: AnswerOptions };
  /**
   * A replay's own prefix-cache keys for request `id` (the chained hashes of its prompt's and
   * answer's full blocks), where its prompt is known by length only, or by a trace's block ids
   * (traceKeys.ts); else they are the words'.
   */
  prefixKeys?: (id: number, spec: RequestSpec, promptTokens: number) => readonly number[];
  /**
   * false: a plain answer's record carries its times and counts but no events (empty lists).
   * A reader of times alone (calibrate's replays, thousands per fit) spent over half its time
   * building and collecting one event per token.
   */
  events?: boolean;
  onRecord: (record: RequestRecord) => void;
  /**
   * Asked before each measured unit is started: true ends the plan there, as its last request
   * would (what is in flight finishes); `--until`'s rule once its target is met.
   */
  stopped?: () => boolean;
}

export interface VirtualRunResult {
  /** Open loop with a concurrency cap: arrivals still waiting at the end (always 0 here). */
  unsentRequests: number;
  /** Engine time the run covered, seconds. */
  simulatedS: number;
  /** Steps of all replicas together. */
  steps: number;
}

/** What the load schedules: a request, or a session of a session workload. */
interface Unit {
  id: number;
  phase: RequestPhase;
  scheduledNs: number;
}

/** A request about to be sent: its unit's place, and its session's when it has one. */
interface Pending extends Unit {
  spec: RequestSpec;
  session?: { sessionId: number; turn: number; call?: number };
  owner?: SessionOwner;
}

/** The session a request belongs to, told when it has ended. */
interface SessionOwner {
  ended(p: Pending, record: RequestRecord, answer: Answer | undefined): void;
}

/** A session unit's place holder: its requests come with its steps. */
const SESSION_UNIT: RequestSpec = { prompt: '', requestedInputTokens: 0, requestedOutputTokens: 0 };

/** A request in the engine; it is its own listener, so a token costs no closure call. */
class InFlight implements SequenceListener {
  /** Engine time of each output token (ns); `tokens` of them are set. */
  readonly tokenNs: Float64Array;
  tokens = 0;

  constructor(
    readonly p: Pending,
    readonly sentNs: number,
    readonly promptTokens: number,
    maxTokens: number,
    private readonly finished: InFlight[],
    readonly wire?: WireRequest,
  ) {
    this.tokenNs = new Float64Array(maxTokens);
  }

  onToken(atNs: number, _index: number, last: boolean): void {
    this.tokenNs[this.tokens++] = atNs;
    if (last) this.finished.push(this);
  }
}

/**
 * The closed-loop client turnaround a virtual run models where it stands for a measurement
 * (`run`/`sweep --simulate`, size's trials): infergauge's own, from a request's end to its
 * user's next send against the built-in simulator on loopback. Since a user's next request goes
 * out as soon as its answer ends (loadgen RequestSlot) it reads p10 / p50 / p90 0.05-0.11 /
 * 0.10-0.25 / 0.26-0.33 ms, mean 0.17-0.26 (2-core VM, quiet, concurrency 4 and 16, two runs
 * each); an exponential of mean 0.2 ms (0.02 / 0.14 / 0.46) stands for it. Any value above 0
 * breaks the lockstep of equal requests sent at one instant.
 */
export const CLIENT_TURNAROUND_MS = 0.2;

/**
 * Runs a workload through the engine model in virtual time: no HTTP, no waiting. The load is
 * applied with the same rules as `runLoadgen` (closed loop, seeded open-loop arrivals, cap,
 * warm-up, request count or duration; sessions step by step with their pauses) and each request
 * becomes the record the real client would have written against the HTTP simulator, with zero
 * network time.
 */
export function simulateRun(o: VirtualRunOptions): VirtualRunResult {
  if (o.requests === undefined && o.durationS === undefined) {
    throw new Error('simulateRun needs requests or durationS');
  }
  if ((o.nextRequest === undefined) === (o.nextSession === undefined)) {
    throw new Error('simulateRun needs exactly one of nextRequest and nextSession');
  }
  const engine = o.engine instanceof EngineModel ? new EngineCluster([o.engine]) : o.engine;
  const replicas = engine.replicas;
  const measuredEnd = o.warmupRequests + (o.requests ?? Number.POSITIVE_INFINITY);
  let nextId = 0;
  let measureStartNs: number | undefined;
  let planDone = false;
  const finished: InFlight[] = [];
  /** Units (requests, or sessions) started and not yet over. */
  let inFlight = 0;

  const nextPending = (scheduledNs: number): Pending | undefined => {
    if (planDone || nextId >= measuredEnd || (nextId >= o.warmupRequests && o.stopped?.())) {
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
    // A single request is made now; a session's requests, step by step (SessionRun).
    return { id, phase, scheduledNs, spec: o.nextRequest ? o.nextRequest(id) : SESSION_UNIT };
  };

  const wire = o.wire;
  const answers = wire?.answers ?? DEFAULT_ANSWER_OPTIONS;
  const model = engine.config.model.id;
  /** A finished (or refused) request's record, to its session or straight out. */
  const ended = (request: InFlight, refusal?: string) => {
    // A plain answer's record is written directly (most of every run: no object more).
    if (refusal !== undefined || !request.wire) {
      deliver(request.p, toRecord(request, o.endpoint, refusal, o.events !== false), undefined);
      return;
    }
    const { record, answer } = request.wire.record(
      { ...request.p, scheduledAtUs: us(request.p.scheduledNs) },
      us(request.sentNs),
      emissions(request),
      (wire as NonNullable<typeof wire>).options,
      model,
    );
    deliver(request.p, record, answer);
  };
  /** A request's record, to its session or straight out. */
  const deliver = (p: Pending, record: RequestRecord, answer: Answer | undefined) => {
    if (p.owner) p.owner.ended(p, record, answer);
    else {
      inFlight--;
      o.onRecord(record);
    }
  };

  const ownKeys = new OwnBlockKeys();
  const send = (p: Pending, sentNs: number) => {
    let words: readonly string[] | undefined;
    let keys: readonly number[] | undefined;
    let promptTokens: number;
    let maxTokens = p.spec.requestedOutputTokens;
    let read: WireRequest | undefined;
    if (wire) {
      const r = WireRequest.read(p.spec, p.id, wire.options, answers);
      if (typeof r === 'string') {
        ended(new InFlight(p, sentNs, 0, 0, finished), r);
        return;
      }
      read = r;
      maxTokens = r.maxTokens;
      promptTokens = r.promptTokens;
      // The answer's words are keyed too: the next turn's prompt holds them (physical.ts).
      if (engine.config.prefixCaching) keys = r.blockHashes(engine.config.blockSize);
    } else if (o.prefixKeys) {
      promptTokens = p.spec.promptWords ?? countWords(p.spec.prompt);
      if (engine.config.prefixCaching) keys = o.prefixKeys(p.id, p.spec, promptTokens);
    } else {
      // Words are only needed for prefix-cache keys; counting them is much cheaper. A spec
      // with a length and no text (calibration replays) has nothing to key. A prompt that
      // shares no block with any other (read first: reading a synthetic prompt builds it) gets
      // keys of its own: only it can hit its blocks, when it is recomputed after a preemption.
      const c = engine.config;
      const distinct = c.blockSize >= (p.spec.distinctPrefixTokens ?? Number.POSITIVE_INFINITY);
      const keyed = c.prefixCaching && !distinct && p.spec.prompt !== '';
      words = keyed ? splitWords(p.spec.prompt) : undefined;
      promptTokens = words ? words.length : (p.spec.promptWords ?? countWords(p.spec.prompt));
      if (c.prefixCaching && distinct) keys = ownKeys.take(promptTokens, c.blockSize);
    }
    if (words) keys = promptBlockHashes(words, engine.config.blockSize);
    const request = new InFlight(p, sentNs, promptTokens, maxTokens, finished, read);
    const invalid = engine.validate(promptTokens, maxTokens);
    if (invalid !== undefined || maxTokens === 0) {
      ended(request, invalid);
      return;
    }
    engine.add(
      {
        arrivalNs: sentNs,
        promptTokens,
        maxTokens,
        ...(keys ? { blockHashes: keys } : {}),
        ...(o.endpoint === 'chat' ? { chat: true } : {}),
      },
      request,
    );
  };

  /** Session steps waiting out their pause (think time, tool latency), by start time. */
  const timers = new StepTimers();
  const sessions: SessionDriver = {
    send,
    emit: (record) => o.onRecord(record),
    over: () => {
      inFlight--;
    },
    later: (atNs, run) => timers.push(atNs, run),
  };
  /** Starts a unit already counted in flight. */
  const start = (unit: Pending, atNs: number) => {
    if (!o.nextSession) send(unit, atNs);
    else {
      const conversation = o.nextSession(unit.id);
      if (conversation.graph) new CallGraphSession(unit, conversation.graph, sessions).begin(atNs);
      else new SessionRun(unit, conversation, sessions).begin(atNs);
    }
  };

  const load = o.load;
  const cap = load.mode === 'closed' ? load.concurrency : (load.maxConcurrency ?? Infinity);
  const waiting: Pending[] = [];
  const schedule = load.mode === 'open' ? arrivalScheduleForLoad(load, o.seed) : undefined;
  // Arrival times as the real client computes them: ms rounded to whole µs. Infinity once the
  // schedule has ended (after a trace's last arrival): no further arrival is waited for.
  const nextArrival = () => (schedule ? Math.round(schedule() * 1000) * 1000 : Infinity);
  let nextArrivalNs = schedule ? nextArrival() : Infinity;

  const turnaroundNs = load.mode === 'closed' ? (o.clientTurnaroundMs ?? 0) * 1e6 : 0;
  const turnaroundSeed = streamSeed(o.seed, 'client turnaround');
  /**
   * Fills free slots at `atNs`: the next units (closed loop) or the oldest waiting ones; a closed
   * loop's each after its client turnaround (clientTurnaroundMs), in whole ns.
   */
  const fill = (atNs: number) => {
    while (inFlight < cap) {
      const next = load.mode === 'closed' ? nextPending(atNs) : waiting.shift();
      if (!next) return;
      inFlight++;
      const delayNs =
        turnaroundNs > 0
          ? Math.round(requestRng(turnaroundSeed, next.id).exponential(turnaroundNs))
          : 0;
      if (delayNs === 0) start(next, atNs);
      else timers.push(atNs + delayNs, (at) => start(next, at));
    }
  };
  fill(0);
  // One event order over all replicas, so the run is exact and deterministic. At one instant:
  // a step's finished requests first (their slots free up, as the single-engine loop always
  // did), then arrivals, then sessions' steps due after a pause, then the replica whose next
  // step starts first (lowest index on ties). A step is computed when it starts and its tokens
  // are delivered when it ends, as the HTTP simulator does, so a replica routed to mid-step
  // shows its state after that step.
  const done: InFlight[][] = replicas.map(() => []);
  let steps = 0;
  let lastEventNs = 0;
  for (;;) {
    let atNs = Number.POSITIVE_INFINITY;
    let replica = -1;
    let kind: 'ended' | 'arrival' | 'timer' | 'step' | undefined;
    for (let r = 0; r < replicas.length; r++) {
      if (done[r].length > 0 && replicas[r].now < atNs) {
        atNs = replicas[r].now;
        replica = r;
        kind = 'ended';
      }
    }
    if (schedule && !planDone && nextArrivalNs < atNs) {
      atNs = nextArrivalNs;
      kind = 'arrival';
    }
    if (timers.nextNs < atNs) {
      atNs = timers.nextNs;
      kind = 'timer';
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
      const requests = done[replica];
      done[replica] = [];
      for (const request of requests) ended(request);
      fill(atNs);
    } else if (kind === 'arrival') {
      const p = nextPending(atNs);
      if (!p) continue;
      waiting.push(p);
      fill(atNs);
      nextArrivalNs = nextArrival();
    } else if (kind === 'timer') {
      timers.pop()(atNs);
      fill(atNs);
    } else {
      const model = replicas[replica];
      model.advanceTo(atNs);
      if (!model.step()) continue;
      steps++;
      lastEventNs = Math.max(lastEventNs, model.now);
      // Its requests that finished in this step are told at the step's end.
      done[replica].push(...finished);
      finished.length = 0;
    }
  }
  return { unsentRequests: waiting.length, simulatedS: lastEventNs / 1e9, steps };
}

/** What a session needs of the run. */
interface SessionDriver {
  send(p: Pending, atNs: number): void;
  emit(record: RequestRecord): void;
  /** The session is over: its user is free. */
  over(): void;
  /** Runs `run` at `atNs` (engine time). */
  later(atNs: number, run: (atNs: number) => void): void;
}

/**
 * One session in virtual time, as runLoadgen's runSession runs it over HTTP: each step's
 * requests go out together, the next step is built from their records and answers and sent
 * after its pause, counted from the end of the step's last request; a failed request ends the
 * session. Every record is emitted as its request ends, but the step's last, which waits for the
 * next step to be built so that the record ending a session that ran to its end carries
 * `sessionDone`.
 */
class SessionRun implements SessionOwner {
  private index = 0;
  private turn = 0;
  private left = 0;
  private outcomes: TurnOutcome[] = [];

  constructor(
    private readonly unit: Unit,
    private readonly conversation: Conversation,
    private readonly d: SessionDriver,
  ) {}

  begin(atNs: number): void {
    this.step(this.conversation.next(), atNs);
  }

  private step(step: ConversationStep | undefined, atNs: number): void {
    const fanOut = step?.requests.length ?? 0;
    // Past the ids a session may use, the session is cut (SESSION_ID_STRIDE requests).
    if (!step || fanOut === 0 || this.index + fanOut > SESSION_ID_STRIDE) {
      this.d.over();
      return;
    }
    const turn = ++this.turn;
    this.left = fanOut;
    this.outcomes = new Array(fanOut);
    const base = this.unit.id * SESSION_ID_STRIDE;
    const pendings = step.requests.map(
      (spec, call): Pending => ({
        id: base + this.index++,
        phase: this.unit.phase,
        scheduledNs: atNs,
        spec,
        session: { sessionId: this.unit.id, turn, ...(fanOut > 1 ? { call } : {}) },
        owner: this,
      }),
    );
    for (const p of pendings) this.d.send(p, atNs);
  }

  ended(p: Pending, record: RequestRecord, answer: Answer | undefined): void {
    this.outcomes[p.session?.call ?? 0] = { record, ...(answer ? { answer } : {}) };
    if (--this.left > 0) {
      this.d.emit(record);
      return;
    }
    const outcomes = this.outcomes;
    const failed = outcomes.some((outcome) => outcome.record.error !== undefined);
    const next = failed ? undefined : this.conversation.next(outcomes);
    if (!next && !failed) record.sessionDone = true;
    this.d.emit(record);
    if (!next) {
      this.d.over();
      return;
    }
    // As runSession: the step's end is its last record's, in whole µs; then the pause.
    const endUs = Math.round(Math.max(...outcomes.map((x) => x.record.endAt)) * 1000);
    const startNs = (endUs + Math.round(next.pauseMs * 1000)) * 1000;
    this.d.later(startNs, (atNs) => this.step(next, atNs));
  }
}

/**
 * A session of calls that wait for named calls (an agentic trace) in virtual time, as
 * runLoadgen's runCallGraph runs it over HTTP: each call is sent when it is due (CallGraphRun,
 * in whole µs of the records' times), a failed request ends the session (calls in flight
 * finish, none is sent after), every record is emitted as its request ends and the one that
 * finished the last call carries `sessionDone`.
 */
class CallGraphSession implements SessionOwner {
  private readonly run: CallGraphRun;
  private readonly outcomes: (TurnOutcome | undefined)[] = [];
  private failed = false;
  /** Calls due or in flight: the session is over when none is left. */
  private open = 0;

  constructor(
    private readonly unit: Unit,
    private readonly graph: CallGraph,
    private readonly d: SessionDriver,
  ) {
    this.run = new CallGraphRun(graph);
  }

  begin(atNs: number): void {
    const due = this.run.start(us(atNs));
    if (due.length === 0) {
      this.d.over();
      return;
    }
    this.open += due.length;
    // As runSession's first step: a call due at the start goes out at once.
    for (const { call, atUs } of due) {
      if (atUs * 1000 <= atNs) this.send(call, atNs);
      else this.d.later(atUs * 1000, (at) => this.send(call, at));
    }
  }

  private send(i: number, atNs: number): void {
    if (this.failed) {
      this.close();
      return;
    }
    const { turn, call } = this.graph.calls[i];
    this.d.send(
      {
        id: this.unit.id * SESSION_ID_STRIDE + i,
        phase: this.unit.phase,
        scheduledNs: atNs,
        spec: this.graph.request(i, this.outcomes),
        session: { sessionId: this.unit.id, turn, call },
        owner: this,
      },
      atNs,
    );
  }

  ended(p: Pending, record: RequestRecord, answer: Answer | undefined): void {
    const i = p.id - this.unit.id * SESSION_ID_STRIDE;
    this.outcomes[i] = { record, ...(answer ? { answer } : {}) };
    if (record.error !== undefined) this.failed = true;
    const due = this.failed ? [] : this.run.end(i, Math.round(record.endAt * 1000));
    if (this.run.finished && !this.failed) {
      record.sessionDone = true;
      record.taskToolWaitMs = this.run.chainWaitMs(i);
    }
    this.d.emit(record);
    this.open += due.length;
    for (const { call, atUs } of due) this.d.later(atUs * 1000, (at) => this.send(call, at));
    this.close();
  }

  /** One call fewer due or in flight. */
  private close(): void {
    if (--this.open === 0) this.d.over();
  }
}

/** A min-heap of (time, action), earliest first, ties in the order they were pushed. */
class StepTimers {
  private readonly heap: { atNs: number; seq: number; run: (atNs: number) => void }[] = [];
  private seq = 0;

  get nextNs(): number {
    return this.heap.length > 0 ? this.heap[0].atNs : Number.POSITIVE_INFINITY;
  }

  push(atNs: number, run: (atNs: number) => void): void {
    const heap = this.heap;
    heap.push({ atNs, seq: this.seq++, run });
    for (let i = heap.length - 1; i > 0; ) {
      const parent = (i - 1) >> 1;
      if (!this.before(i, parent)) break;
      [heap[i], heap[parent]] = [heap[parent], heap[i]];
      i = parent;
    }
  }

  pop(): (atNs: number) => void {
    const heap = this.heap;
    const top = heap[0];
    const last = heap.pop() as (typeof heap)[number];
    if (heap.length > 0) {
      heap[0] = last;
      for (let i = 0; ; ) {
        const l = 2 * i + 1;
        const r = l + 1;
        let min = i;
        if (l < heap.length && this.before(l, min)) min = l;
        if (r < heap.length && this.before(r, min)) min = r;
        if (min === i) break;
        [heap[i], heap[min]] = [heap[min], heap[i]];
        i = min;
      }
    }
    return top.run;
  }

  private before(a: number, b: number): boolean {
    const x = this.heap[a];
    const y = this.heap[b];
    return x.atNs < y.atNs || (x.atNs === y.atNs && x.seq < y.seq);
  }
}

/** A finished request's tokens as the emissions that carried them (equal times travel together). */
function emissions(r: InFlight): Emission[] {
  const out: Emission[] = [];
  for (let i = 0; i < r.tokens; i++) {
    if (i > 0 && r.tokenNs[i] === r.tokenNs[i - 1]) out[out.length - 1].tokens++;
    else out.push({ atUs: us(r.tokenNs[i]), tokens: 1 });
  }
  return out;
}

const us = (ns: number) => Math.round(ns / 1000);

/** The record the client would write for this request against the HTTP simulator. */
function toRecord(
  r: InFlight,
  endpoint: Endpoint,
  rejected: string | undefined,
  withEvents: boolean,
): RequestRecord {
  const sentUs = us(r.sentNs);
  const { p } = r;
  const base = {
    id: p.id,
    ...p.session,
    phase: p.phase,
    scheduledAt: us(p.scheduledNs) / 1000,
    sentAt: sentUs / 1000,
    requestedInputTokens: p.spec.requestedInputTokens,
    requestedOutputTokens: p.spec.requestedOutputTokens,
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
    events: withEvents ? eventsOf(r, endpoint, sentUs) : { dtUs: [], tokens: [], contentChars: [] },
  };
}

/** A plain answer's stream events, as the HTTP simulator sends them. */
function eventsOf(r: InFlight, endpoint: Endpoint, sentUs: number): RequestRecord['events'] {
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
  return { dtUs, tokens, contentChars };
}

/**
 * Keys for the full blocks of prompts no other prompt shares a block with: negative, so never a
 * content hash (those are unsigned), and each handed out once. Their cache behaviour is then the
 * content hashes' (which no other request matches either), without reading the text. Small
 * integers, so that the pool's maps hash them as such.
 */
class OwnBlockKeys {
  private next = -1;

  take(promptTokens: number, blockSize: number): number[] {
    const n = Math.floor(promptTokens / blockSize);
    const keys = new Array<number>(n);
    for (let b = 0; b < n; b++) keys[b] = this.next--;
    return keys;
  }
}
