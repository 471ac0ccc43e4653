import { type SimulatorProcess, spawnSimulator } from '../../src/session/simulator.js';

/** The simulator in its own process, as users run it, with options as on its command line. */
export function startSim(options: Record<string, number | string> = {}): Promise<SimulatorProcess> {
  return spawnSimulator(Object.entries(options).flatMap(([k, v]) => [`--${k}`, String(v)]));
}

export { fetchTruth, resetTruth } from '../../src/sim/truth.js';
