import type { TruthRecord } from './server.js';

/** Reads the simulator's ground truth (`GET /debug/truth`). */
export async function fetchTruth(simUrl: string): Promise<TruthRecord[]> {
  return (await fetchTruthTimeline(simUrl)).requests;
}

/**
 * The ground truth with its origin on process.hrtime's clock (ms), which every process of a
 * Linux machine shares: truth time t is at originHrMs + t on it.
 */
export async function fetchTruthTimeline(
  simUrl: string,
): Promise<{ requests: TruthRecord[]; originHrMs: number }> {
  const response = await fetch(`${simUrl}/debug/truth`);
  if (!response.ok) throw new Error(`GET /debug/truth: HTTP ${response.status}`);
  return (await response.json()) as { requests: TruthRecord[]; originHrMs: number };
}

/** Clears the simulator's ground truth (`POST /debug/truth/reset`). */
export async function resetTruth(simUrl: string): Promise<void> {
  const response = await fetch(`${simUrl}/debug/truth/reset`, { method: 'POST' });
  if (!response.ok) throw new Error(`POST /debug/truth/reset: HTTP ${response.status}`);
  await response.arrayBuffer();
}
