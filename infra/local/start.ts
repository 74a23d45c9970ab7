/**
 * `npm start`: the whole relay on this machine (contract §3). Configuration comes from the
 * environment, every variable optional; Ctrl-C stops after the batches in hand.
 */
import { loadLocalConfig, startLocalStack } from './local-stack.ts';

const print = (line: string) => process.stdout.write(`${line}\n`);

try {
  const stack = await startLocalStack(loadLocalConfig(process.env), print);
  let signals = 0;
  const shutdown = () => {
    signals++;
    if (signals > 1) process.exit(130);
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
  process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
}
