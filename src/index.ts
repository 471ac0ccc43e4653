/**
 * infergauge as a library: the user-level API the command line is built on. Run a plan or
 * measure single load points, load a results directory, compare runs, check thresholds, render
 * reports; the simulator and the memory model as targets and answers of their own.
 */

export {
  evaluateThresholds,
  parseThresholds,
  type Threshold,
  type ThresholdEvaluation,
} from './analysis/thresholds.js';
// Errors and exit codes.
export { EXIT, type ExitCode, InfergaugeError, UsageError } from './errors.js';
// A plan: what to run.
export type { LoadSpec } from './load.js';
export { KV_DTYPES, type KvDtype, type WeightFormat } from './memory/dtype.js';
export { findGpuPreset, GPU_PRESETS, type GpuSpec } from './memory/hardware.js';
export { findModelPreset, MODEL_PRESETS, type ModelSpec } from './memory/model.js';
export { memoryReport } from './memory/report.js';
export { findMetric, METRICS } from './metrics/catalog.js';
// What a snapshot event carries while a point runs (docs/metrics.md, "Live metrics").
export type { LiveSnapshot, LiveStats, LiveWindowStats } from './metrics/live.js';
export { parseSlo, type SloCondition } from './metrics/slo.js';
export { type RunSummary, SummaryBuilder, summarize } from './metrics/summary.js';
export {
  severityOf,
  WARNINGS,
  type Warning,
  type WarningCode,
  type WarningSeverity,
} from './metrics/warnings.js';
export { planJsonSchema, readPlanFile } from './plan/planFile.js';
export { PlanError, parseRunPlan, type RunPlan, type RunPlanInput } from './plan/runPlan.js';
// What a run produces: raw records, summaries, a results directory.
export type { ErrorKind, RequestRecord } from './record.js';
export {
  type CompareReport,
  compareTargets,
  renderMarkdown as renderCompareMarkdown,
} from './report/compare.js';
export { vllmBenchResult } from './report/compat.js';
export { requestsCsv, runsCsv } from './report/csv.js';
export { renderHtmlReport } from './report/html.js';
export {
  type LlmdBenchmarkReport,
  llmdBenchmarkReport,
  llmdReportYaml,
} from './report/llmd.js';
export { markdownSummary } from './report/markdown.js';
// Reports.
export { renderTerminalSummary } from './report/terminal.js';
// Across runs: comparisons and CI thresholds.
export { type CompareTarget, readCompareTarget } from './results/compareInput.js';
// Other tools' result files (vLLM bench serve, GuideLLM, AIPerf, llm-d) read as runs.
export { type ForeignRun, parseForeign, readForeign } from './results/foreign/index.js';
export { JsonlWriter, ReadDamage, readRecords } from './results/jsonl.js';
export { RESULT_FILES } from './results/layout.js';
export { loadReportInput, type ReportInput } from './results/load.js';
export { loadSavedRuns, type SavedRun } from './results/reader.js';
// A session's events and the outputs that subscribe to them (the results directory is one).
export type {
  Output,
  OutputContext,
  PointFinished,
  PointInfo,
  PointStarted,
  RecordsEvent,
  SessionFinished,
  SessionInfo,
  SnapshotEvent,
  TelemetryEvent,
} from './session/events.js';
export {
  createPointRunner,
  measurePoint,
  type Point,
  type PointResult,
  type PointRunner,
} from './session/point.js';
export { prepareRun, type RunOptions } from './session/prepare.js';
export { runProbe } from './session/profiles/probe.js';
export { prepareSweep, runSweep } from './session/profiles/sweep.js';
// Running it: a whole plan, or one load point after another.
export {
  benchmark,
  type PlanRunResult,
  type RunHooks,
  runPlan,
  type ScenarioResult,
} from './session/run.js';
export { inSession, type SessionHooks, type SessionOptions } from './session/session.js';
// The simulator in a process of its own, so that it never shares a measuring client's event loop.
export { type SimulatorProcess, spawnSimulator } from './session/simulator.js';
export { openTarget, type PreparedRun } from './session/target.js';
// The simulated serving engine and the memory model.
export { EngineModel, type EngineModelOptions } from './sim/engineModel.js';
export { resolveEngine, type SimEngineSettings } from './sim/options.js';
export {
  LOAD_BALANCERS,
  type LoadBalancer,
  PERSONALITY_IDS,
  type PersonalityId,
} from './sim/personality.js';
export { type RunningSimServer, type SimServerOptions, startSimServer } from './sim/server.js';
// The simulator in this process, from typed options (SimulatorOptions: model, GPU, TP/DP, dtype,
// personality, scheduler limits, timing, faults, answers); `infergauge sim`'s flags read into
// the same options (`parseSimulatorArgs`, `simulatorOptionsFromFlags`).
export { type RunningSimulator, startSimulator } from './sim/simulator.js';
export {
  parseSimulatorArgs,
  SIM_ENGINE_KINDS,
  type SimEngineKind,
  type SimulatorOptions,
  SimulatorOptionsError,
  simulatorOptionsFromFlags,
} from './sim/simulatorOptions.js';
export { simulateRun } from './sim/virtual.js';
