import { type Command, InvalidArgumentError, Option } from '@commander-js/extra-typings';
import { parseFlagNumber } from '../flagNumber.js';
import { ENGINE_FLAGS } from '../sim/options.js';
import { SIM_FLAGS, type SimFlagSpec } from '../sim/simulatorOptions.js';

/**
 * Adds the simulated engine's options to a command (`model` is the command's own --model), or
 * only those whose keys `only` names, less those `except` names.
 */
export function addEngineFlags<C extends Command<[], Record<string, unknown>>>(
  command: C,
  only?: readonly string[],
  except: readonly string[] = [],
): C {
  for (const f of ENGINE_FLAGS) {
    if ((!only || only.includes(f.key)) && !except.includes(f.key)) {
      command.addOption(new Option(f.flag, f.help));
    }
  }
  return command;
}

/**
 * Adds `infergauge sim`'s own options (SIM_FLAGS) to a command: numbers read as they are given
 * (commander reports a bad value as bad usage, exit 2), choices and defaults from the table;
 * `defaults` overrides a default (the command's --port 8000).
 */
export function addSimFlags<C extends Command<[], Record<string, unknown>>>(
  command: C,
  defaults: Record<string, string | number> = {},
): C {
  for (const f of SIM_FLAGS) {
    const option = new Option(f.flag, f.help);
    if (f.kind === 'number') option.argParser(numberParser(f));
    if (f.choices) option.choices(f.choices);
    const value = defaults[f.key] ?? f.default;
    if (value !== undefined) option.default(value);
    command.addOption(option);
  }
  return command;
}

function numberParser(rule: SimFlagSpec) {
  return (value: string): number => {
    const parsed = parseFlagNumber(value, rule);
    if ('problem' in parsed) throw new InvalidArgumentError(`It ${parsed.problem}.`);
    return parsed.value;
  };
}
