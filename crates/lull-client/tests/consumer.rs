//! The pull consumer against a scripted local server speaking Cloudflare's
//! HTTP pull API: request shapes, message decoding, ack answers, refusals.
#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

mod support;

use std::time::Duration;

use lull_client::{Error, LeaseId, PullConfig, PullQueue, Retry, RetryPolicy, Seen};
use support::{Reply, Server};

fn queue(server: &Server) -> PullQueue {
    let config = PullConfig { base: format!("{}/client/v4/", server.url), ..PullConfig::new("acc", "q1", "cf-token") };
    PullQueue::new(config).unwrap().with_retry(RetryPolicy::none())
}

const LULL_MESSAGE: &str = r#"{"topic":"orders","idempotency_key":"orders/c1/8kq2m7x0ba.3","attempt":2,"body":{"topic":"orders","key":"c1","window":3,"count":1,"event":{"n":1}}}"#;

#[tokio::test]
async fn pull_asks_as_the_api_takes_and_decodes_text_and_object_bodies() {
    let as_text = serde_json::to_string(LULL_MESSAGE).unwrap();
    let answer = format!(
        r#"{{"success":true,"errors":[],"messages":[],"result":{{"messages":[
            {{"id":"m1","body":{as_text},"timestamp_ms":1767225600000,"attempts":1,"lease_id":"lease-1"}},
            {{"id":"m2","body":{LULL_MESSAGE},"timestamp_ms":1767225600001,"attempts":3,"lease_id":"lease-2"}},
            {{"id":"m3","body":"not lull's","timestamp_ms":1767225600002,"attempts":1,"lease_id":"lease-3"}}
        ],"message_backlog_count":7}}}}"#
    );
    let server = Server::start(vec![Reply::json(200, &answer)]).await;
    let messages = queue(&server).pull::<serde_json::Value>(5, Duration::from_secs(30)).await.unwrap();
    let pulled = queue(&server).pull_with_backlog::<serde_json::Value>(5, Duration::from_secs(30)).await.unwrap();
    assert_eq!((pulled.backlog, &pulled.messages), (Some(7), &messages));
    let seen = server.requests();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].body, seen[1].body);
    assert_eq!(seen[0].method, "POST");
    assert_eq!(seen[0].target, "/client/v4/accounts/acc/queues/q1/messages/pull", "the base's path kept");
    assert_eq!(seen[0].headers["authorization"], "Bearer cf-token");
    assert_eq!(seen[0].json(), serde_json::json!({"batch_size": 5, "visibility_timeout_ms": 30000}));
    assert_eq!(messages.len(), 3);
    let window = r#"{"topic":"orders","key":"c1","window":3,"count":1,"event":{"n":1}}"#;
    for (message, attempts, lull_attempt) in [(&messages[0], 1, 2), (&messages[1], 3, 4)] {
        let queued = message.content.as_ref().unwrap();
        assert_eq!(queued.topic, "orders");
        assert_eq!(queued.idempotency_key, "orders/c1/8kq2m7x0ba.3");
        assert_eq!(queued.attempt, 2);
        assert_eq!(queued.body["event"]["n"], 1);
        assert_eq!(queued.window_json, window, "the window as a webhook receives it");
        assert_eq!(message.attempts, attempts);
        assert_eq!(message.lull_attempt(), Some(lull_attempt), "attempt + attempts - 1");
    }
    assert_eq!(messages[0].lease_id, LeaseId("lease-1".into()));
    assert_eq!(messages[0].timestamp_ms, 1_767_225_600_000);
    let other = messages[2].content.as_ref().unwrap_err();
    assert_eq!(other.text, "not lull's");
    assert_eq!(messages[2].lull_attempt(), None);
}

#[tokio::test]
async fn settle_sends_acks_and_retries_and_reads_warnings_as_a_list_or_a_map() {
    let server = Server::start(vec![
        Reply::json(
            200,
            r#"{"success":true,"errors":[],"result":{"ackCount":1,"retryCount":2,"warnings":["lease-9 unknown"]}}"#,
        ),
        Reply::json(
            200,
            r#"{"success":true,"errors":[],"result":{"ackCount":1,"retryCount":0,"warnings":{"lease-1":"expired"}}}"#,
        ),
    ])
    .await;
    let queue = queue(&server);
    let retries = [
        Retry { lease_id: LeaseId("lease-2".into()), delay: Some(Duration::from_millis(1_500)) },
        Retry { lease_id: LeaseId("lease-3".into()), delay: None },
    ];
    let settled = queue.settle(&[LeaseId("lease-1".into())], &retries).await.unwrap();
    assert_eq!((settled.acked, settled.retried, settled.warnings), (1, 2, vec!["lease-9 unknown".to_string()]));
    let sent = &server.requests()[0];
    assert_eq!(sent.target, "/client/v4/accounts/acc/queues/q1/messages/ack");
    assert_eq!(
        sent.json(),
        serde_json::json!({"acks": [{"lease_id": "lease-1"}],
                           "retries": [{"lease_id": "lease-2", "delay_seconds": 2}, {"lease_id": "lease-3"}]})
    );
    let settled = queue.settle(&[LeaseId("lease-1".into())], &[]).await.unwrap();
    assert_eq!(settled.warnings, ["lease-1: expired"]);
    assert_eq!(queue.settle(&[], &[]).await.unwrap(), Default::default());
    assert_eq!(server.requests().len(), 2, "nothing to settle sends nothing");
}

