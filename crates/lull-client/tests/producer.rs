//! The producer and admin calls against a scripted local server: what goes
//! out (paths, headers, bodies, idempotency keys) and how refusals, waits
//! and bounds come back.
#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

mod support;

use std::time::{Duration, Instant, SystemTime};

use lull_client::{
    Accepted, BatchEvent, BatchResult, Error, ErrorCode, Lull, MintRequest, Page, RetryPolicy, TokenOp, TokenScope,
};
use support::{Reply, Server};

const ACCEPTED: &str = r#"{"window":3,"seq":12}"#;

fn problem(code: &str, message: &str) -> String {
    format!(r#"{{"error":{{"code":"{code}","message":"{message}","request_id":"4f1c2a9e0b7d3c55"}}}}"#)
}

fn fast(max_attempts: u32) -> RetryPolicy {
    RetryPolicy {
        max_attempts,
        max_elapsed: Duration::from_secs(20),
        backoff_base: Duration::from_millis(10),
        backoff_cap: Duration::from_millis(50),
    }
}

fn lull(server: &Server, policy: RetryPolicy) -> Lull {
    Lull::new(&server.url, "tok-123").unwrap().with_retry(policy)
}

#[tokio::test]
async fn retry_after_in_seconds_is_waited_out_under_the_same_idempotency_key() {
    let server = Server::start(vec![
        Reply::json(429, &problem("too_many_events", "60 a minute")).header("retry-after", "1"),
        Reply::json(202, ACCEPTED),
    ])
    .await;
    let accepted = lull(&server, fast(5)).send("docs", "doc-42", &serde_json::json!({"rev": 7})).await.unwrap();
    assert_eq!(accepted, Accepted { window: 3, seq: 12 });
    let seen = server.requests();
    assert_eq!(seen.len(), 2);
    let gap = seen[1].at - seen[0].at;
    assert!(gap >= Duration::from_millis(950), "waited {gap:?}");
    assert!(gap < Duration::from_millis(2_000), "waited {gap:?}");
    let keys: Vec<&String> = seen.iter().map(|s| &s.headers["idempotency-key"]).collect();
    assert_eq!(keys[0], keys[1], "one key across the call's retries");
    assert!(keys[0].starts_with("lull-"), "{}", keys[0]);
    assert_eq!(seen[0].method, "POST");
    assert_eq!(seen[0].target, "/v1/topics/docs/keys/doc-42/events");
    assert_eq!(seen[0].headers["authorization"], "Bearer tok-123");
    assert_eq!(seen[0].headers["content-type"], "application/json");
    assert_eq!(seen[0].json(), serde_json::json!({"rev": 7}));
    assert_eq!(seen[1].body, seen[0].body);
}

#[tokio::test]
async fn retry_after_as_an_http_date_is_waited_out() {
    let at = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(2));
    let server = Server::start(vec![
        Reply::json(503, &problem("unavailable", "storage is unavailable")).header("retry-after", &at),
        Reply::json(202, ACCEPTED),
    ])
    .await;
    lull(&server, fast(5)).send_json("docs", "k", "{}", Some("caller-key-1")).await.unwrap();
    let seen = server.requests();
    assert_eq!(seen.len(), 2);
    let gap = seen[1].at - seen[0].at;
    assert!(gap >= Duration::from_millis(900), "waited {gap:?} for {at}");
    assert!(seen.iter().all(|s| s.headers["idempotency-key"] == "caller-key-1"), "the caller's key, as given");
}

#[tokio::test]
async fn attempts_are_bounded() {
    let server = Server::start(vec![Reply::json(503, &problem("unavailable", "try again"))]).await;
    let error = lull(&server, fast(3)).send("docs", "k", &1).await.unwrap_err();
    let Error::Api(api) = &error else { panic!("{error:?}") };
    assert_eq!((api.status, &api.code), (503, &ErrorCode::Unavailable));
    assert_eq!(server.requests().len(), 3);
    assert!(error.is_transient());
}

#[tokio::test]
async fn total_time_is_bounded_a_wait_past_it_is_not_started() {
    let server =
        Server::start(vec![Reply::json(429, &problem("dead_letters_full", "full")).header("retry-after", "1")]).await;
    let policy = RetryPolicy { max_elapsed: Duration::from_millis(1_500), ..fast(10) };
    let start = Instant::now();
    let error = lull(&server, policy).send("q", "k", &1).await.unwrap_err();
    let took = start.elapsed();
    assert_eq!(server.requests().len(), 2, "at 0 s and 1 s; a third would start past 1.5 s");
    assert!(took >= Duration::from_millis(950) && took < Duration::from_millis(1_500), "{took:?}");
    let Error::Api(api) = error else { panic!() };
    assert_eq!((api.code, api.retry_after), (ErrorCode::DeadLettersFull, Some(Duration::from_secs(1))));
}

