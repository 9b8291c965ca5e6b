// Never run: lull-web/vue resolves through the package's exports with its
// types, and `tsc --strict` must accept the right uses and reject the wrong
// ones (an unused @ts-expect-error fails the check too).
import { ref, toRef } from 'vue';
import type { DebouncedFunc } from 'lull-web';
import {
  useDebouncedAsync,
  useDebouncedFn,
  useDebouncedRef,
  useEdge,
  useSearch,
  useThrottledFn,
  type DebouncedAsync,
  type DebouncedRef,
  type Edge,
  type Search,
} from 'lull-web/vue';

export function composablesAreTyped(props: { onSave: (doc: string) => number; wait: number }): number {
  const save: DebouncedFunc<(doc: string) => number> = useDebouncedFn((doc: string) => doc.length, 500, { maxWait: 2000, flushOnUnmount: true });
  // @ts-expect-error -- a number is not a string
  save(1);
  const saved: number | undefined = save.flush();
  // The latest prop, through a ref of it; wait as a getter; an option as a ref.
  const latest: DebouncedFunc<(doc: string) => number> = useDebouncedFn(toRef(() => props.onSave), () => props.wait, { leading: ref(true) });
  // @ts-expect-error -- a ref of a string is no function
  useDebouncedFn(ref('save'), 10);
  const tick = useThrottledFn((y: number) => y, 100, { leading: false, flushOnUnmount: true });
  // @ts-expect-error -- throttle takes no maxWait
  useThrottledFn(() => 0, 100, { maxWait: 5 });
  // @ts-expect-error -- throttle learns no wait
  useThrottledFn(() => 0, 'auto');
  const text = ref('x');
  const query: DebouncedRef<string> = useDebouncedRef(text, 'auto');
  const fromGetter: DebouncedRef<number> = useDebouncedRef(() => text.value.length, ref(300));
  // @ts-expect-error -- the debounced ref is readonly
  query.value = 'y';
  const suggest: DebouncedAsync<[string], string[]> = useDebouncedAsync(async (q: string, signal: AbortSignal) => (signal.aborted ? [] : [q]), 200, { mode: 'latest' });
  // @ts-expect-error -- run takes the query, a string
  void suggest.run(1);
  const found: string[] | undefined = suggest.data.value;
  const search: Search<number> = useSearch({ search: async (q: string) => q.length, wait: ref<number | 'auto'>('auto'), cache: 5 });
  const input: HTMLInputElement | null = search.ref.value;
  const results: number | undefined = search.results.value;
  // @ts-expect-error -- results are readonly
  search.results.value = 3;
  const edge: Edge = useEdge({ url: 'https://edge.example', token: () => 'jwt' });
  // @ts-expect-error -- the composable closes its client itself
  edge.close();
  return (saved ?? 0) + (latest.pending() ? 1 : 0) + tick.length + query.value.length + fromGetter.value + (query.pending() ? 1 : 0) + (found?.length ?? 0) + (results ?? 0) + (input ? 1 : 0);
}