#[tokio::test]
async fn refusals_are_typed_and_bad_arguments_send_nothing() {
    let server = Server::start(vec![
        Reply::json(
            401,
            r#"{"success":false,"errors":[{"code":10000,"message":"Authentication error"}],"result":null}"#,
        ),
        Reply::json(200, r#"{"success":false,"errors":[{"code":11000,"message":"queue not found"}],"result":null}"#),
    ])
    .await;
    let queue = queue(&server);
    let error = queue.pull::<serde_json::Value>(10, Duration::from_secs(1)).await.unwrap_err();
    let Error::Cloudflare(cf) = &error else { panic!("{error:?}") };
    assert_eq!((cf.what, cf.status, cf.errors[0].code), ("pull", 401, 10000));
    assert!(error.to_string().contains("Authentication error"), "{error}");
    let Error::Cloudflare(cf) = queue.settle(&[LeaseId("l".into())], &[]).await.unwrap_err() else { panic!() };
    assert_eq!((cf.what, cf.status, cf.errors[0].message.as_str()), ("ack", 200, "queue not found"));
    for max in [0, 101] {
        assert!(matches!(queue.pull::<serde_json::Value>(max, Duration::from_secs(1)).await, Err(Error::Input(_))));
    }
    assert!(matches!(queue.pull::<serde_json::Value>(1, Duration::ZERO).await, Err(Error::Input(_))));
    let long = Retry { lease_id: LeaseId("l".into()), delay: Some(Duration::from_secs(43_201)) };
    assert!(matches!(queue.settle(&[], &[long]).await, Err(Error::Input(_))));
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn a_pull_refused_for_load_is_retried_by_its_policy() {
    let ok = r#"{"success":true,"errors":[],"result":{"messages":[]}}"#;
    let server = Server::start(vec![
        Reply::json(429, r#"{"success":false,"errors":[{"code":10429,"message":"slow down"}]}"#)
            .header("retry-after", "1"),
        Reply::json(200, ok),
    ])
    .await;
    let config = PullConfig { base: server.url.clone(), ..PullConfig::new("acc", "q1", "cf-token") };
    let messages = PullQueue::new(config).unwrap().pull::<serde_json::Value>(1, Duration::from_secs(5)).await.unwrap();
    assert!(messages.is_empty());
    let seen = server.requests();
    assert_eq!(seen.len(), 2);
    assert!(seen[1].at - seen[0].at >= Duration::from_millis(950));
}

#[tokio::test]
async fn pull_new_sets_apart_what_the_run_handled_to_ack_and_hands_over_the_rest() {
    let message = |id: &str, key: &str| {
        let body = format!(r#"{{"topic":"orders","idempotency_key":"orders/{key}/x.1","attempt":1,"body":{{}}}}"#);
        format!(
            r#"{{"id":"{id}","body":{},"timestamp_ms":1,"attempts":1,"lease_id":"lease-{id}"}}"#,
            serde_json::to_string(&body).unwrap()
        )
    };
    let pulled = format!(
        r#"{{"success":true,"errors":[],"result":{{"messages":[{},{},{}]}}}}"#,
        message("m1", "c1"),
        message("m2", "c2"),
        message("m3", "c1")
    );
    let acked = r#"{"success":true,"errors":[],"result":{"ackCount":2,"retryCount":0,"warnings":[]}}"#;
    let server = Server::start(vec![Reply::json(200, &pulled), Reply::json(200, acked)]).await;
    let mut seen = Seen::default();
    seen.record("orders/c1/x.1"); // handled earlier in the run
    let queue = queue(&server);
    let fresh = queue.pull_new::<serde_json::Value>(10, Duration::from_secs(30), &seen).await.unwrap();
    let ids = |ms: &[lull_client::Message]| ms.iter().map(|m| m.id.clone()).collect::<Vec<_>>();
    assert_eq!(ids(&fresh.messages), ["m2"]);
    assert_eq!(ids(&fresh.duplicates), ["m1", "m3"], "both copies of the handled window");
    assert_eq!(server.requests().len(), 1, "nothing acked until asked");
    queue.settle(&fresh.duplicate_leases(), &[]).await.unwrap();
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "one pull, one ack");
    assert_eq!(requests[1].target, "/client/v4/accounts/acc/queues/q1/messages/ack");
    assert_eq!(
        requests[1].json(),
        serde_json::json!({"acks": [{"lease_id": "lease-m1"}, {"lease_id": "lease-m3"}], "retries": []})
    );
}
