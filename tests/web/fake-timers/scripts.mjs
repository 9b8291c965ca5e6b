// The lockstep scripts (scripts.cjs), and the built package as the ES module tests import it.
export { allScripts, jestClock } from './scripts.cjs';

/** The built package's main entry (LULL_WEB_PKG: the directory `cargo xtask package` writes), as an app imports it. */
export async function importPackage() {
  const pkg = process.env.LULL_WEB_PKG;
  if (!pkg) throw new Error('LULL_WEB_PKG must name the built package directory');
  const { pathToFileURL } = await import('node:url');
  const { join } = await import('node:path');
  return import(/* @vite-ignore */ pathToFileURL(join(pkg, 'index.js')).href);
}
