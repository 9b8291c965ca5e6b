// Never run: a CommonJS TypeScript module (`require()` after compiling) gets
// every entry's types through the package's `require` condition (cjs/*.d.ts),
// under `tsc --strict` with Node's own module resolution (Node16: no require() of ES modules).
import { debounce, type DebouncedFunc } from 'lull-web';
import { edge, EdgeError } from 'lull-web/edge';
import { useDebouncedCallback } from 'lull-web/react';
import { useDebouncedFn } from 'lull-web/vue';

export const save: DebouncedFunc<(doc: string) => number> = debounce((doc: string) => doc.length, 100);
// @ts-expect-error -- a number is not a string
save(1);
export const client = edge({ url: 'https://edge.example', token: 't' });
export const isEdgeError = (e: unknown): boolean => e instanceof EdgeError;
export const hook: typeof useDebouncedCallback = useDebouncedCallback;
export const composable: typeof useDebouncedFn = useDebouncedFn;
