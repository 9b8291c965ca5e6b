import init, { debounce, debounceAsync, throttle, type DebouncedFunc } from 'lull-web';

await init();

const calls: number[] = [];
const double: DebouncedFunc<(x: number) => number> = debounce((x: number) => {
  calls.push(x);
  return x * 2;
}, 30);

// Never run: the types must reject a wrong argument, or `tsc` fails on the unused directive.
export function typesAreReal(): void {
  // @ts-expect-error -- a string is not a number
  double('nope');
}

for (let i = 1; i <= 5; i++) double(i);
const pendingBefore = double.pending();

const ticks: number[] = [];
const tick = throttle((n: number) => ticks.push(n), 1000);
tick(1);
tick(2);
tick.cancel();

const shout = debounceAsync(async (q: string, _signal: AbortSignal) => q.toUpperCase(), 20);
const [first, second] = await Promise.all([shout('ab'), shout('abc')]);

await new Promise((resolve) => setTimeout(resolve, 80));
(window as unknown as { lull: unknown }).lull = { calls, pendingBefore, ticks, first, second, done: true };
