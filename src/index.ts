/** infergauge as a library: the same pieces the command line is built from. */

export { BACKEND_NAMES, BACKENDS, type BackendName } from './backends/index.js';
export { buildOpenAIBody } from './backends/openai.js';
export { type DecodedStream, Timeline } from './backends/timeline.js';
export type {
  Backend,
  BackendOptions,
  Endpoint,
  RequestSpec,
  StreamDecoder,
} from './backends/types.js';
export { createRunClock, type RunClock } from './engine/clock.js';
export type { TargetConfig } from './engine/http.js';
export { JsonlWriter, readRecords } from './engine/records.js';
export {
  type EngineOptions,
  type EngineProgress,
  type EngineResult,
  runEngine,
} from './engine/run.js';
export type { LoadSpec } from './load.js';
export {
  assessClientHealth,
  CLIENT_HEALTH_LIMITS,
  type ClientHealth,
} from './metrics/clientHealth.js';
export { type Distribution, percentileOfSorted, SampleSet } from './metrics/distribution.js';
export { forEachTokenGap, type RequestMetrics, requestMetrics } from './metrics/requestMetrics.js';
export { meetsSlo, type SloCondition } from './metrics/slo.js';
export {
  type RunSummary,
  SUMMARY_SCHEMA_VERSION,
  SummaryBuilder,
  summarize,
} from './metrics/summary.js';
export { PlanError, parseRunPlan, type RunPlan } from './plan/runPlan.js';
export { parseSlo } from './plan/slo.js';
export type {
  ClientHealthMeasurements,
  ErrorKind,
  EventTimeline,
  RequestRecord,
} from './record.js';
export { ERROR_KINDS } from './record.js';
export { renderTerminalSummary } from './report/terminal.js';
export { DEFAULT_SCRIPTED_TIMING, ScriptedEngine, type ServingEngine } from './sim/engine.js';
export { startSimServer, type TruthRecord } from './sim/server.js';
export { createArrivalSchedule } from './workload/arrivals.js';
export { createSyntheticWorkload } from './workload/synthetic.js';
