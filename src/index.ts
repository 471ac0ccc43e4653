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
export type { LoadSpec } from './load.js';
export { createRunClock, type RunClock } from './loadgen/clock.js';
export type { TargetConfig } from './loadgen/http.js';
export {
  type LoadgenOptions,
  type LoadgenProgress,
  type LoadgenResult,
  runLoadgen,
} from './loadgen/run.js';
export { capacityLimit, predictCapacity } from './memory/capacity.js';
export { type KvDtype, parseWeightFormat, type WeightFormat } from './memory/dtype.js';
export {
  EngineStartError,
  kvBytesPerToken,
  planVllmMemory,
  type VllmMemoryPlan,
  weightBytes,
} from './memory/footprint.js';
export { findGpuPreset, GPU_PRESETS, type GpuSpec } from './memory/hardware.js';
export { readHfConfig, resolveModel } from './memory/hfConfig.js';
export { findModelPreset, MODEL_PRESETS, type ModelSpec, paramCounts } from './memory/model.js';
export { memoryReport } from './memory/report.js';
export {
  assessClientHealth,
  CLIENT_HEALTH_LIMITS,
  type ClientHealth,
} from './metrics/clientHealth.js';
export { type Distribution, percentileOfSorted, SampleSet } from './metrics/distribution.js';
export { forEachTokenGap, type RequestMetrics, requestMetrics } from './metrics/requestMetrics.js';
export { meetsSlo, parseSlo, type SloCondition } from './metrics/slo.js';
export {
  type RunSummary,
  SUMMARY_SCHEMA_VERSION,
  SummaryBuilder,
  summarize,
} from './metrics/summary.js';
export { planJsonSchema, readPlanFile } from './plan/planFile.js';
export { PlanError, parseRunPlan, type RunPlan } from './plan/runPlan.js';
export type {
  ClientHealthMeasurements,
  ErrorKind,
  EventTimeline,
  RequestRecord,
} from './record.js';
export { ERROR_KINDS } from './record.js';
export { renderTerminalSummary } from './report/terminal.js';
export { JsonlWriter, readRecords } from './results/jsonl.js';
export { DEFAULT_SCRIPTED_TIMING, ScriptedEngine, type ServingEngine } from './sim/engine.js';
export { EngineModel, type EngineModelOptions } from './sim/engineModel.js';
export { parseFaults } from './sim/faults.js';
export { PhysicalEngine } from './sim/physical.js';
export { DEFAULT_EFFICIENCY, type Efficiency } from './sim/roofline.js';
export { startSimServer, type TruthRecord } from './sim/server.js';
export { simulateRun } from './sim/virtual.js';
export { commonFields } from './telemetry/common.js';
export { createArrivalSchedule } from './workload/arrivals.js';
export { readDataset } from './workload/datasets.js';
export {
  type LengthDistribution,
  parseLengthDistribution,
  sampleLength,
} from './workload/distributions.js';
export { createPromptFactory, type PromptFactory } from './workload/prompts.js';
export { SCENARIO_PRESETS, type Scenario } from './workload/scenarios.js';
export { createSyntheticWorkload } from './workload/synthetic.js';
export { createTokenizer, type Tokenizer } from './workload/tokenizer.js';
export { readTrace } from './workload/trace.js';
export { createWorkload } from './workload/workload.js';
