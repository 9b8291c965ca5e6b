// A fake lull-edge for the framework adapters' `useEdge` tests (react/, vue/).

/**
 * A fetch that answers every send 202 and records what it got; a request
 * with the token `expired-token` is refused 401, as an expired token is.
 */
export function edgeServer() {
  const got = [];
  const fetch = async (url, init) => {
    got.push({ url, method: init.method, auth: init.headers.authorization, body: init.body });
    if (init.headers.authorization === 'Bearer expired-token') return new Response('{"error":{"code":"unauthorized","message":"expired"}}', { status: 401 });
    return new Response(JSON.stringify({ window: 1, seq: got.length }), { status: 202 });
  };
  return { got, fetch };
}
