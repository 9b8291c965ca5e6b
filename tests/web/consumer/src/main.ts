// A plain import: lull-web is ready on import, no `init()`.
import { debounce, debounceAsync, throttle, type DebouncedFunc } from 'lull-web';
import { edge, EdgeError, type EdgeClient, type Sent } from 'lull-web/edge';

// When each call began and ended (performance.now(), the engine's clock): the
// test judges the outcome by the times that happened, not the ones meant.
type Span = [number, number];
const timed = (f: () => void): Span => {
  const start = performance.now();
  f();
  return [start, performance.now()];
};

const calls: number[] = [];
const runTimes: number[] = [];
const double: DebouncedFunc<(x: number) => number> = debounce((x: number) => {
  calls.push(x);
  runTimes.push(performance.now());
  return x * 2;
}, 30);

// Never run: the types must reject a wrong argument, or `tsc` fails on the unused directive.
export function typesAreReal(): void {
  // @ts-expect-error -- a string is not a number
  double('nope');
}

// Never run either: lull-web/edge resolves through the package's exports, with its types.
export async function edgeTypesAreReal(): Promise<number> {
  const client: EdgeClient = edge({ url: 'https://edge.example', token: 't' });
  const sent: Sent = await client.send('docs', 'd1', { text: 'x' }, { debounce: 500, combine: 'all' });
  // @ts-expect-error -- combine is "last" or "all"
  void client.send('docs', 'd1', 1, { combine: 'first' });
  const page = await client.timeline('docs', 'd1', { after: sent.seq });
  try {
    await client.flush('docs', 'd1');
  } catch (e) {
    if (e instanceof EdgeError) return e.status;
  }
  return page.timeline.length;
}

const callTimes: Span[] = [];
for (let i = 1; i <= 5; i++) callTimes.push(timed(() => double(i)));
const pendingBefore = double.pending();

const ticks: number[] = [];
const tick = throttle((n: number) => ticks.push(n), 1000);
const tickTimes = [timed(() => tick(1)), timed(() => tick(2))];
tick.cancel();

const shout = debounceAsync(async (q: string, _signal: AbortSignal) => q.toUpperCase(), 20);
let a!: Promise<string>;
let b!: Promise<string>;
const shoutTimes = [timed(() => (a = shout('ab'))), timed(() => (b = shout('abc')))];
const [first, second] = await Promise.all([a, b]);

// The debounced call runs when its timer does, however late that is on a busy machine.
while (double.pending()) await new Promise((resolve) => setTimeout(resolve, 5));
(window as unknown as { lull: unknown }).lull = {
  calls,
  runTimes,
  callTimes,
  pendingBefore,
  ticks,
  tickTimes,
  first,
  second,
  shoutTimes,
  done: true,
};
