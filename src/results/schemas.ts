/**
 * The shapes of the JSON files in a results directory, checked when they are read (a file
 * written by another version, or by hand, fails with the field at fault instead of a crash deep
 * in a renderer). The schemas are loose: fields they do not name pass through untouched, so a
 * reader hands on everything a writer saved. The TypeScript types of the written values stay
 * where they are computed (metrics/summary.ts RunSummary, ...); test/unit/results/results-schemas.test.ts
 * checks that the files a real run writes parse, and that those types satisfy the schemas.
 *
 * Built at first use, as the plan file's are (plan/planFile.ts): zod (some 90 modules, about
 * 60 ms of CPU to load) is required only when a file is checked. A run reads back only files it
 * wrote itself, which are not checked (results/layout.ts readOwnJson), so it never loads zod.
 */
import { createRequire } from 'node:module';
import type { z as Zod } from 'zod';
import { ResultFileError } from './layout.js';

const require = createRequire(import.meta.url);

function buildSchemas() {
  const { z } = require('zod') as { z: typeof Zod };

  /** A number as JSON writes it: NaN and Infinity (an empty distribution) come back as null. */
  const num = z.number().nullable();

  /**
   * `severity`, `detail`, `figure` and `threshold` came later (metrics/warnings.ts): older
   * summaries lack them.
   */
  const warningSchema = z.object({
    code: z.string(),
    severity: z.enum(['info', 'warning', 'error']).optional(),
    message: z.string(),
    detail: z.string().optional(),
    figure: z.number().optional(),
    threshold: z.number().optional(),
  });

  const loadSchema = z.looseObject({ mode: z.enum(['closed', 'open']) });

  const distributionSchema = z.looseObject({ count: z.number(), mean: num, p50: num, p99: num });

  const summarySchema = z.looseObject({
    schemaVersion: z.literal(1),
    load: z.looseObject({ mode: z.enum(['closed', 'open']), meanConcurrency: num }),
    requests: z.looseObject({
      completed: z.number(),
      failed: z.number(),
      warmup: z.number(),
      errorsByKind: z.record(z.string(), z.number()),
    }),
    durationS: num,
    tokens: z.looseObject({ input: z.number(), output: z.number() }),
    throughput: z.looseObject({ requestsPerS: num, outputTokensPerS: num }),
    latency: z.record(z.string(), distributionSchema),
    goodput: z.looseObject({ slo: z.string(), goodRequests: z.number() }).optional(),
    clientHealth: z.looseObject({}).optional(),
    serverMetrics: z.looseObject({}).optional(),
    reasoning: z
      .looseObject({ requests: z.number(), reasoningTokens: z.number(), answerTokens: z.number() })
      .optional(),
    sessions: z
      .looseObject({
        started: z.number(),
        completed: z.number(),
        failed: z.number(),
        cut: z.number(),
        sessionMs: distributionSchema,
        meanOpenSessions: num,
        turns: z.array(
          z.looseObject({
            turn: z.number(),
            requests: z.number(),
            failed: z.number(),
            ttftMs: distributionSchema,
            e2eMs: distributionSchema,
          }),
        ),
        agent: z.looseObject({ tasks: z.number(), taskMs: distributionSchema }).optional(),
      })
      .optional(),
    connections: z
      .looseObject({
        requests: z.number(),
        newConnections: z.number(),
        backlogMs: distributionSchema,
        poolWaitMs: distributionSchema,
        setupMs: distributionSchema,
        tcpMs: distributionSchema,
        dnsMs: distributionSchema.optional(),
        tlsMs: distributionSchema.optional(),
      })
      .optional(),
    interrupted: z.boolean(),
    warnings: z.array(warningSchema),
  });

  /** What was run. Every field is optional: hand-made and older run directories hold fewer. */
  const manifestSchema = z.looseObject({
    /** 1: a run's only (before every results directory had one); 2: results/runFiles.ts. */
    schemaVersion: z.union([z.literal(1), z.literal(2)]).optional(),
    id: z.string().optional(),
    kind: z.string().optional(),
    command: z.string().optional(),
    parent: z.looseObject({ id: z.string(), kind: z.string(), dir: z.string() }).optional(),
    endedAt: z.string().optional(),
    tool: z.looseObject({ name: z.string(), version: z.string() }).optional(),
    startedAt: z.string().optional(),
    model: z.string().optional(),
    server: z.looseObject({}).optional(),
    workload: z.looseObject({}).optional(),
    plan: z
      .looseObject({
        load: loadSchema.optional(),
        temperature: z.number().optional(),
        slo: z.array(z.looseObject({})).optional(),
      })
      .optional(),
    execution: z
      .looseObject({
        shard: z.object({ index: z.number(), count: z.number() }).optional(),
        workers: z.number().optional(),
      })
      .optional(),
    host: z.unknown().optional(),
  });

  /** One row per scenario of a multi-scenario run. */
  const scenariosSchema = z.looseObject({
    scenarios: z.array(z.looseObject({ scenario: z.string() })),
  });

  const sweepSchema = z.looseObject({
    schemaVersion: z.literal(1),
    target: z.string().optional(),
    mode: z.string(),
    scenarios: z.array(
      z.looseObject({
        scenario: z.string(),
        points: z.array(z.looseObject({ level: z.number(), repeat: z.number() })),
        warnings: z.array(warningSchema),
      }),
    ),
    interrupted: z.boolean().optional(),
  });

  const probeSchema = z.looseObject({
    schemaVersion: z.literal(1),
    probe: z.enum(['prefill', 'decode']),
    points: z.array(z.looseObject({})),
    fit: z.unknown(),
    interrupted: z.boolean(),
  });

  const capacitySchema = z.looseObject({
    schemaVersion: z.literal(1),
    steps: z.array(z.looseObject({ batch: z.number() })),
    limit: z.looseObject({}).nullable(),
    capacity: z.number(),
    interrupted: z.boolean(),
  });

  /** `infergauge size`'s size.json (session/size.ts SizeResult, with the traffic and SLOs). */
  const sizeSchema = z.looseObject({
    schemaVersion: z.literal(1),
    candidates: z.number(),
    deployments: z.array(z.looseObject({ gpu: z.string(), tp: z.number(), feasible: z.boolean() })),
  });

  /** `infergauge compare --json` (report/compare.ts CompareReport). */
  const compareReportSchema = z.looseObject({
    schemaVersion: z.literal(1),
    baseline: z.object({ label: z.string(), dir: z.string() }),
    options: z.looseObject({
      confidence: z.number(),
      resamples: z.number(),
      seed: z.number(),
      minEffect: z.number(),
      force: z.boolean(),
    }),
    candidates: z.array(
      z.looseObject({
        label: z.string(),
        dir: z.string(),
        pairs: z.array(
          z.looseObject({ scenario: z.string(), metrics: z.array(z.looseObject({})) }),
        ),
        onlyBaseline: z.array(z.string()),
        onlyCandidate: z.array(z.string()),
      }),
    ),
    warnings: z.array(z.string()),
    thresholds: z.array(z.string()).optional(),
  });

  return {
    warningSchema,
    loadSchema,
    summarySchema,
    manifestSchema,
    scenariosSchema,
    sweepSchema,
    probeSchema,
    capacitySchema,
    sizeSchema,
    compareReportSchema,
  };
}

export type ResultSchemas = ReturnType<typeof buildSchemas>;
export type Manifest = Zod.infer<ResultSchemas['manifestSchema']>;
export type ScenariosTable = Zod.infer<ResultSchemas['scenariosSchema']>;

let schemas: ResultSchemas | undefined;

/** The schemas of the results files (zod is loaded at the first call). */
export function resultSchemas(): ResultSchemas {
  schemas ??= buildSchemas();
  return schemas;
}

/** `value` checked against `schema`; a ResultFileError naming `path` and each field at fault. */
export function parseResult<S extends Zod.ZodType>(
  schema: S,
  value: unknown,
  path: string,
  what: string,
): Zod.infer<S> {
  const parsed = schema.safeParse(value);
  // The value itself, not zod's copy: key order and every field stay as written.
  if (parsed.success) return value as Zod.infer<S>;
  const fields = parsed.error.issues
    .slice(0, 3)
    .map((i) => `${i.path.join('.') || '(top)'}: ${i.message}`)
    .join('; ');
  throw new ResultFileError(path, fields, `${path} is not ${what} (${fields})`);
}
