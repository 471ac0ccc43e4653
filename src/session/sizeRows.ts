/**
 * A size result's rows (size.json `deployments`): each deployment as the search sized it and,
 * with a calibration, its prediction (session/sizePrediction.ts). Types apart from the search
 * and the predictions, which both build them.
 */
import type { PredictionInterval } from '../sim/prediction.js';

/** The figures of `at` that get an interval. */
export const INTERVAL_FIGURES = ['ttftP99Ms', 'itlP99Ms', 'tpotP99Ms', 'outputTokPerS'] as const;
export type IntervalFigure = (typeof INTERVAL_FIGURES)[number];

/** One SLO at a row: its predicted figure with its interval, and the chance it holds. */
export interface SizeSloPrediction {
  /** As written in --slo (`itl.p99<50`). */
  slo: string;
  value: number | null;
  interval?: PredictionInterval;
  chance: number;
}

/** A row's prediction (size.json `deployments[].prediction`). */
export interface SizeRowPrediction {
  level: number;
  /** Draws of the fitted values run (0: the calibration fitted nothing; the scatter alone). */
  draws: number;
  /** An interval for each of `at`'s figures that has one. */
  at: Partial<Record<IntervalFigure, PredictionInterval>>;
  /** Each SLO, in --slo's order. */
  slos: SizeSloPrediction[];
  /** The chance every SLO holds at once at this row's replicas. */
  sloChance: number;
  /** The SLO least sure to hold. */
  tightest?: string;
  /**
   * With --confidence, where the row fell short of it at the replicas the central figures
   * needed: those replicas, and the chance it held at them.
   */
  centralDp?: number;
  centralSloChance?: number;
  /** The ranks (1-based, in `deployments`) of other rows with a prediction this one cannot be told apart from. */
  sameAs?: number[];
}

/** One replica's latency and load at a point. */
export interface SizePointMetrics {
  ttftP99Ms: number | null;
  itlP99Ms: number | null;
  tpotP99Ms: number | null;
  /** Output tokens/s of one replica. */
  outputTokPerS: number;
  /** Largest share of the KV cache in use at once. */
  kvPeak: number;
  preemptions: number;
}

export interface SizedDeployment {
  gpu: string;
  gpuName: string;
  tp: number;
  dp: number;
  gpus: number;
  dtype: string;
  kvCacheDtype: string;
  maxNumSeqs: number;
  personality: string;
  feasible: boolean;
  /** Why not, for a candidate that cannot serve the traffic. */
  reason?: string;
  /** One replica's most load within the SLOs (req/s or users), at the search's resolution. */
  capacityPerReplica?: number;
  /** Load the deployment holds within the SLOs over the traffic, minus 1 (0.2: 20 % spare). */
  headroom?: number;
  /** The search stopped at twice the traffic without failing: the headroom is at least this. */
  headroomAtLeast?: boolean;
  /** Each replica at its share of the traffic. */
  at?: SizePointMetrics;
  costPerHour?: number;
  costPerMillionOutputTokens?: number;
  /** What stops one replica from taking more: an SLO, KV memory, or its step's bound. */
  binding?: string;
  /**
   * A trace's prompt tokens served from the prefix cache at this deployment, all replicas
   * together (the simulator's measure over the replay: it falls as replicas split the sharing).
   */
  prefixCacheHitRate?: number;
  /** On the cost/latency Pareto front (no other deployment is both cheaper and faster). */
  pareto?: boolean;
  /**
   * With a calibration, on the front or in the top rows: intervals on `at`, each SLO's chance
   * and all of them at once, what --confidence added, and the rows it cannot be told from.
   */
  prediction?: SizeRowPrediction;
}
