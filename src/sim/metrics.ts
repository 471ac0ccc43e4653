/**
 * `/metrics` of the simulated server: Prometheus text exposition (format 0.0.4) under vLLM V1's
 * metric names, so the scraper, the terminal highlights and Grafana dashboards built for a real
 * vLLM read the simulator unchanged, plus dcgm-exporter's framebuffer gauges per GPU.
 *
 * Names, HELP texts and bucket boundaries follow `PrometheusStatLogger` in vLLM's
 * `vllm/v1/metrics/loggers.py` (vllm-project/vllm; checked against the stored copy at commit
 * 005a810bc40faa25b8870fbc8559c3462581eee3 and a later 0.11-era copy that adds
 * `inter_token_latency_seconds` and `request_time_per_output_token_seconds`). The DCGM HELP
 * texts are those of dcgm-exporter's `default-counters.csv`.
 *
 * Layout choices, each copied from what a real vLLM serves (see test/fixtures/vllm-metrics.txt):
 * - A counter's `# HELP`/`# TYPE` lines name it *with* `_total`, as prometheus_client does in
 *   format 0.0.4 (`# TYPE vllm:prompt_tokens_total counter`). Naming the family without the
 *   suffix is the OpenMetrics convention; in 0.0.4 Prometheus would then read the `_total`
 *   samples as untyped.
 * - Labels are written in sorted order (`engine`, `le`, `model_name`), as vLLM's
 *   multiprocess collector writes them.
 * - Histogram series come as buckets, then `_count`, then `_sum`.
 * - prometheus_client's `_created` series are left out: the recorded fixture has none, and
 *   they would read as gauges in the telemetry summary.
 * - Data-parallel replicas (`--dp`) are vLLM's engines: every family has one series per engine,
 *   labelled `engine="i"`, as `PrometheusStatLogger` registers a child per `engine_indexes`
 *   entry; a family's HELP/TYPE comes once, then engine 0's samples, engine 1's, ...
 *   (`request_success_total`: per finished reason, each engine's). `cache_config_info` has a
 *   series per engine too.
 */

export interface FinishedRequestTiming {
  promptTokens: number;
  generationTokens: number;
  finishedReason: 'length' | 'stop' | 'abort';
  /** seconds: arrival -> first scheduled */ queueS: number;
  /** seconds: first scheduled -> first token */ prefillS: number;
  /** seconds: first token -> last token */ decodeS: number;
  /** seconds: first scheduled -> last token */ inferenceS: number;
  /** seconds: arrival -> last token */ e2eS: number;
  /** seconds per output token after the first: decodeS / (generationTokens - 1), when >1 token */ tpotS?: number;
}

export interface EngineGaugeState {
  running: number;
  waiting: number;
  /** 0..1 */
  kvCacheUsage: number;
  /** Cumulative since the server started, like every counter below. */
  preemptions: number;
  promptTokens: number;
  generationTokens: number;
  prefixQueryTokens: number;
  prefixHitTokens: number;
}

export interface GpuMemoryState {
  gpu: number;
  usedMiB: number;
  freeMiB: number;
}

export interface SimMetricsOptions {
  /** vLLM's `served_model_name`: the `model_name` label. */
  modelName: string;
  /** `vllm:cache_config_info` labels (block_size, num_gpu_blocks, ...). */
  cacheConfig: Record<string, string | number | boolean>;
  /**
   * Upper limit of the 1-2-5 token-count buckets; vLLM passes `max_model_len`. Default 131072,
   * whose largest 1-2-5 bucket is 100000.
   */
  maxTokenBucket?: number;
  /** dcgm-exporter's `modelName` label. Default "infergauge simulated GPU". */
  gpuName?: string;
  /** Data-parallel engines, labelled `engine="0"`, `"1"`, ... Default 1. */
  engines?: number;
}

/** vLLM's `time_to_first_token_seconds` buckets. */
const TTFT_BUCKETS = [
  0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
  40.0, 80.0, 160.0, 640.0, 2560.0,
];
/** vLLM's `inter_token_latency_seconds` and `request_time_per_output_token_seconds` buckets. */
const TOKEN_LATENCY_BUCKETS = [
  0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
  40.0, 80.0,
];
/** vLLM's `request_latency_buckets`: e2e, queue, inference, prefill and decode time. */
const REQUEST_LATENCY_BUCKETS = [
  0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
  480.0, 960.0, 1920.0, 7680.0,
];
/** vLLM's fixed `iteration_tokens_total` buckets. */
const ITERATION_TOKEN_BUCKETS = [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384];

