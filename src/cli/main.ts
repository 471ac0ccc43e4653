#!/usr/bin/env node
import { CommanderError } from '@commander-js/extra-typings';
import { program } from './program.js';

program(process.argv[2])
  .then((root) => root.parseAsync(process.argv))
  .catch((err: Error) => {
    // Commander has printed its own message; program.ts chose the exit code.
    if (err instanceof CommanderError) {
      process.exitCode = err.exitCode;
      return;
    }
    process.stderr.write(`infergauge: ${err.message}\n`);
    process.exitCode = 1;
  });
