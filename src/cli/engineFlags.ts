import { type Command, Option } from '@commander-js/extra-typings';
import { ENGINE_FLAGS } from '../sim/options.js';

/**
 * Adds the simulated engine's options to a command (`model` is the command's own --model), or
 * only those whose keys `only` names.
 */
export function addEngineFlags<C extends Command<[], Record<string, unknown>>>(
  command: C,
  only?: readonly string[],
): C {
  for (const f of ENGINE_FLAGS) {
    if (!only || only.includes(f.key)) command.addOption(new Option(f.flag, f.help));
  }
  return command;
}
