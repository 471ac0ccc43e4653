#!/usr/bin/env node
import { program } from './program.js';

program()
  .parseAsync(process.argv)
  .catch((err: Error) => {
    process.stderr.write(`infergauge: ${err.message}\n`);
    process.exitCode = 1;
  });