/** In vLLM's FinishReason order; all three are exposed from the start, at zero. */
const FINISHED_REASONS = ['stop', 'length', 'abort'] as const;

const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

/** vLLM's `build_1_2_5_buckets`: 1, 2, 5, 10, 20, 50, ... while <= max. */
export function buildOneTwoFiveBuckets(max: number): number[] {
  if (!Number.isFinite(max)) throw new RangeError(`token bucket limit ${max} is not finite`);
  const buckets: number[] = [];
  for (let scale = 1; ; scale *= 10) {
    for (const m of [1, 2, 5]) {
      if (m * scale > max) return buckets;
      buckets.push(m * scale);
    }
  }
}

/** A label value in the text format: backslash, double quote and newline escaped. */
function escapeLabel(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

/** HELP text escapes only backslash and newline. */
function escapeHelp(text: string): string {
  return text.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');
}

/** `{a="1",b="2"}` with the labels in the order given. */
function labelSet(labels: [string, string][]): string {
  return `{${labels.map(([k, v]) => `${k}="${escapeLabel(v)}"`).join(',')}}`;
}

/** A sample value: integers plainly, other finite numbers as JS writes them. */
function formatValue(value: number): string {
  if (value === Number.POSITIVE_INFINITY) return '+Inf';
  if (value === Number.NEGATIVE_INFINITY) return '-Inf';
  if (Number.isNaN(value)) return 'NaN';
  return String(value);
}

/**
 * A bucket bound as prometheus_client writes `le` (`floatToGoString`): Python's float repr, so
 * always with a decimal point (`1.0`), switched to Go's exponent form once the integer part
 * passes six digits (`1e+06`). Dashboards match `le` as a string, so `1` would not do.
 */
function formatLe(bound: number): string {
  if (bound === Number.POSITIVE_INFINITY) return '+Inf';
  // Python's repr writes integral floats below 1e16 as `N.0`; JS drops the `.0`.
  const repr = Number.isInteger(bound) && Math.abs(bound) < 1e16 ? `${bound}.0` : String(bound);
  const dot = repr.indexOf('.');
  if (bound > 0 && dot > 6) {
    const mantissa = `${repr[0]}.${repr.slice(1, dot)}${repr.slice(dot + 1)}`.replace(/[0.]+$/, '');
    return `${mantissa}e+0${dot - 1}`;
  }
  return repr;
}

/**
 * One histogram series. Counts are kept per bucket (not cumulative) so an observation touches
 * one slot; render accumulates. The last slot is the +Inf bucket.
 */
class Histogram {
  private readonly bounds: Float64Array;
  private readonly counts: Float64Array;
  private sum = 0;
  private count = 0;
  /** Precomputed line heads: `name_bucket{...le="x"...} `, one per bucket including +Inf. */
  private readonly bucketHeads: string[];
  private readonly countHead: string;
  private readonly sumHead: string;
  /** The family's HELP and TYPE lines (once per family, however many engines). */
  readonly header: string;

  constructor(name: string, help: string, bounds: number[], labels: [string, string][]) {
    this.bounds = Float64Array.from(bounds);
    this.counts = new Float64Array(bounds.length + 1);
    const withLe = (le: string) =>
      labelSet([...labels, ['le', le] as [string, string]].sort((a, b) => cmp(a[0], b[0])));
    this.bucketHeads = [...bounds.map(formatLe), '+Inf'].map(
      (le) => `${name}_bucket${withLe(le)} `,
    );
    const plain = labelSet(labels);
    this.countHead = `${name}_count${plain} `;
    this.sumHead = `${name}_sum${plain} `;
    this.header = `# HELP ${name} ${escapeHelp(help)}\n# TYPE ${name} histogram`;
  }

  /** `le` is inclusive: a value equal to a bound counts in that bound's bucket. */
  observe(value: number): void {
    // NaN would poison _sum for the rest of the run and land in no bucket; drop it.
    if (Number.isNaN(value)) return;
    const bounds = this.bounds;
    let lo = 0;
    let hi = bounds.length; // index bounds.length is the +Inf bucket
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (bounds[mid] < value) lo = mid + 1;
      else hi = mid;
    }
    this.counts[lo]++;
    this.sum += value;
    this.count++;
  }

  /** Buckets, `_count`, `_sum`: the samples without the family header. */
  renderSamples(out: string[]): void {
    let cumulative = 0;
    for (let i = 0; i < this.counts.length; i++) {
      cumulative += this.counts[i];
      out.push(this.bucketHeads[i] + formatValue(cumulative));
    }
    out.push(this.countHead + formatValue(this.count));
    out.push(this.sumHead + formatValue(this.sum));
  }
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** A gauge or counter family with one series whose value render is given. */
interface Scalar {
  name: string;
  help: string;
  type: 'gauge' | 'counter';
  value: (s: EngineGaugeState) => number;
}

/** vLLM's scalar families: one series each, labelled model_name and engine. */
const SCALARS: Scalar[] = [
  {
    name: 'vllm:num_requests_running',
    help: 'Number of requests in model execution batches.',
    type: 'gauge',
    value: (s) => s.running,
  },
  {
    name: 'vllm:num_requests_waiting',
    help: 'Number of requests waiting to be processed.',
    type: 'gauge',
    value: (s) => s.waiting,
  },
  {
    name: 'vllm:kv_cache_usage_perc',
    help: 'KV-cache usage. 1 means 100 percent usage.',
    type: 'gauge',
    value: (s) => s.kvCacheUsage,
  },
  // Renamed to kv_cache_usage_perc in vLLM 0.9 and since dropped; kept because older
  // dashboards (and our own terminal highlights) still read it.
  {
    name: 'vllm:gpu_cache_usage_perc',
    help: 'GPU KV-cache usage. 1 means 100 percent usage. DEPRECATED: Use vllm:kv_cache_usage_perc instead.',
    type: 'gauge',
    value: (s) => s.kvCacheUsage,
  },
  {
    name: 'vllm:prefix_cache_queries_total',
    help: 'Prefix cache queries, in terms of number of queried tokens.',
    type: 'counter',
    value: (s) => s.prefixQueryTokens,
  },
  {
    name: 'vllm:prefix_cache_hits_total',
    help: 'Prefix cache hits, in terms of number of cached tokens.',
    type: 'counter',
    value: (s) => s.prefixHitTokens,
  },
  {
    name: 'vllm:num_preemptions_total',
    help: 'Cumulative number of preemption from the engine.',
    type: 'counter',
    value: (s) => s.preemptions,
  },
  {
    name: 'vllm:prompt_tokens_total',
    help: 'Number of prefill tokens processed.',
    type: 'counter',
    value: (s) => s.promptTokens,
  },
  {
    name: 'vllm:generation_tokens_total',
    help: 'Number of generation tokens processed.',
    type: 'counter',
    value: (s) => s.generationTokens,
  },
];

const SUCCESS = 'vllm:request_success_total';

/** One engine's series: its label set, success counts and histograms. */
class EngineSeries {
  readonly scalarHeads: string[];
  readonly successHeads: string[];
  readonly successCounts = new Float64Array(FINISHED_REASONS.length);
  readonly requestPromptTokens: Histogram;
  readonly requestGenerationTokens: Histogram;
  readonly iterationTokens: Histogram;
  readonly ttft: Histogram;
  readonly itl: Histogram;
  readonly requestTpot: Histogram;
  readonly e2e: Histogram;
  readonly queue: Histogram;
  readonly inference: Histogram;
  readonly prefill: Histogram;
  readonly decode: Histogram;
  /** In exposition order (vLLM's registration order). */
  readonly histograms: Histogram[];

  constructor(engine: number, modelName: string, tokenBuckets: number[]) {
    const labels: [string, string][] = [
      ['engine', String(engine)],
      ['model_name', modelName],
    ];
    const engineLabels = labelSet(labels);
    this.scalarHeads = SCALARS.map((scalar) => `${scalar.name}${engineLabels} `);
    this.successHeads = FINISHED_REASONS.map(
      (reason) => `${SUCCESS}${labelSet([labels[0], ['finished_reason', reason], labels[1]])} `,
    );
    const h = (name: string, help: string, bounds: number[]) =>
      new Histogram(name, help, bounds, labels);
    this.requestPromptTokens = h(
      'vllm:request_prompt_tokens',
      'Number of prefill tokens processed.',
      tokenBuckets,
    );
    this.requestGenerationTokens = h(
      'vllm:request_generation_tokens',
      'Number of generation tokens processed.',
      tokenBuckets,
    );
    // A histogram despite the `_total`: its series are `vllm:iteration_tokens_total_bucket` etc.
    this.iterationTokens = h(
      'vllm:iteration_tokens_total',
      'Histogram of number of tokens per engine_step.',
      ITERATION_TOKEN_BUCKETS,
    );
    this.ttft = h(
      'vllm:time_to_first_token_seconds',
      'Histogram of time to first token in seconds.',
      TTFT_BUCKETS,
    );
    this.itl = h(
      'vllm:inter_token_latency_seconds',
      'Histogram of inter-token latency in seconds.',
      TOKEN_LATENCY_BUCKETS,
    );
    this.requestTpot = h(
      'vllm:request_time_per_output_token_seconds',
      'Histogram of time_per_output_token_seconds per request.',
      TOKEN_LATENCY_BUCKETS,
    );
    this.e2e = h(
      'vllm:e2e_request_latency_seconds',
      'Histogram of e2e request latency in seconds.',
      REQUEST_LATENCY_BUCKETS,
    );
    this.queue = h(
      'vllm:request_queue_time_seconds',
      'Histogram of time spent in WAITING phase for request.',
      REQUEST_LATENCY_BUCKETS,
    );
    this.inference = h(
      'vllm:request_inference_time_seconds',
      'Histogram of time spent in RUNNING phase for request.',
      REQUEST_LATENCY_BUCKETS,
    );
    this.prefill = h(
      'vllm:request_prefill_time_seconds',
      'Histogram of time spent in PREFILL phase for request.',
      REQUEST_LATENCY_BUCKETS,
    );
    this.decode = h(
      'vllm:request_decode_time_seconds',
      'Histogram of time spent in DECODE phase for request.',
      REQUEST_LATENCY_BUCKETS,
    );
    this.histograms = [
      this.requestPromptTokens,
      this.requestGenerationTokens,
      this.iterationTokens,
      this.ttft,
      this.itl,
      this.requestTpot,
      this.e2e,
      this.queue,
      this.inference,
      this.prefill,
      this.decode,
    ];
  }
}

export class SimMetrics {
  private readonly scalarHeaders: string[];
  private readonly successHeader: string;
  private readonly cacheConfigText: string;
  private readonly gpuName: string;
  /** One per engine (data-parallel replica). */
  private readonly engines: EngineSeries[];

  constructor(options: SimMetricsOptions) {
    this.gpuName = options.gpuName ?? 'infergauge simulated GPU';
    this.scalarHeaders = SCALARS.map(
      (scalar) =>
        `# HELP ${scalar.name} ${escapeHelp(scalar.help)}\n# TYPE ${scalar.name} ${scalar.type}`,
    );
    this.successHeader = `# HELP ${SUCCESS} Count of successfully processed requests.\n# TYPE ${SUCCESS} counter`;
    const count = options.engines ?? 1;
    if (!Number.isInteger(count) || count < 1) {
      throw new RangeError(`engines must be a positive integer, not ${count}`);
    }
    const indexes = Array.from({ length: count }, (_, i) => i);
    this.cacheConfigText = cacheConfigInfo(options.cacheConfig, indexes);
    const tokenBuckets = buildOneTwoFiveBuckets(options.maxTokenBucket ?? 131072);
    this.engines = indexes.map((i) => new EngineSeries(i, options.modelName, tokenBuckets));
  }

  /** Tokens (prompt + generated) scheduled in one engine step. */
  observeIteration(tokens: number, engine = 0): void {
    this.engines[engine].iterationTokens.observe(tokens);
  }

  observeTtft(seconds: number, engine = 0): void {
    this.engines[engine].ttft.observe(seconds);
  }

  /** One gap between consecutive output tokens of a request. */
  observeItl(seconds: number, engine = 0): void {
    this.engines[engine].itl.observe(seconds);
  }

  observeFinished(r: FinishedRequestTiming, engine = 0): void {
    const e = this.engines[engine];
    e.successCounts[FINISHED_REASONS.indexOf(r.finishedReason)]++;
    e.e2e.observe(r.e2eS);
    e.queue.observe(r.queueS);
    e.prefill.observe(r.prefillS);
    e.inference.observe(r.inferenceS);
    e.decode.observe(r.decodeS);
    e.requestPromptTokens.observe(r.promptTokens);
    e.requestGenerationTokens.observe(r.generationTokens);
    // vLLM observes every finished request here, 0 when there was no token after the first.
    const tpot = r.tpotS ?? (r.generationTokens > 1 ? r.decodeS / (r.generationTokens - 1) : 0);
    e.requestTpot.observe(tpot);
  }

  /**
   * The whole `/metrics` body, ending in a newline: `state` is the engine's, or one per engine
   * in engine order; `gpus` every GPU of every engine.
   */
  render(state: EngineGaugeState | readonly EngineGaugeState[], gpus: GpuMemoryState[]): string {
    const states = Array.isArray(state) ? state : [state as EngineGaugeState];
    if (states.length !== this.engines.length) {
      throw new RangeError(`${states.length} engine states for ${this.engines.length} engines`);
    }
    const out: string[] = [];
    SCALARS.forEach((scalar, k) => {
      out.push(this.scalarHeaders[k]);
      this.engines.forEach((e, i) => {
        out.push(e.scalarHeads[k] + formatValue(scalar.value(states[i])));
      });
    });
    out.push(this.successHeader);
    for (let reason = 0; reason < FINISHED_REASONS.length; reason++) {
      for (const e of this.engines) {
        out.push(e.successHeads[reason] + formatValue(e.successCounts[reason]));
      }
    }
    const families = this.engines[0].histograms.length;
    for (let k = 0; k < families; k++) {
      out.push(this.engines[0].histograms[k].header);
      for (const e of this.engines) e.histograms[k].renderSamples(out);
    }
    out.push(this.cacheConfigText);
    if (gpus.length > 0) {
      renderDcgm(
        out,
        'DCGM_FI_DEV_FB_FREE',
        'Framebuffer memory free (in MiB).',
        gpus,
        this.gpuName,
        (g) => g.freeMiB,
      );
      renderDcgm(
        out,
        'DCGM_FI_DEV_FB_USED',
        'Framebuffer memory used (in MiB).',
        gpus,
        this.gpuName,
        (g) => g.usedMiB,
      );
    }
    out.push('');
    return out.join('\n');
  }
}

/**
 * `vllm:cache_config_info`: a gauge at 1 whose labels are the cache config, as vLLM's
 * `log_metrics_info` writes it: a series per engine. vLLM adds `engine` (overriding any config
 * key of that name) but no `model_name`. Values are what Python's `str()` gives, hence `True`/`False` for booleans.
 */
function cacheConfigInfo(
  config: Record<string, string | number | boolean>,
  engines: number[],
): string {
  const labels: [string, string][] = [];
  for (const [key, value] of Object.entries(config)) {
    if (!LABEL_NAME.test(key) || key.startsWith('__')) {
      throw new Error(`cache config key ${JSON.stringify(key)} is not a Prometheus label name`);
    }
    if (key === 'engine') continue;
    labels.push([key, typeof value === 'boolean' ? (value ? 'True' : 'False') : String(value)]);
  }
  const name = 'vllm:cache_config_info';
  const series = engines.map((engine) => {
    const withEngine = [...labels, ['engine', String(engine)] as [string, string]];
    withEngine.sort((a, b) => cmp(a[0], b[0]));
    return `${name}${labelSet(withEngine)} 1`;
  });
  return `# HELP ${name} Information of the LLMEngine CacheConfig\n# TYPE ${name} gauge\n${series.join('\n')}`;
}

/**
 * One dcgm-exporter family: a series per GPU, labels in dcgm-exporter's order. Framebuffer
 * fields are integer MiB in DCGM, so the simulator's value is rounded.
 */
function renderDcgm(
  out: string[],
  name: string,
  help: string,
  gpus: GpuMemoryState[],
  gpuName: string,
  value: (g: GpuMemoryState) => number,
): void {
  out.push(`# HELP ${name} ${help}`, `# TYPE ${name} gauge`);
  for (const g of gpus) {
    const labels = labelSet([
      ['gpu', String(g.gpu)],
      ['UUID', `GPU-sim-${g.gpu}`],
      ['device', `nvidia${g.gpu}`],
      ['modelName', gpuName],
    ]);
    out.push(`${name}${labels} ${formatValue(Math.round(value(g)))}`);
  }
}
