// A pull consumer for a lull topic whose queue has no Worker consumer: the
// downstream (a scheduled job, a service behind a firewall) pulls windows
// through Cloudflare's HTTP pull API, processes each, then acks it or asks
// for a retry. Node 18+, no dependencies.
//
//   CF_ACCOUNT_ID=… CF_QUEUE_ID=… CF_API_TOKEN=… node puller.mjs
//
// Each message is what lull-edge queued: {topic, idempotency_key, attempt,
// body} where body is the window as a webhook would get it (with `part`
// when a large window was split). Deduplicate on idempotency_key: a message
// whose visibility timeout ran out before its ack comes again.

const API = "https://api.cloudflare.com/client/v4";

/** The message's JSON: the pull API returns a JSON message's body as text. */
export function decode(message) {
  return typeof message.body === "string" ? JSON.parse(message.body) : message.body;
}

/**
 * Pull one batch and settle every message in it: `process(window)` resolving
 * acks it, throwing asks for a retry after `retryDelaySeconds`. Returns
 * {pulled, acked, retried, backlog}.
 */
export async function pullOnce({ api = API, accountId, queueId, token, process, batchSize = 10, visibilityTimeoutMs = 30_000, retryDelaySeconds = 10, fetch = globalThis.fetch }) {
  const base = `${api}/accounts/${accountId}/queues/${queueId}/messages`;
  const headers = { authorization: `Bearer ${token}`, "content-type": "application/json" };
  const pulled = await fetch(`${base}/pull`, {
    method: "POST",
    headers,
    body: JSON.stringify({ batch_size: batchSize, visibility_timeout_ms: visibilityTimeoutMs }),
  }).then((r) => r.json());
  if (!pulled.success) throw new Error(`pull: ${JSON.stringify(pulled.errors)}`);
  const messages = pulled.result.messages ?? [];
  const acks = [];
  const retries = [];
  for (const message of messages) {
    try {
      await process(decode(message), message);
      acks.push({ lease_id: message.lease_id });
    } catch {
      retries.push({ lease_id: message.lease_id, delay_seconds: retryDelaySeconds });
    }
  }
  if (messages.length > 0) {
    const settled = await fetch(`${base}/ack`, { method: "POST", headers, body: JSON.stringify({ acks, retries }) }).then((r) => r.json());
    if (!settled.success) throw new Error(`ack: ${JSON.stringify(settled.errors)}`);
  }
  return { pulled: messages.length, acked: acks.length, retried: retries.length, backlog: pulled.result.message_backlog_count };
}

// Run as a program: pull until the queue is empty, printing each window.
if (import.meta.url === `file://${process.argv[1]}`) {
  const env = (name) => process.env[name] ?? (() => { throw new Error(`${name} is not set`); })();
  const options = { accountId: env("CF_ACCOUNT_ID"), queueId: env("CF_QUEUE_ID"), token: env("CF_API_TOKEN") };
  const seen = new Set();
  for (;;) {
    const round = await pullOnce({
      ...options,
      process: async (message) => {
        if (seen.has(message.idempotency_key)) return; // a redelivery: done already
        console.log(JSON.stringify({ key: message.idempotency_key, window: message.body.window, count: message.body.count }));
        seen.add(message.idempotency_key);
      },
    });
    if (round.pulled === 0) break;
  }
}
