/**
 * `npm start`: the whole relay on this machine (docs/contract.md §3). Configuration comes from the
 * environment, every variable optional; Ctrl-C stops after the batches in hand.
 */
import { endpointsDir } from '../cli/local-endpoints.ts';
import { loadLocalConfig } from './local-config.ts';
import { startLocalStack } from './local-stack.ts';

const print = (line: string) => process.stdout.write(`${line}\n`);

try {
  const stack = await startLocalStack(loadLocalConfig(process.env), print, {
    endpointsDir: endpointsDir(process.env),
  });
  let firstSignal: number | undefined;
  const shutdown = () => {
    // Ctrl-C reaches both npm and the relay, and npm passes it on again: a second signal within
    // two seconds is that echo; a later one means "stop now".
    if (firstSignal !== undefined) {
      if (Date.now() - firstSignal > 2_000) process.exit(130);
      return;
    }
    firstSignal = Date.now();
    print('Stopping after the batches in hand…');
    stack.stop().then(
      () => {
        print('Stopped.');
        process.exit(0);
      },
      (error: unknown) => {
        process.stderr.write(`Could not stop cleanly: ${String(error)}\n`);
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', shutdown);
  process.on('SIGTERM', shutdown);
} catch (error) {
  const message = error instanceof Error ? error.message : String(error);
  // A port in use is the usual first stumble: name the setting that moves it.
  const hint =
    // Also when the front's thread reports it: then only its message says so.
    (error as { code?: unknown }).code === 'EADDRINUSE' || message.includes('EADDRINUSE')
      ? ' (another process uses the port: set PORT, e.g. PORT=3001 npm start)'
      : '';
  process.stderr.write(`${message}${hint}\n`);
  process.exit(1);
}
