// Runs call traces through lodash.debounce / lodash.throttle under a virtual
// clock (`_.runInContext` with a fake `Date` and `setTimeout`).
//
// stdin:  [{ kind, wait, options, start, ops: [{ op, arg | ms }] }, ...]
// stdout: [{ raw, flush, stall, both }, ...], each { calls: [[time, arg]], returns: [value | null] }
//
// The four variants apply lull's documented differences to lodash, one at a
// time and together:
//   flush: `flush()` disarms the timer (lodash leaves it armed: lodash#4648);
//   stall: timers already overdue run before the next call or flush (lodash
//          lets a call after a blocked event loop run first: lodash#6003) —
//          but not before a call made in the same turn as the op before it
//          (`turn`: a synchronous loop, where no timer could have run);
//          `cancel` drops what is pending, overdue or not, as lodash does.
// lull must equal `both` exactly; where `raw` differs, the harness shows which fix mattered.
import { readFileSync } from 'node:fs';
import _ from 'lodash';

// One lodash instance for every run (`runInContext` is costly); its clock
// and timers delegate to the scheduler of the run in progress.
let current = { now: 0, setTimeout: () => 0, clearTimeout: () => {} };
const lodash = _.runInContext({
  Date: { now: () => current.now },
  setTimeout: (fn, ms) => current.setTimeout(fn, ms),
  clearTimeout: (id) => current.clearTimeout(id),
});

function run(trace, fixFlush, fixStall) {
  let now = trace.start;
  let nextId = 1;
  const timers = new Map();
  current = {
    get now() {
      return now;
    },
    setTimeout: (fn, ms) => {
      const id = nextId++;
      timers.set(id, { fn, due: now + Math.max(0, Number(ms) || 0) });
      return id;
    },
    clearTimeout: (id) => {
      timers.delete(id);
    },
  };
  // Run timers due by `limit` (strictly before it when `strict`), earliest first;
  // an overdue timer runs at the current time, as after a blocked event loop.
  const runDue = (limit, strict) => {
    for (;;) {
      let pick;
      for (const [id, t] of timers) {
        const due = strict ? t.due < limit : t.due <= limit;
        if (due && (pick === undefined || t.due < pick.due || (t.due === pick.due && id < pick.id))) {
          pick = { id, ...t };
        }
      }
      if (pick === undefined) return;
      timers.delete(pick.id);
      now = Math.max(now, pick.due);
      pick.fn();
    }
  };

  const calls = [];
  const fn = (arg) => {
    calls.push([now, arg]);
    return arg;
  };
  const make = trace.kind === 'throttle' ? lodash.throttle : lodash.debounce;
  const debounced = trace.options === null ? make(fn, trace.wait) : make(fn, trace.wait, trace.options);

  const returns = [];
  const value = (v) => (v === undefined ? null : v);
  for (const step of trace.ops) {
    if (fixStall && ((step.op === 'call' && !step.turn) || step.op === 'flush')) {
      runDue(now, true);
    }
    switch (step.op) {
      case 'advance': {
        const target = now + step.ms;
        runDue(target, false);
        now = target;
        break;
      }
      case 'stall':
        now += step.ms;
        break;
      case 'call':
        returns.push(value(debounced(step.arg)));
        break;
      case 'flush':
        returns.push(value(debounced.flush()));
        if (fixFlush) timers.clear();
        break;
      case 'cancel':
        debounced.cancel();
        returns.push(null);
        break;
      default:
        throw new Error(`unknown op ${step.op}`);
    }
  }
  return { calls, returns };
}

const traces = JSON.parse(readFileSync(0, 'utf8'));
const results = traces.map((trace) => ({
  raw: run(trace, false, false),
  flush: run(trace, true, false),
  stall: run(trace, false, true),
  both: run(trace, true, true),
}));
process.stdout.write(JSON.stringify(results));
