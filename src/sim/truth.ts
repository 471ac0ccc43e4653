import type { TruthRecord } from './server.js';

/** Reads the simulator's ground truth (`GET /debug/truth`). */
export async function fetchTruth(simUrl: string): Promise<TruthRecord[]> {
  const response = await fetch(`${simUrl}/debug/truth`);
  if (!response.ok) throw new Error(`GET /debug/truth: HTTP ${response.status}`);
  return ((await response.json()) as { requests: TruthRecord[] }).requests;
}

/** Clears the simulator's ground truth (`POST /debug/truth/reset`). */
export async function resetTruth(simUrl: string): Promise<void> {
  const response = await fetch(`${simUrl}/debug/truth/reset`, { method: 'POST' });
  if (!response.ok) throw new Error(`POST /debug/truth/reset: HTTP ${response.status}`);
  await response.arrayBuffer();
}