#[tokio::test]
async fn other_refusals_are_not_retried_and_decode_as_typed_errors() {
    let server = Server::start(vec![Reply::json(
        409,
        &problem("idempotency_key_reused", "this Idempotency-Key was used with another body"),
    )])
    .await;
    let error = lull(&server, fast(5)).send("docs", "k", &2).await.unwrap_err();
    assert_eq!(server.requests().len(), 1);
    let Error::Api(api) = &error else { panic!("{error:?}") };
    assert_eq!(api.status, 409);
    assert_eq!(api.code, ErrorCode::IdempotencyKeyReused);
    assert_eq!(api.message, "this Idempotency-Key was used with another body");
    assert_eq!(api.request_id.as_deref(), Some("4f1c2a9e0b7d3c55"));
    assert!(!error.is_transient());
    assert!(error.to_string().contains("409 idempotency_key_reused: this Idempotency-Key"), "{error}");
}

#[tokio::test]
async fn an_unknown_code_and_a_body_that_is_not_lulls_are_kept() {
    let server = Server::start(vec![Reply::json(418, &problem("brand_new", "new"))]).await;
    let Error::Api(api) = lull(&server, fast(1)).send("t", "k", &1).await.unwrap_err() else { panic!() };
    assert_eq!(api.code, ErrorCode::Other("brand_new".into()));
    let html = Reply::Answer { status: 502, headers: vec![], body: "<html>bad gateway</html>".into() };
    let server = Server::start(vec![html]).await;
    let Error::Api(api) = lull(&server, fast(1)).send("t", "k", &1).await.unwrap_err() else { panic!() };
    assert_eq!(
        (api.status, api.code, api.message.as_str()),
        (502, ErrorCode::Other(String::new()), "<html>bad gateway</html>")
    );
}

#[tokio::test]
async fn a_lost_connection_is_retried_under_the_same_key() {
    let server = Server::start(vec![Reply::Hangup, Reply::json(202, ACCEPTED)]).await;
    lull(&server, fast(3)).send("docs", "k", &"x").await.unwrap();
    let seen = server.requests();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].headers["idempotency-key"], seen[1].headers["idempotency-key"]);
}

#[tokio::test]
async fn a_server_that_is_not_there_is_a_transport_error_after_the_retries() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let error = Lull::new(&url, "t").unwrap().with_retry(fast(2)).send("t", "k", &1).await.unwrap_err();
    assert!(matches!(error, Error::Transport(_)), "{error:?}");
}

#[tokio::test]
async fn keys_are_one_path_segment_under_a_base_with_a_path() {
    let server = Server::start(vec![Reply::json(202, ACCEPTED)]).await;
    let lull = Lull::new(&format!("{}/lull/", server.url), "t").unwrap();
    lull.send_json("docs", "customer/42 é", "[1]", None).await.unwrap();
    assert_eq!(server.requests()[0].target, "/lull/v1/topics/docs/keys/customer%2F42%20%C3%A9/events");
    assert!(matches!(lull.send("docs", "..", &1).await, Err(Error::Input(_))));
    assert_eq!(server.requests().len(), 1, "a dot segment is never sent");
}

#[tokio::test]
async fn a_batch_gives_each_event_a_key_and_keeps_them_across_retries() {
    let results = r#"{"results":[{"status":202,"window":1,"seq":1},{"status":429,"error":{"code":"too_many_pending","message":"full","request_id":"-"}}]}"#;
    let server = Server::start(vec![Reply::json(503, &problem("unavailable", "x")), Reply::json(207, results)]).await;
    let mut given = BatchEvent::new("b", &serde_json::json!({"n": 2})).unwrap();
    given.idempotency_key = Some("mine-1".into());
    let events = vec![BatchEvent::new("a", &serde_json::json!({"n": 1})).unwrap(), given];
    let answer = lull(&server, fast(3)).send_batch("docs", &events).await.unwrap();
    assert_eq!(answer[0], BatchResult::Accepted(Accepted { window: 1, seq: 1 }));
    let BatchResult::Refused(refused) = &answer[1] else { panic!() };
    assert_eq!((refused.status, &refused.code), (429, &ErrorCode::TooManyPending));
    let seen = server.requests();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].target, "/v1/topics/docs/events:batch");
    assert_eq!(seen[0].body, seen[1].body, "the same events and keys on the retry");
    let sent = seen[0].json();
    let generated = sent["events"][0]["idempotency_key"].as_str().unwrap();
    assert!(generated.starts_with("lull-") && generated.ends_with(".0"), "{generated}");
    assert_eq!(sent["events"][1], serde_json::json!({"key": "b", "event": {"n": 2}, "idempotency_key": "mine-1"}));
    assert!(!seen[0].headers.contains_key("idempotency-key"), "the batch route reads keys from the body");
}

