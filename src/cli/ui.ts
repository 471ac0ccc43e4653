import { Command } from '@commander-js/extra-typings';
import { EXIT } from '../errors.js';
import { DEFAULT_RESULTS_ROOT } from '../results/layout.js';
import { listenForInterrupts, printNotice, printProblems, runAction } from './common.js';

export function uiCommand() {
  return new Command('ui')
    .description(
      'Open finished results in the browser: a results directory as its report, a folder of them (default: infergauge-results) as a list linking to each. Runs until Ctrl-C. A live run has its own: --output ui.',
    )
    .argument('[dir]', 'a results directory, or a folder of them', DEFAULT_RESULTS_ROOT)
    .option(
      '--host <host>',
      'address to listen on; other than loopback, a token is printed and required',
      '127.0.0.1',
    )
    .option('--port <port>', 'port (0: a free one)', '0')
    .action((dir, o) => runAction('ui', () => ui(dir, o)));
}

async function ui(dir: string, o: { host: string; port: string }): Promise<number> {
  // Loaded when the command is chosen: no other command loads the server.
  const [{ serveResults }, { parseUiAddress }, { isDirectory }] = await Promise.all([
    import('../session/outputs/uiResults.js'),
    import('../session/outputs/uiServer.js'),
    import('../results/reader.js'),
  ]);
  if (!isDirectory(dir)) return printProblems('ui', [`${dir} is not a directory`]);
  const host = o.host.includes(':') ? `[${o.host.replace(/^\[|\]$/g, '')}]` : o.host;
  const address = parseUiAddress(`${host}:${o.port}`, `--host ${o.host} --port ${o.port}`);
  const served = await serveResults(dir, address, (m) => printNotice('ui', m));
  printNotice('ui', `results at ${served.url} (Ctrl-C to stop)`);
  await new Promise<void>((resolve) => {
    const interrupts = listenForInterrupts(() => {
      interrupts.dispose();
      resolve();
    });
  });
  await served.close();
  return EXIT.ok;
}
