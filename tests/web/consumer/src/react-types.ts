// Never run: lull-web/react resolves through the package's exports with its
// types, and `tsc --strict` must accept the right uses and reject the wrong
// ones (an unused @ts-expect-error fails the check too). The hooks' types
// need no @types/react.
import type { DebouncedFunc } from 'lull-web';
import {
  useDebouncedAsync,
  useDebouncedCallback,
  useDebouncedValue,
  useEdge,
  useSearch,
  useThrottledCallback,
  type DebouncedAsync,
  type DebouncedValueControls,
  type Edge,
  type Search,
} from 'lull-web/react';

export function hooksAreTyped(input: HTMLInputElement | null): number {
  const save: DebouncedFunc<(doc: string) => number> = useDebouncedCallback((doc: string) => doc.length, 500, { maxWait: 2000, flushOnUnmount: true });
  // @ts-expect-error -- a number is not a string
  save(1);
  const saved: number | undefined = save.flush();
  const tick = useThrottledCallback((y: number) => y, 100, { leading: false, flushOnUnmount: true });
  // @ts-expect-error -- throttle takes no maxWait
  useThrottledCallback(() => 0, 100, { maxWait: 5 });
  // @ts-expect-error -- throttle learns no wait
  useThrottledCallback(() => 0, 'auto');
  const [value, controls]: [string, DebouncedValueControls] = useDebouncedValue('x', 'auto');
  const suggest: DebouncedAsync<[string], string[]> = useDebouncedAsync(async (q: string, signal: AbortSignal) => (signal.aborted ? [] : [q]), 200, { mode: 'latest' });
  // @ts-expect-error -- run takes the query, a string
  void suggest.run(1);
  const search: Search<number> = useSearch({ search: async (q: string) => q.length, wait: 'auto', cache: 5 });
  search.ref(input);
  const found: number | undefined = search.results;
  const edge: Edge = useEdge({ url: 'https://edge.example', token: () => 'jwt' });
  // @ts-expect-error -- the hook closes its client itself
  edge.close();
  return (saved ?? 0) + tick.length + value.length + (controls.pending() ? 1 : 0) + (suggest.data?.length ?? 0) + (found ?? 0);
}
