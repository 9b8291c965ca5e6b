// Stored-state fixtures (tests/edge/fixtures/<name>: a Miniflare state
// directory an earlier release's worker left, and made.json with `made_at`,
// the time it was made, in ms since the epoch) copied into a test's state
// directory at an age the run chooses, so no test depends on the day it runs.
//
// `LULL_FIXTURE_AGE` picks the age (`cargo xtask test edge` runs every fixture
// test once in each):
// - `committed` (or unset): the stored times as committed; the age is however
//   long ago the fixture was made.
// - `fresh`: every stored time moved forward so the fixture was made a minute ago.
// - `aged`: every stored time moved back 30 days from the committed ones.
//
// "Every stored time" is every epoch time in every table of every SQLite file
// of the copy: integers in milliseconds (event rows, remembered producer
// keys), the same numbers inside JSON text (snapshots), and integers in
// nanoseconds (the runtime's alarm tables). A test reads the age it got and
// asserts what the worker promises at that age.
import { cpSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";

export const MINUTE = 60_000;
export const HOUR = 60 * MINUTE;
export const DAY = 24 * HOUR;

/** What `aged` moves every stored time back by. */
export const AGED_BY = 30 * DAY;

/** How close to a bound a fixture's age may come before it is moved further away from it (see `copyFixture`). */
const NEAR = 5 * MINUTE;

/** Epoch times this helper re-dates: 2017-07 to 2049-03, in ms and in ns. */
const MS = [1_500_000_000_000n, 2_500_000_000_000n];
const NS = MS.map((ms) => ms * 1_000_000n);
/** A 13-digit number in JSON text (not part of a longer number), in the ms range. */
const MS_IN_TEXT = /(?<![\d.])(1[5-9]\d{11}|2[0-4]\d{11})(?![\d.])/g;

/** The age chosen for this run: `committed`, `fresh` or `aged` (`LULL_FIXTURE_AGE`). */
export function fixtureAge() {
  const age = process.env.LULL_FIXTURE_AGE || "committed";
  if (!["committed", "fresh", "aged"].includes(age)) throw new Error(`LULL_FIXTURE_AGE=${age}: use committed, fresh or aged`);
  return age;
}

/**
 * Copy fixture `name` into `dir`, its stored times moved to this run's age
 * ([`fixtureAge`]). `bounds`: the ages (ms) at which the worker's answer
 * changes for this fixture (an open window's quiet period, the producer keys'
 * dedupe window, an idle key's retention); an age within five minutes of one
 * is moved ten minutes older, so the worker, reading its clock a little later,
 * sees the same side of it as the test. Returns `{ age, made, moved }`: the
 * fixture's age in ms now, its made.json, and how far its times moved (ms).
 */
export function copyFixture(name, dir, { bounds = [] } = {}) {
  const from = join(import.meta.dirname, "fixtures", name);
  const made = JSON.parse(readFileSync(join(from, "made.json"), "utf8"));
  if (!Number.isSafeInteger(made.made_at)) throw new Error(`fixtures/${name}/made.json has no made_at`);
  cpSync(from, dir, { recursive: true });
  const chosen = fixtureAge();
  let moved = { committed: 0, fresh: Date.now() - MINUTE - made.made_at, aged: -AGED_BY }[chosen];
  const ageOf = () => Date.now() - (made.made_at + moved);
  if (bounds.some((b) => Math.abs(ageOf() - b) < NEAR)) moved -= 2 * NEAR;
  if (moved !== 0) {
    const changed = redate(dir, moved);
    if (changed === 0) throw new Error(`fixtures/${name}: no stored time found to move`);
  }
  const age = ageOf();
  console.log(`# fixture ${name}: ${chosen}, ${(age / DAY).toFixed(2)} days old (times moved ${moved} ms)`);
  return { age, made, moved };
}

/** Move every stored time in the SQLite files under `dir` by `ms`; returns how many values changed. */
export function redate(dir, ms) {
  let changed = 0;
  for (const file of sqliteFiles(dir)) {
    const db = new DatabaseSync(file);
    try {
      db.exec("BEGIN");
      const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'").all();
      for (const { name: table } of tables) {
        const t = `"${table.replaceAll('"', '""')}"`;
        for (const { name: column } of db.prepare(`PRAGMA table_info(${t})`).all()) {
          const c = `"${column.replaceAll('"', '""')}"`;
          const shift = (range, by) =>
            db
              .prepare(`UPDATE ${t} SET ${c} = ${c} + ? WHERE typeof(${c}) = 'integer' AND ${c} BETWEEN ? AND ?`)
              .run(by, ...range).changes;
          changed += Number(shift(MS, BigInt(ms)) + shift(NS, BigInt(ms) * 1_000_000n));
          const texts = db.prepare(`SELECT DISTINCT ${c} AS v FROM ${t} WHERE typeof(${c}) = 'text'`).all();
          const update = db.prepare(`UPDATE ${t} SET ${c} = ? WHERE ${c} = ?`);
          for (const { v } of texts) {
            const moved = v.replace(MS_IN_TEXT, (n) => String(Number(n) + ms));
            if (moved !== v) changed += Number(update.run(moved, v).changes);
          }
        }
      }
      db.exec("COMMIT");
    } finally {
      db.close();
    }
  }
  return changed;
}

/** Every `*.sqlite` file under `dir`. */
function sqliteFiles(dir) {
  return readdirSync(dir, { recursive: true })
    .filter((f) => f.endsWith(".sqlite"))
    .map((f) => join(dir, f));
}
