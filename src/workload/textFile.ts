import { readFileSync } from 'node:fs';

/**
 * A text file (a dataset or trace, `what`) as a string. A binary file is refused, not read as
 * text full of replacement characters: NUL bytes or bytes that are not UTF-8 are an error.
 */
export function readTextFile(path: string, what: string): string {
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (err) {
    throw new Error(`cannot read ${what} ${path}: ${(err as Error).message}`);
  }
  const nul = bytes.indexOf(0);
  if (nul >= 0) {
    throw new Error(
      `${path} holds a NUL byte (at byte ${nul}): a binary file, not a text ${what}; give a UTF-8 text file`,
    );
  }
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch (err) {
    if (err instanceof TypeError) {
      throw new Error(`${path} is not UTF-8 text (a binary file?); give a UTF-8 text ${what}`);
    }
    throw new Error(
      `cannot read ${what} ${path}: over the ~512 MiB a JavaScript string can hold; split it or take a subset`,
    );
  }
}
