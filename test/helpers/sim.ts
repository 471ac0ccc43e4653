import { type SimulatorProcess, spawnSimulator } from '../../src/cli/simProcess.js';
import type { TruthRecord } from '../../src/sim/server.js';

/** The simulator in its own process, as users run it, with options as on its command line. */
export function startSim(options: Record<string, number | string> = {}): Promise<SimulatorProcess> {
  return spawnSimulator(Object.entries(options).flatMap(([k, v]) => [`--${k}`, String(v)]));
}

export async function fetchTruth(url: string): Promise<TruthRecord[]> {
  const response = await fetch(`${url}/debug/truth`);
  return ((await response.json()) as { requests: TruthRecord[] }).requests;
}

export async function resetTruth(url: string): Promise<void> {
  await fetch(`${url}/debug/truth/reset`, { method: 'POST' });
}
