// lull-edge's entry module: worker-build's (./index.js), with each Durable
// Object's class declared a `DurableObject`, so the router calls it over RPC
// (`call`) and no Request, Response or Headers is made between them.
// `cargo xtask edge-build` writes it into the build as `entry.mjs`, which
// wrangler.toml's `main` names.
import { DurableObject } from "cloudflare:workers";
import { KeyWindow as KeyWindowWasm, TopicGate as TopicGateWasm } from "./index.js";

export * from "./index.js";
export { default } from "./index.js";

/**
 * The wasm's futures (js-sys) wake through the global `queueMicrotask`, once
 * per turn of their queue, always with the same function. workerd's wraps
 * each task it is given in a new function (to report what the task throws,
 * and to carry the async context): garbage on every wake, and about half of
 * the collector's work per event. Here that function is wrapped once, with
 * the same report (`reportError`), and queued as the reaction to a settled
 * promise: the same microtask queue, and V8 carries the async context on a
 * reaction by itself. Only this worker's code runs in its isolate.
 */
const settled = Promise.resolve();
const report = typeof reportError === "function" ? reportError : (error) => console.error(error);
let wrapped = null;
let guarded = null;
globalThis.queueMicrotask = (task) => {
  if (typeof task !== "function") throw new TypeError("queueMicrotask takes a function");
  if (task !== wrapped) {
    wrapped = task;
    guarded = () => {
      try {
        task();
      } catch (error) {
        report(error);
      }
    };
  }
  settled.then(guarded);
};

/** The wasm object inside (a symbol: RPC reaches string-named methods only). */
const WASM = Symbol("wasm object");

/**
 * The runtime's class around one of worker-build's: `call(wire)` takes the
 * router's call (its JSON text) and answers `[status, JSON text, Retry-After
 * seconds or undefined]`: at once when the call did not wait, else as a
 * promise (RPC takes either). `fetch` takes the same call as a POST body, as a
 * router of the previous release sends it while a deploy rolls out (its
 * objects were not `DurableObject`s, so it could not use RPC).
 */
const around = (Wasm) =>
  class extends DurableObject {
    constructor(ctx, env) {
      super(ctx, env);
      this[WASM] = new Wasm(ctx, env);
    }

    call(wire) {
      return this[WASM].call(wire);
    }

    async fetch(request) {
      const [status, text, retryAfter] = await this[WASM].call(await request.text());
      const headers = retryAfter === undefined ? {} : { "retry-after": String(retryAfter) };
      return new Response(text, { status, headers });
    }
  };

/** One `(topic, key)`: its calls and its alarm. */
export class KeyWindow extends around(KeyWindowWasm) {
  alarm() {
    return this[WASM].alarm();
  }
}

/** One queue topic's gate. */
export class TopicGate extends around(TopicGateWasm) {}
