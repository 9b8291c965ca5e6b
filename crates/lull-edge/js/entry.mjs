// lull-edge's entry module: worker-build's (../index.js), with the key object
// declared a `DurableObject`, so the router calls it over RPC (`call`) and no
// Request, Response or Headers is made between them. `cargo xtask edge-build`
// writes it over worker-build's `worker/shim.mjs` (wrangler.toml's `main`).
import { DurableObject } from "cloudflare:workers";
import worker, { KeyWindow as KeyWindowWasm, TopicGate } from "../index.js";

export default worker;
export { TopicGate };

/** One `(topic, key)`: the runtime's class around the wasm object. */
export class KeyWindow extends DurableObject {
  #key;

  constructor(ctx, env) {
    super(ctx, env);
    this.#key = new KeyWindowWasm(ctx, env);
  }

  /** A call from the router (a `KeyCall`'s JSON): `[status, JSON text, Retry-After seconds?]`. */
  call(wire) {
    return this.#key.call(wire);
  }

  /** The key's alarm. */
  alarm() {
    return this.#key.alarm();
  }
}