#[tokio::test]
async fn a_large_batch_goes_as_several_requests_each_key_its_own() {
    let ok = |n: usize| {
        let results: Vec<String> = (0..n).map(|i| format!(r#"{{"status":202,"window":1,"seq":{}}}"#, i + 1)).collect();
        Reply::json(207, &format!(r#"{{"results":[{}]}}"#, results.join(",")))
    };
    let server = Server::start(vec![ok(1_000), ok(500)]).await;
    let events: Vec<BatchEvent> = (0..1_500).map(|i| BatchEvent::new(format!("k{i}"), &i).unwrap()).collect();
    let answer = lull(&server, fast(1)).send_batch("docs", &events).await.unwrap();
    assert_eq!(answer.len(), 1_500);
    let seen = server.requests();
    let sizes: Vec<usize> = seen.iter().map(|s| s.json()["events"].as_array().unwrap().len()).collect();
    assert_eq!(sizes, [1_000, 500]);
    let keys: std::collections::BTreeSet<String> = seen
        .iter()
        .flat_map(|s| s.json()["events"].as_array().unwrap().clone())
        .map(|e| e["idempotency_key"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(keys.len(), 1_500, "every event its own key");
    let mut bad = events.clone();
    bad[1_200].key = "..".into();
    let before = server.requests().len();
    assert!(matches!(lull(&server, fast(1)).send_batch("docs", &bad).await, Err(Error::Input(_))));
    assert_eq!(server.requests().len(), before, "a split batch is checked before anything is sent");
}

#[tokio::test]
async fn admin_calls_go_where_the_api_says() {
    let status = r#"{"topic":"docs","key":"k/1","incarnation":null,"state":"idle","queued_count":0,"dead_letter_count":0,"dead_letters":[],"stored_events":0,"stats":{"events":0}}"#;
    let server = Server::start(vec![
        Reply::json(200, status),
        Reply::json(200, r#"{"dead_letters":[],"count":0,"next_after":null}"#),
        Reply::json(200, status),
        Reply::json(200, r#"{"discarded":7}"#),
        Reply::json(200, r#"{"replayed":1,"remaining":0}"#),
        Reply::json(201, r#"{"token":"a.b.c","expires_at":1767226200}"#),
    ])
    .await;
    let lull = lull(&server, fast(1));
    assert_eq!(lull.key_status("docs", "k/1").await.unwrap().other["stats"]["events"], 0);
    let page = lull.key_dead_letters("docs", "k/1", Page { after: Some(4), limit: Some(50) }).await.unwrap();
    assert_eq!(page.next_after, None);
    lull.discard_key_dead_letter("docs", "k/1", 4).await.unwrap();
    assert_eq!(lull.discard_queue_dead_letter("orders", 7).await.unwrap().discarded, 7);
    assert_eq!(lull.replay_queue_dead_letters("orders").await.unwrap().remaining, 0);
    let mut mint = MintRequest::new(TokenScope::Key("doc-1".into()));
    mint.ops = vec![TokenOp::Events, TokenOp::Flush];
    mint.ttl_s = Some(600);
    assert_eq!(lull.mint_client_token("docs", &mint).await.unwrap().token, "a.b.c");
    let seen: Vec<(String, String)> = server.requests().iter().map(|s| (s.method.clone(), s.target.clone())).collect();
    let want = [
        ("GET", "/v1/topics/docs/keys/k%2F1"),
        ("GET", "/v1/topics/docs/keys/k%2F1/dead-letters?after=4&limit=50"),
        ("DELETE", "/v1/topics/docs/keys/k%2F1/dead-letters/4"),
        ("DELETE", "/v1/topics/orders/queue/dead-letters/7"),
        ("POST", "/v1/topics/orders/queue/dead-letters/retry"),
        ("POST", "/v1/topics/docs/client-tokens"),
    ];
    assert_eq!(seen, want.map(|(m, t)| (m.to_string(), t.to_string())));
    assert_eq!(
        server.requests()[5].json(),
        serde_json::json!({"key": "doc-1", "ttl_s": 600, "ops": ["events", "flush"]})
    );
}
