import { appendFileSync } from 'node:fs';

/**
 * Records how long a named step took (a llama-server build or start, a browser install) in
 * $INFERGAUGE_TEST_TRACE, beside the per-process lines of trace-process.cjs, when
 * tools/test/profile.ts is collecting them. Does nothing otherwise.
 */
export function traceStep(step: string, startedAtMs: number): void {
  const path = process.env.INFERGAUGE_TEST_TRACE;
  if (!path) return;
  try {
    appendFileSync(path, `${JSON.stringify({ step, wallMs: Date.now() - startedAtMs })}\n`);
  } catch {
    // a lost line costs the profile a figure, not the caller its work
  }
}
