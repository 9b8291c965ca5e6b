// The HTTP messages the router reads and answers (runtime/http.rs) and the
// delivery a key object sends (runtime/outbound.rs), each in one call rather
// than part by part from the wasm.

/**
 * The parts of `request` every API request is read for, as one text: its
 * method, its URL, then each header of `names` in order, one per line: the
 * value after a `+`, or an empty line where the header is absent. No part can
 * hold a line break (the runtime refuses one in a header's value, and a URL
 * holds none once parsed). Decoded by `RequestParts::from_lines`.
 */
export function requestParts(request, names) {
  const headers = request.headers;
  let text = `${request.method}\n${request.url}`;
  for (const name of names) {
    const value = headers.get(name);
    text += value === null ? "\n" : `\n+${value}`;
  }
  return text;
}

/** What a JSON answer carries: one object for every answer, never changed (the runtime copies it). */
const JSON_HEADERS = Object.freeze({ "content-type": "application/json" });

/** `text` (JSON) with `status`, and `Retry-After` when `retryAfter` is a text. */
export function jsonResponse(status, text, retryAfter) {
  const headers = retryAfter === undefined ? JSON_HEADERS : { "content-type": "application/json", "retry-after": retryAfter };
  return new Response(text, { status, headers });
}

/**
 * A delivery's `POST` of `body` (JSON) to `url`, begun: never redirected,
 * aborted by `signal`. Its headers are `fixed` (copied) and `names[i]: values`
 * in order; `fixed` and `names` are made once per isolate by the wasm, so no
 * header's name is decoded per delivery (runtime/outbound.rs).
 */
export function deliver(url, body, signal, fixed, names, idempotencyKey, attempt, id, timestamp, signature) {
  const headers = { ...fixed };
  headers[names[0]] = idempotencyKey;
  headers[names[1]] = attempt;
  headers[names[2]] = id;
  headers[names[3]] = timestamp;
  headers[names[4]] = signature;
  return fetch(url, { method: "POST", headers, body, redirect: "manual", signal });
}
