import { createRequire } from 'node:module';

/** This package's version (dist/ and src/ both sit two levels below package.json). */
export const VERSION: string = (
  createRequire(import.meta.url)('../package.json') as { version: string }
).version;
