//! Fault tests of the queue side: the consumer's per-message logic and the
//! topic gate object driven together on virtual time over a model of
//! Cloudflare Queues, with storage, the queues and the call to the gate object
//! failing — or the gate object losing its memory and the calls it holds — at
//! every call. The harness (the fakes, the model and the drivers) is in
//! `support/queue.rs`.
//!
//! Random messages (good ones, poison ones the receiver always refuses,
//! garbage) go round after round until every queue is empty, the operator
//! discarding dead letters when the topic's store is full. Judged from the
//! system, not from counters the code keeps: the receiver's log (forwards in
//! flight at each start, the attempt each carried), what the fake queues and
//! the gate's rows hold. Every delivery settles once; one is acked only when
//! the receiver answered it 2xx, its copy is on a queue again, or the gate's
//! rows keep it; the topic's bound holds at the receiver; a forward's attempt
//! grows on every delivery and a wait never inflates it; no lull message is
//! ever deleted by the queue; every message ends delivered, kept or discarded.
#![cfg(not(target_arch = "wasm32"))]
#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

#[path = "support/queue.rs"]
mod support;

use std::collections::BTreeSet;
use std::rc::Rc;
use std::task::Poll;

use lull_edge::limits::{GATE_WAIT_BUDGET_MS, MAX_HOLD_MS, MAX_WAIT_SECS};
use lull_edge::target::TargetView;
use lull_edge::{Counter, GateAnswer, GateOp, Grant, Settle, StatusLetter, Topics};
use proptest::prelude::*;

use support::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]

    /// Gate, storage and queue failures, gate restarts, a full dead-letter
    /// store: nothing acked unearned, nothing deleted, the bound kept, attempts counted.
    #[test]
    fn faults_on_the_queue_side_lose_nothing_and_keep_the_bound(case in case()) {
        check(&case);
    }
}

#[test]
fn forty_waiters_are_woken_in_order_with_two_gate_requests_per_forward() {
    // Catches: polling instead of holding the call open (more acquires than
    // messages), a release that does not hand its lease on (requeues), or a
    // queue served out of order.
    let world: Shared = Rc::default();
    world.now.set(0);
    let parts = Parts::new(&world);
    let messages: Vec<String> = (0..40).map(|i| text(Kind::Good, i)).collect();
    let settled = all_at_once(&parts, &messages, false);
    assert!(settled.iter().all(|s| *s == Settle::Ack));
    assert!(world.sent.borrow().is_empty(), "no message went back on the queue");
    let calls = world.gate_calls.borrow().clone();
    assert_eq!((calls.get("acquire"), calls.get("release")), (Some(&40), Some(&40)), "{calls:?}");
    let total: u64 = calls.values().sum();
    assert!(total <= 2 * 40, "{total} gate requests for 40 forwards");
    let order: Vec<String> = world.started.borrow().iter().map(|(k, _, _)| k.clone()).collect();
    let expected: Vec<String> = messages.iter().map(|m| key_of(m).unwrap()).collect();
    assert_eq!(order, expected, "first come, first served");
    assert!(world.started.borrow().iter().all(|(_, _, n)| *n <= LIMIT as usize));
    // The gate's own count agrees (the status shows it).
    let Ok(GateAnswer::Status(status)) = parts.admin(GateOp::Status) else { panic!() };
    assert_eq!(status.requests.get("acquire"), Some(&40));
    assert_eq!(status.requests_total, total);
}

#[test]
fn a_waiter_past_its_budget_is_requeued_with_its_attempt_not_retried() {
    // Catches: a wait that spends a queue retry, or a copy that restarts or inflates the attempt count.
    let world: Shared = Rc::default();
    world.now.set(0);
    let parts = Parts::new(&world);
    let consumer = parts.consumer();
    let texts: Vec<String> = (0..3).map(|i| text(Kind::Good, i)).collect();
    let mut first = Box::pin(consumer.handle("a", &texts[0], 1, false));
    let mut second = Box::pin(consumer.handle("b", &texts[1], 1, false));
    assert!(poll(first.as_mut()).is_pending() && poll(second.as_mut()).is_pending());
    // Its third delivery (attempt 3): no room within the budget.
    let mut third = Box::pin(consumer.handle("c", &texts[2], 3, false));
    assert!(poll(third.as_mut()).is_pending(), "held open by the gate");
    world.now.set(GATE_WAIT_BUDGET_MS);
    assert!(
        poll(third.as_mut()).is_pending(),
        "past its budget, its turn looks near (the forwards are 2 s old): it stays"
    );
    world.now.set(MAX_HOLD_MS);
    assert_eq!(poll(third.as_mut()), Poll::Ready(Settle::Ack), "at the longest hold: requeued, then acked");
    let sent = world.sent.borrow().clone();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].2, 1, "its turn is due by the gate's estimate: back in a second, not on a backoff");
    let copy: serde_json::Value = serde_json::from_str(&sent[0].1).unwrap();
    assert_eq!((copy["attempt"].as_u64(), copy["waits"].as_u64()), (Some(3), Some(1)), "the attempt it had reached");
    assert_eq!(sent[0].0, DELIVERY);
    let counters = world.gate.borrow().clone().unwrap().counters;
    assert_eq!((counters.get("requeued"), counters.get("retried")), (Some(&1), None), "waiting used up no retry");
    assert_eq!(world.gate_calls.borrow().get("acquire"), Some(&3), "one request held open, no polling");
}

#[test]
fn a_gate_that_errs_costs_no_retry() {
    // Catches: the old `retry()` branch on any gate error.
    for fault in [Fault::Fail, Fault::LoseAnswer, Fault::Crash] {
        let world: Shared = Rc::default();
        let parts = Parts::new(&world);
        // (A lost answer to a granted acquire: the lease expires unreleased; the message waits.)
        world.gate_faults.borrow_mut().push(Some(fault));
        let settle = all_at_once(&parts, &[text(Kind::Good, 1)], false);
        match fault {
            Fault::Crash => assert_eq!(settle, [Settle::Ack], "a fresh object serves it"),
            _ => {
                assert_eq!(settle, [Settle::Ack], "{fault:?}: requeued and acked");
                assert_eq!(world.sent.borrow().len(), 1, "{fault:?}: a copy waits on the queue");
                assert_eq!(world.sent.borrow()[0].2, 1, "{fault:?}: after 1 s");
            }
        }
    }
    // And when the copy cannot be sent either: retried, as the last resort.
    let world: Shared = Rc::default();
    let parts = Parts::new(&world);
    world.gate_faults.borrow_mut().push(Some(Fault::Fail));
    world.queue_faults.borrow_mut().push(true);
    assert_eq!(all_at_once(&parts, &[text(Kind::Good, 1)], false), [Settle::Retry { delay_secs: Some(1) }]);
}

/// Client tokens' events are refused from half the dead-letter bound, so the
/// windows of one page that keep failing cannot fill the bound at which every
/// backend producer of the topic is refused.
#[test]
fn client_tokens_are_refused_from_half_the_dead_letter_bound() {
    let world: Shared = Rc::default();
    let parts = Parts::new(&world);
    let room = |full, clients_full| Ok(GateAnswer::Room { full, clients_full });
    assert_eq!(parts.admin(GateOp::Room), room(false, false));
    let letters: Vec<String> = (0..BOUND).map(|i| text(Kind::Poison, i)).collect();
    for (kept, letter) in letters.iter().enumerate() {
        assert_eq!(all_at_once(&parts, std::slice::from_ref(letter), true), [Settle::Ack]);
        let answer = parts.admin(GateOp::Room);
        match kept + 1 {
            1 => assert_eq!(answer, room(false, false), "1 of {BOUND}"),
            2 => assert_eq!(answer, room(false, true), "2 of {BOUND}: past half, pages wait"),
            _ => assert_eq!(answer, room(true, true), "{BOUND} of {BOUND}"),
        }
    }
}

#[test]
fn at_the_bound_a_dead_letter_waits_on_its_queue_and_is_kept_once_there_is_room() {
    // Catches: a dead letter written past the bound, a refused one acked
    // without a copy (or retried until the queue deletes it), and rows never freed.
    let world: Shared = Rc::default();
    world.now.set(5_000);
    let parts = Parts::new(&world);
    let letters: Vec<String> = (0..BOUND + 1).map(|i| text(Kind::Poison, i)).collect();
    let settled = all_at_once(&parts, &letters[..BOUND], true);
    assert!(settled.iter().all(|s| *s == Settle::Ack));
    assert_eq!(world.rows.borrow().len(), BOUND);
    let full = GateAnswer::Room { full: true, clients_full: true };
    assert_eq!(parts.admin(GateOp::Room), Ok(full), "full: the router refuses events");
    let over = &letters[BOUND];
    assert_eq!(all_at_once(&parts, std::slice::from_ref(over), true), [Settle::Ack], "acked: a copy waits");
    assert_eq!(world.rows.borrow().len(), BOUND, "nothing written past the bound");
    let (binding, copy, delay) = world.sent.borrow()[0].clone();
    assert_eq!((binding.as_str(), delay), (DEAD, 1), "on the dead-letter queue, 1 s");
    // Still full at its next delivery: it waits longer.
    assert_eq!(all_at_once(&parts, std::slice::from_ref(&copy), true), [Settle::Ack]);
    let (_, copy, delay) = world.sent.borrow()[1].clone();
    assert_eq!(delay, 2, "doubling");
    let Ok(GateAnswer::Status(status)) = parts.admin(GateOp::Status) else { panic!() };
    assert_eq!((status.counters.get("requeued"), status.dead_letters_full), (Some(&2), true));
    // Discard one: the waiting letter is kept at its next delivery.
    assert_eq!(parts.admin(GateOp::Discard { id: 1 }), Ok(GateAnswer::Discarded { discarded: 1 }));
    assert!(parts.admin(GateOp::Discard { id: 1 }).is_err_and(|e| e.code() == "not_found"), "404 for an unknown id");
    let half = GateAnswer::Room { full: false, clients_full: true };
    assert_eq!(parts.admin(GateOp::Room), Ok(half), "2 of 3: room for backends' events, not for pages'");
    assert_eq!(all_at_once(&parts, std::slice::from_ref(&copy), true), [Settle::Ack]);
    let kept = world.rows.borrow().values().map(|r| r.idempotency_key.clone()).collect::<Vec<_>>();
    assert!(kept.contains(&key_of(over).unwrap()));
    assert_eq!(world.rows.borrow().values().last().unwrap().message, copy, "the text as it came, byte for byte");
}

#[test]
fn a_dead_letter_says_when_it_first_failed_its_attempts_and_last_outcome() {
    // Catches: a row without the failing forward's history.
    let world: Shared = Rc::default();
    world.now.set(10_000);
    let parts = Parts::new(&world);
    world.poison.borrow_mut().insert("q/k0/x.1".into());
    let message = text(Kind::Poison, 0);
    let retry = Settle::Retry { delay_secs: None };
    // The fourth failure (forward_max_attempts) sends it to the dead-letter queue.
    assert_eq!(failing_deliveries(&parts, &message, 4, 1_000), [retry, retry, retry, Settle::Ack]);
    let (binding, letter, _) = world.sent.borrow()[0].clone();
    assert_eq!(binding, DEAD);
    assert_eq!(all_at_once(&parts, std::slice::from_ref(&letter), true), [Settle::Ack]);
    let row = world.rows.borrow().values().next().unwrap().clone();
    assert_eq!((row.attempts, row.first_failed_at, row.outcome.as_str()), (4, 10_000, "500"));
    assert!(world.failing.borrow().is_empty(), "the failing record moved into the row");
}

#[test]
fn a_dead_letter_copy_is_kept_by_what_it_carries_whatever_queue_it_comes_from() {
    // Catches: a dead letter recognised only by its queue's name — with
    // LULL_DEAD_LETTER_QUEUE renamed or unset (the shell then says "not the
    // dead-letter queue"), the copy is forwarded to the target again, fails
    // again, goes to the dead-letter queue again: a loop.
    let world: Shared = Rc::default();
    world.now.set(10_000);
    let parts = Parts::new(&world);
    world.poison.borrow_mut().insert("q/k0/x.1".into());
    let message = text(Kind::Poison, 0);
    failing_deliveries(&parts, &message, 4, 0);
    let (binding, letter, _) = world.sent.borrow()[0].clone();
    assert_eq!(binding, DEAD, "the fourth failed forward: a dead letter");
    let forwards = world.started.borrow().len();
    // The copy arrives where the shell cannot tell it is the dead-letter queue.
    assert_eq!(all_at_once(&parts, std::slice::from_ref(&letter), false), [Settle::Ack]);
    assert_eq!(world.started.borrow().len(), forwards, "a dead letter is never forwarded again");
    assert_eq!(world.sent.borrow().len(), 1, "nor sent to the dead-letter queue again");
    let rows: Vec<String> = world.rows.borrow().values().map(|r| r.message.clone()).collect();
    assert_eq!(rows, [letter], "kept, as it came");

    // What the queue itself moves past max_retries carries the original body:
    // where the shell cannot tell, it is forwarded again, at most until its
    // failures reach forward_max_attempts (the queue restarts its count at 1),
    // then the consumer's own copy is kept: bounded, no loop.
    world.poison.borrow_mut().insert("q/k1/x.1".into());
    let moved = text(Kind::Poison, 1);
    let before = world.started.borrow().len();
    failing_deliveries(&parts, &moved, 4, 0);
    assert_eq!(world.started.borrow().len(), before + 4);
    let (binding, second, _) = world.sent.borrow()[1].clone();
    assert_eq!(binding, DEAD);
    assert_eq!(all_at_once(&parts, std::slice::from_ref(&second), false), [Settle::Ack]);
    assert_eq!(world.started.borrow().len(), before + 4, "its copy is kept, not forwarded");
    assert_eq!(world.rows.borrow().len(), 2);
}

#[test]
fn a_replay_goes_back_to_the_topics_queue_and_the_row_goes_only_once_sent() {
    // Catches: a row deleted before its replay is safely on the queue, or a replay under another key.
    let world: Shared = Rc::default();
    let parts = Parts::new(&world);
    let letters: Vec<String> = (0..3).map(|i| text(Kind::Poison, i)).collect();
    all_at_once(&parts, &letters, true);
    world.queue_faults.borrow_mut().push(true);
    let refused = parts.admin(GateOp::Replay { id: 2 });
    assert!(refused.is_err_and(|e| e.code() == "unavailable"));
    assert_eq!(world.rows.borrow().len(), 3, "kept: the send failed");
    assert_eq!(parts.admin(GateOp::Replay { id: 2 }), Ok(GateAnswer::Replayed { replayed: 1, remaining: 2 }));
    assert!(parts.admin(GateOp::Replay { id: 2 }).is_err_and(|e| e.code() == "not_found"));
    let (binding, replayed, delay) = world.sent.borrow()[0].clone();
    assert_eq!((binding.as_str(), delay), (DELIVERY, 0));
    let replayed: serde_json::Value = serde_json::from_str(&replayed).unwrap();
    let original: serde_json::Value = serde_json::from_str(&letters[1]).unwrap();
    assert_eq!(replayed["idempotency_key"], original["idempotency_key"]);
    assert_eq!(replayed["body"], original["body"]);
    assert_eq!(replayed["attempt"], 2, "the next attempt after those made");
    assert_eq!(parts.admin(GateOp::ReplayAll), Ok(GateAnswer::Replayed { replayed: 2, remaining: 0 }));
    let keys: Vec<String> = world.sent.borrow().iter().map(|(_, t, _)| key_of(t).unwrap()).collect();
    assert_eq!(keys, ["q/k1/x.1", "q/k0/x.1", "q/k2/x.1"], "each once, the rest in order");
}

#[test]
fn a_page_lists_bodies_intact_in_order_with_what_comes_next() {
    // Catches: bodies rewritten (numbers parsed: a large integer rounded, a
    // long decimal cut, 1e400 turned to null; escapes), pages past their limit, a missing next_after.
    let world: Shared = Rc::default();
    let parts = Parts::new(&world);
    let body = r#"{"n":123456789012345678901234,"d":0.10000000000000000000000000000000000001,"e":1e400,"s":"é\u0000"}"#;
    let big = format!(r#"{{"topic":"q","idempotency_key":"q/big/x.1","attempt":1,"body":{body}}}"#);
    all_at_once(&parts, &[big, text(Kind::Poison, 1), text(Kind::Poison, 2)], true);
    let Ok(GateAnswer::Page(text)) = parts.admin(GateOp::DeadLetters { after: None, limit: 2 }) else { panic!() };
    assert!(text.contains(&format!(r#""body":{body}"#)), "the body byte for byte: {text}");
    /// A page read without parsing its bodies (a Value refuses 1e400).
    #[derive(serde::Deserialize)]
    struct Page<'a> {
        #[serde(borrow)]
        dead_letters: Vec<&'a serde_json::value::RawValue>,
        count: u64,
        next_after: Option<u64>,
    }
    let page: Page = serde_json::from_str(&text).unwrap();
    assert_eq!((page.count, page.next_after, page.dead_letters.len()), (3, Some(2), 2));
    let Ok(GateAnswer::Page(rest)) = parts.admin(GateOp::DeadLetters { after: Some(2), limit: 2 }) else { panic!() };
    let rest: serde_json::Value = serde_json::from_str(&rest).unwrap();
    assert_eq!((rest["dead_letters"].as_array().unwrap().len(), rest["next_after"].is_null()), (1, true));
}

#[test]
fn the_first_releases_list_migrates_into_rows_once_even_when_interrupted() {
    // Catches: a migration that loses the list, or keeps a letter twice after a failure between its two steps.
    let world: Shared = Rc::default();
    let old: Vec<String> = (0..4).map(|i| text(Kind::Poison, i)).collect();
    *world.legacy.borrow_mut() = Some(old.clone());
    let parts = Parts::new(&world);
    // prepare, legacy read, keep_dead succeed; forgetting the list fails.
    *world.store_faults.borrow_mut() = vec![true, false, false, false];
    assert!(parts.admin(GateOp::Room).is_err_and(|e| e.code() == "unavailable"));
    assert_eq!(world.rows.borrow().len(), 4);
    assert!(world.legacy.borrow().is_some());
    let full = GateAnswer::Room { full: true, clients_full: true };
    assert_eq!(parts.admin(GateOp::Room), Ok(full), "4 rows past a bound of 3: full");
    assert_eq!(world.rows.borrow().len(), 4, "not kept twice");
    assert!(world.legacy.borrow().is_none(), "the list went");
    let texts: Vec<String> = world.rows.borrow().values().map(|r| r.message.clone()).collect();
    assert_eq!(texts, old, "byte for byte, in order");
}

#[test]
fn a_lost_write_of_the_gate_answers_503_and_grants_nothing_storage_does_not_hold() {
    let world: Shared = Rc::default();
    let parts = Parts::new(&world);
    // load succeeds, the save fails.
    *world.store_faults.borrow_mut() = vec![true, false];
    let refused = parts.admin(GateOp::Acquire { wait_ms: 0 });
    let Err(e) = refused else { panic!("{refused:?}") };
    assert_eq!((e.code(), e.retry_after_secs()), ("unavailable", Some(1)));
    assert!(world.gate.borrow().is_none(), "nothing stored");
    for _ in 0..LIMIT {
        let granted = parts.admin(GateOp::Acquire { wait_ms: 0 });
        assert!(
            matches!(granted, Ok(GateAnswer::Grant(Grant::Go { .. }))),
            "memory was dropped: the room is all there"
        );
    }
    assert_eq!(world.gate.borrow().as_ref().unwrap().gate.in_flight(0), LIMIT as usize, "both leases stored");
    let full = parts.admin(GateOp::Acquire { wait_ms: 0 });
    assert_eq!(full, Ok(GateAnswer::Grant(Grant::Wait { retry_at: 1_000 })), "no wait asked: told to come back soon");
    assert_eq!(parts.admin(GateOp::Count { counter: Counter::Acked }), Ok(GateAnswer::Counted { ok: true }));
}

#[test]
fn the_status_shows_in_flight_bound_counters_requests_and_the_oldest_dead_letters() {
    let world: Shared = Rc::default();
    let parts = Parts::new(&world);
    all_at_once(&parts, &(0..2).map(|i| text(Kind::Poison, i)).collect::<Vec<_>>(), true);
    let Ok(GateAnswer::Grant(Grant::Go { lease, .. })) = parts.admin(GateOp::Acquire { wait_ms: 0 }) else { panic!() };
    parts.admin(GateOp::Acquire { wait_ms: 0 }).unwrap();
    assert_eq!(
        parts.admin(GateOp::Release { lease, outcome: None }),
        Ok(GateAnswer::Released { released: true, target: Some(TargetView::default()) })
    );
    assert_eq!(
        parts.admin(GateOp::Release { lease, outcome: None }),
        Ok(GateAnswer::Released { released: false, target: Some(TargetView::default()) }),
        "once"
    );
    let Ok(GateAnswer::Status(status)) = parts.admin(GateOp::Status) else { panic!() };
    assert_eq!(status.topic, "q");
    assert_eq!(status.in_flight, 1);
    assert_eq!(status.forward_concurrency, LIMIT);
    assert_eq!(status.dead_letter_count, 2);
    assert_eq!(status.max_queue_dead_letters, BOUND as u64);
    assert_eq!(status.requests.get("dead_letter"), Some(&2));
    assert_eq!(status.requests.get("acquire"), Some(&2));
    let oldest = StatusLetter { id: 1, idempotency_key: "q/k0/x.1".into(), attempts: 1 };
    assert_eq!(status.dead_letters.first(), Some(&oldest));
    let hook = Topics::parse(r#"{"h": {"target": "https://a", "wait_ms": 1}}"#).unwrap();
    let object = object(&world);
    let not_queue = poll(Box::pin(object.call("h", hook.get("h"), GateOp::Status)).as_mut());
    assert!(matches!(not_queue, Poll::Ready(Err(e)) if e.code() == "not_found"));
    let unknown = poll(Box::pin(object.call("x", None, GateOp::Acquire { wait_ms: 0 })).as_mut());
    assert!(matches!(unknown, Poll::Ready(Err(e)) if e.code() == "unknown_topic"));
}

#[test]
fn a_release_retried_after_its_answer_was_lost_counts_once() {
    // Catches: a retried release counting its outcome (acked or retried) and recording it again.
    let world: Shared = Rc::default();
    let parts = Parts::new(&world);
    // The acquire goes through; the release runs but its answer is lost; the retry finds the lease gone.
    *world.gate_faults.borrow_mut() = vec![Some(Fault::LoseAnswer), None];
    let consumer = parts.consumer();
    let message = text(Kind::Poison, 0);
    let mut handle = Box::pin(consumer.handle("m", &message, 1, false));
    assert!(poll(handle.as_mut()).is_pending());
    world.answers.borrow_mut()[0] = Some(false);
    assert_eq!(poll(handle.as_mut()), Poll::Ready(Settle::Retry { delay_secs: None }));
    assert_eq!(world.gate_calls.borrow().get("release"), Some(&2), "released, then asked again");
    let counters = world.gate.borrow().clone().unwrap().counters;
    assert_eq!(counters.get("retried"), Some(&1), "{counters:?}");
}

#[test]
fn a_dead_letter_being_replayed_can_be_neither_discarded_nor_replayed_again() {
    // Catches: a discard answered 200 while the message is still sent, or a
    // second replay of the same row answered 200 {"replayed": 0}.
    let world: Shared = Rc::default();
    let parts = Parts::new(&world);
    all_at_once(&parts, &[text(Kind::Poison, 0)], true);
    world.hold_sends.set(true);
    let object = parts.gates.object.borrow().clone();
    let mut replay = Box::pin(object.call("q", parts.topics.get("q"), GateOp::Replay { id: 1 }));
    assert!(poll(replay.as_mut()).is_pending(), "its send is under way");
    for op in [GateOp::Discard { id: 1 }, GateOp::Replay { id: 1 }] {
        let refused = parts.admin(op.clone());
        assert!(
            refused.as_ref().is_err_and(|e| (e.status(), e.code()) == (409, "replay_in_progress")),
            "{op:?}: {refused:?}"
        );
    }
    world.hold_sends.set(false);
    assert_eq!(poll(replay.as_mut()), Poll::Ready(Ok(GateAnswer::Replayed { replayed: 1, remaining: 0 })));
    assert_eq!(world.sent.borrow().len(), 1, "sent once");
    assert!(world.rows.borrow().is_empty());
    assert!(parts.admin(GateOp::Discard { id: 1 }).is_err_and(|e| e.code() == "not_found"), "then gone");
}

#[test]
fn a_dead_letter_delivered_again_after_its_row_was_written_is_kept_once_even_at_the_bound() {
    // Catches: a second row for one idempotency key (the store without its
    // unique index), or a redelivered letter refused 429 at the bound and
    // left waiting on the dead-letter queue although it is kept.
    let world: Shared = Rc::default();
    let parts = Parts::new(&world);
    let letters: Vec<String> = (0..BOUND).map(|i| text(Kind::Poison, i)).collect();
    all_at_once(&parts, &letters[..BOUND - 1], true);
    // The last one's row is written, its answer lost: it waits on the dead-letter queue.
    world.gate_faults.borrow_mut().push(Some(Fault::LoseAnswer));
    assert_eq!(all_at_once(&parts, &letters[BOUND - 1..], true), [Settle::Ack]);
    assert_eq!(world.rows.borrow().len(), BOUND, "written, and now at the bound");
    let (binding, copy, _) = world.sent.borrow()[0].clone();
    assert_eq!(binding, DEAD);
    // Delivered again: answered with its row, not a second one, and not refused as full.
    assert_eq!(all_at_once(&parts, std::slice::from_ref(&copy), true), [Settle::Ack]);
    assert_eq!(world.sent.borrow().len(), 1, "not sent to wait again");
    assert_eq!(world.rows.borrow().len(), BOUND);
    let keys: BTreeSet<String> = world.rows.borrow().values().map(|r| r.idempotency_key.clone()).collect();
    assert_eq!(keys.len(), BOUND, "one row per key");
}

/// Both leases held (the topic's bound), a first waiter `w` and a second `x`
/// queued, and a release of the first lease taken out `w` and storing its
/// lease (the store held): `(w, x, release, the other lease)`.
fn release_storing_a_waiters_lease(parts: &Parts) -> (Call, Call, Call, u64) {
    let world = &parts.gates.world;
    let lease = |answer| match answer {
        Ok(GateAnswer::Grant(Grant::Go { lease, .. })) => lease,
        other => panic!("{other:?}"),
    };
    let (a, b) =
        (lease(parts.admin(GateOp::Acquire { wait_ms: 0 })), lease(parts.admin(GateOp::Acquire { wait_ms: 0 })));
    let mut w = call(parts, GateOp::Acquire { wait_ms: GATE_WAIT_BUDGET_MS });
    let mut x = call(parts, GateOp::Acquire { wait_ms: 10 * GATE_WAIT_BUDGET_MS });
    assert!(poll(w.as_mut()).is_pending() && poll(x.as_mut()).is_pending(), "both wait");
    world.hold_saves.set(true);
    let mut release = call(parts, GateOp::Release { lease: a, outcome: None });
    assert!(poll(release.as_mut()).is_pending(), "storing w's lease");
    (w, x, release, b)
}

fn stored_in_flight(world: &World) -> usize {
    world.gate.borrow().as_ref().unwrap().gate.in_flight(world.now.get())
}

#[test]
fn a_waiter_whose_time_runs_out_while_its_lease_is_stored_still_gets_it() {
    // Catches: a waiter that gives up (or rejoins with a new slot) when its
    // timer fires after a release took it out of the queue but before the
    // release's save ended: the lease then went to a slot nobody reads, held
    // until it expired (delivery_timeout_ms + 5 s of a stalled topic).
    let world: Shared = Rc::default();
    world.now.set(1_000);
    let parts = Parts::new(&world);
    let (mut w, mut x, mut release, b) = release_storing_a_waiters_lease(&parts);
    world.now.set(1_000 + GATE_WAIT_BUDGET_MS);
    assert!(poll(w.as_mut()).is_pending(), "its time is out, but a lease is being stored for it");
    world.hold_saves.set(false);
    assert_eq!(
        poll(release.as_mut()),
        Poll::Ready(Ok(GateAnswer::Released { released: true, target: Some(TargetView::default()) }))
    );
    let Poll::Ready(Ok(GateAnswer::Grant(Grant::Go { lease, .. }))) = poll(w.as_mut()) else {
        panic!("w got no lease")
    };
    assert_eq!(stored_in_flight(&world), 2, "b and w's lease, nothing else");
    // Its release hands the room on to x at once.
    assert_eq!(
        parts.admin(GateOp::Release { lease, outcome: None }),
        Ok(GateAnswer::Released { released: true, target: Some(TargetView::default()) })
    );
    assert!(matches!(poll(x.as_mut()), Poll::Ready(Ok(GateAnswer::Grant(Grant::Go { .. })))));
    assert_eq!(
        parts.admin(GateOp::Release { lease: b, outcome: None }),
        Ok(GateAnswer::Released { released: true, target: Some(TargetView::default()) })
    );
}

#[test]
fn a_lease_stored_for_a_waiter_that_left_goes_to_the_next_one() {
    // Catches: a lease handed to a slot nobody holds any more (its request
    // dropped while the release stored the lease), and a lease handed but
    // never taken released only in memory, the room not handed on.
    for taken in [false, true] {
        let world: Shared = Rc::default();
        world.now.set(1_000);
        let parts = Parts::new(&world);
        let (w, mut x, mut release, _) = release_storing_a_waiters_lease(&parts);
        if !taken {
            drop(w); // gone while its lease is stored
            world.hold_saves.set(false);
            assert_eq!(
                poll(release.as_mut()),
                Poll::Ready(Ok(GateAnswer::Released { released: true, target: Some(TargetView::default()) }))
            );
        } else {
            world.hold_saves.set(false);
            assert_eq!(
                poll(release.as_mut()),
                Poll::Ready(Ok(GateAnswer::Released { released: true, target: Some(TargetView::default()) }))
            );
            assert!(poll(x.as_mut()).is_pending(), "x looked again: no room");
            drop(w); // gone with its lease handed, not taken
        }
        let answer = poll(x.as_mut());
        assert!(matches!(answer, Poll::Ready(Ok(GateAnswer::Grant(Grant::Go { .. })))), "taken {taken}: {answer:?}");
        assert_eq!(stored_in_flight(&world), 2, "taken {taken}: the lease changed hands, none orphaned");
    }
}

#[test]
fn failed_forwards_interleaved_with_waits_still_reach_the_dead_letter_queue() {
    // Catches: a copy sent back to wait that restarts the count of failed
    // forwards (the queue's attempts restart with each copy): failing, then
    // waiting, then failing… it never reached max_retries and went round forever.
    let world: Shared = Rc::default();
    world.now.set(1_000);
    let parts = Parts::new(&world);
    let (mut text, mut attempts) = (text(Kind::Poison, 0), 1);
    for turn in 0..40 {
        if turn % 2 == 1 {
            // The topic is busy for this delivery: it waits, as a new copy.
            let hold = |_| match parts.admin(GateOp::Acquire { wait_ms: 0 }) {
                Ok(GateAnswer::Grant(Grant::Go { lease, .. })) => lease,
                other => panic!("{other:?}"),
            };
            let leases: Vec<u64> = (0..LIMIT).map(hold).collect();
            assert_eq!(deliver(&parts, &text, attempts, false), Settle::Ack, "requeued");
            for lease in leases {
                parts.admin(GateOp::Release { lease, outcome: None }).unwrap();
            }
            let (binding, copy, _) = world.sent.borrow().last().cloned().unwrap();
            assert_eq!(binding, DELIVERY);
            (text, attempts) = (copy, 1);
            continue;
        }
        match deliver(&parts, &text, attempts, false) {
            Settle::Retry { delay_secs: None } => {
                attempts += 1;
                assert!(attempts <= MAX_RETRIES + 1, "the queue would move it itself");
            }
            Settle::Ack => break,
            other => panic!("{other:?}"),
        }
    }
    let (binding, letter, delay) = world.sent.borrow().last().cloned().unwrap();
    assert_eq!((binding.as_str(), delay), (DEAD, 0), "sent to the dead-letter queue by the consumer");
    let letter: serde_json::Value = serde_json::from_str(&letter).unwrap();
    assert_eq!(
        (letter["failed"].as_u64(), letter["attempt"].as_u64(), letter["outcome"].as_str()),
        (Some(4), Some(4), Some("500"))
    );
    let attempts: Vec<u32> = world.started.borrow().iter().map(|(_, a, _)| *a).collect();
    assert_eq!(attempts, [1, 2, 3, 4], "forward_max_attempts (4) forwards, no more");
    // Kept from there with its last forward's attempt and outcome.
    let sent = world.sent.borrow().last().cloned().unwrap().1;
    assert_eq!(all_at_once(&parts, &[sent], true), [Settle::Ack]);
    let row = world.rows.borrow().values().next().cloned().unwrap();
    assert_eq!((row.attempts, row.outcome.as_str()), (4, "500"));
}

#[test]
fn a_gate_that_never_answers_dead_letters_a_message_after_a_day_of_waits() {
    // Catches: a permanently failing gate requeueing a message forever.
    let world: Shared = Rc::default();
    world.now.set(1_000);
    let parts = Parts::new(&world);
    // Every call to the gate fails (an acquire and a count per delivery).
    *world.gate_faults.borrow_mut() = vec![Some(Fault::Fail); 4_000];
    let mut text = text(Kind::Good, 0);
    let mut waited = 0u64;
    let mut waits = 0u32;
    loop {
        assert_eq!(deliver(&parts, &text, 1, true), Settle::Ack);
        let (binding, copy, delay) = world.sent.borrow().last().cloned().unwrap();
        if binding == DELIVERY {
            waited += u64::from(delay);
            waits += 1;
            assert!(waits < 2_000, "bounded");
            text = copy;
            continue;
        }
        assert_eq!(binding, DEAD, "past a day of waits: a dead letter");
        let letter: serde_json::Value = serde_json::from_str(&copy).unwrap();
        let why = letter["outcome"].as_str().unwrap();
        assert!(why.starts_with(&format!("waited {waits} times ({waited} s)")) && why.contains("injected"), "{why}");
        assert_eq!((letter["waits"].as_u64(), letter["attempt"].as_u64()), (None, Some(0)), "no forward made");
        break;
    }
    assert!(
        (MAX_WAIT_SECS..MAX_WAIT_SECS + 60).contains(&waited),
        "{waited} s in {waits} waits (1 s doubling to 60 s)"
    );
    assert!(world.started.borrow().is_empty());
}

/// The topic's target, as its object keeps it (the same object for a queue
/// topic's consumer and a webhook topic's keys).
mod target {
    use super::*;
    use lull_edge::GateAnswer::{Grant as Granted, Released, Targeted, Topic};
    use lull_edge::target::{DISABLED_RECHECK_MS, PROBE_RECHECK_MS, TargetState};
    use lull_edge::{Forwarded, Grant::Go, Grant::Wait};

    fn answer(status: u16, retry_after_ms: Option<u64>) -> Forwarded {
        Forwarded {
            idempotency_key: "q/k/x.1".into(),
            attempt: 1,
            ok: (200..300).contains(&status),
            detail: status.to_string(),
            status: Some(status),
            retry_after_ms,
        }
    }

    fn lease(parts: &Parts) -> u64 {
        match parts.admin(GateOp::Acquire { wait_ms: 0 }) {
            Ok(Granted(Go { lease, .. })) => lease,
            other => panic!("no lease: {other:?}"),
        }
    }

    fn logged(world: &World, event: &str) -> usize {
        world.logs.borrow().iter().filter(|l| l.contains(&format!(r#""lull":"{event}""#))).count()
    }

    #[test]
    fn a_throttle_pauses_every_lease_then_one_probe_goes_and_its_delivery_resumes_the_topic() {
        let world: Shared = Rc::default();
        world.now.set(10_000);
        let parts = Parts::new(&world);
        let first = lease(&parts);
        let Ok(Released { released: true, target: Some(view) }) =
            parts.admin(GateOp::Release { lease: first, outcome: Some(answer(429, Some(5_000))) })
        else {
            panic!("released")
        };
        assert_eq!(view.state, TargetState::Paused { until: 15_000 });
        // Room for two, yet none goes while paused: each is told the pause's end.
        assert_eq!(parts.admin(GateOp::Acquire { wait_ms: 0 }), Ok(Granted(Wait { retry_at: 15_000 })));
        world.now.set(15_000);
        let probe = lease(&parts);
        assert_eq!(
            parts.admin(GateOp::Acquire { wait_ms: 0 }),
            Ok(Granted(Wait { retry_at: 15_000 + PROBE_RECHECK_MS })),
            "the others wait for the probe's answer"
        );
        let Ok(Released { target: Some(view), .. }) =
            parts.admin(GateOp::Release { lease: probe, outcome: Some(answer(200, None)) })
        else {
            panic!("released")
        };
        assert_eq!(view.state, TargetState::Active);
        lease(&parts);
        lease(&parts);
        assert_eq!((logged(&world, "target_paused"), logged(&world, "target_resumed")), (1, 1), "one line each");
        assert_eq!(logged(&world, "target_probe"), 1);
    }

    #[test]
    fn gone_disables_until_an_operator_resumes_and_the_topics_status_says_so() {
        let world: Shared = Rc::default();
        world.now.set(10_000);
        let parts = Parts::new(&world);
        let Ok(Targeted { target }) = parts.admin(GateOp::Report { outcome: answer(410, None) }) else { panic!() };
        assert_eq!(target.state, TargetState::Disabled);
        world.now.set(20_000);
        assert_eq!(
            parts.admin(GateOp::Acquire { wait_ms: 0 }),
            Ok(Granted(Wait { retry_at: 20_000 + DISABLED_RECHECK_MS }))
        );
        let Ok(Topic(status)) = parts.admin(GateOp::Topic) else { panic!() };
        let shown = serde_json::to_value(&status).unwrap();
        assert_eq!(shown["target"]["state"], "disabled");
        assert_eq!(shown["target"]["since"], 10_000);
        assert_eq!(
            (&shown["target"]["last_answer"]["status"], &shown["target"]["last_answer"]["at"]),
            (&410.into(), &10_000.into())
        );
        assert_eq!((&shown["forward_concurrency"], &shown["in_flight"]), (&2.into(), &0.into()));
        assert_eq!(
            parts
                .admin(GateOp::Resume)
                .map(|a| matches!(a, Targeted { target } if target.state == TargetState::Active)),
            Ok(true)
        );
        lease(&parts);
        let Ok(Topic(status)) = parts.admin(GateOp::Topic) else { panic!() };
        assert_eq!((status.target.state, status.target.since), (TargetState::Active, 20_000));
        assert_eq!(world.gate.borrow().as_ref().unwrap().target.state, TargetState::Active, "stored");
        assert_eq!((logged(&world, "target_disabled"), logged(&world, "target_resumed")), (1, 1));
    }

    #[test]
    fn a_pause_reaches_the_waiters_held_for_a_lease() {
        let world: Shared = Rc::default();
        world.now.set(0);
        let parts = Parts::new(&world);
        let (a, _b) = (lease(&parts), lease(&parts));
        let object = parts.gates.object.borrow().clone();
        let topics = parts.topics.clone();
        let mut waiter =
            Box::pin(async move { object.call("q", topics.get("q"), GateOp::Acquire { wait_ms: 2_000 }).await });
        assert!(poll(waiter.as_mut()).is_pending(), "held for room");
        parts.admin(GateOp::Release { lease: a, outcome: Some(answer(503, None)) }).unwrap();
        assert_eq!(
            poll(waiter.as_mut()),
            Poll::Ready(Ok(Granted(Wait { retry_at: 1_000 }))),
            "told the pause, not the room"
        );
    }

    #[test]
    fn a_throttled_forward_spends_no_try_it_waits_on_its_queue_with_its_attempt() {
        let world: Shared = Rc::default();
        world.now.set(0);
        let parts = Parts::new(&world);
        let consumer = parts.consumer();
        let message = text(Kind::Good, 0);
        let mut handled = Box::pin(consumer.handle("a", &message, 3, false));
        assert!(poll(handled.as_mut()).is_pending(), "forwarding");
        world.throttle_next.set(Some(Some(30_000)));
        world.answers.borrow_mut()[0] = Some(false);
        assert_eq!(poll(handled.as_mut()), Poll::Ready(Settle::Ack), "sent back to wait, then acked: no retry");
        let sent = world.sent.borrow().clone();
        assert_eq!(sent.len(), 1);
        let copy: serde_json::Value = serde_json::from_str(&sent[0].1).unwrap();
        // Its third delivery: the two before count as failed forwards; this throttle does not.
        assert_eq!((copy["attempt"].as_u64(), copy["failed"].as_u64()), (Some(3), Some(2)), "the attempt it had");
        assert!((26..=33).contains(&sent[0].2), "back about when the pause ends: {} s", sent[0].2);
        let counters = world.gate.borrow().clone().unwrap().counters;
        assert_eq!((counters.get("requeued"), counters.get("acked")), (Some(&1), None));
    }
}

/// A topic's recover (`lull_edge::recover`) over its real object (which keys
/// hold dead letters since when) and a model of its keys' objects.
mod recover {
    use super::*;
    use lull_edge::ApiError;
    use lull_edge::recover::{KeyReplays, RecoverRequest, Recovered, recover};
    use std::cell::RefCell;
    use std::collections::BTreeMap;

    /// Each key's dead letters, by when each was dead-lettered.
    #[derive(Default)]
    struct Keys(RefCell<BTreeMap<String, Vec<u64>>>);

    impl KeyReplays for Keys {
        async fn replay_since(&self, _topic: &str, key: &str, since: u64) -> Result<(u64, u64), ApiError> {
            let mut keys = self.0.borrow_mut();
            let letters = keys.entry(key.to_string()).or_default();
            let before = letters.len();
            letters.retain(|at| *at < since);
            Ok(((before - letters.len()) as u64, letters.len() as u64))
        }
    }

    fn run(parts: &Parts, keys: &Keys, since: u64, after: Option<String>) -> Recovered {
        let asked = RecoverRequest { since, after };
        match poll(Box::pin(recover(&&parts.gates, keys, "q", &asked)).as_mut()) {
            Poll::Ready(done) => done.unwrap(),
            Poll::Pending => panic!("a recover waited"),
        }
    }

    #[test]
    fn a_recover_replays_exactly_the_windows_dead_lettered_since_then_page_by_page() {
        let world: Shared = Rc::default();
        world.now.set(0);
        let parts = Parts::new(&world);
        let keys = Keys::default();
        for i in 0..120u64 {
            let key = format!("k{i:03}");
            keys.0.borrow_mut().insert(key.clone(), vec![500, 1_000 + i]);
            // Told twice, the newest kept.
            parts.admin(GateOp::DeadKey { key: key.clone(), at: 500 }).unwrap();
            parts.admin(GateOp::DeadKey { key, at: 1_000 + i }).unwrap();
        }
        let first = run(&parts, &keys, 1_060, None);
        assert_eq!(first, Recovered { replayed: 50, remaining: 10, next_after: Some("k109".into()) });
        let second = run(&parts, &keys, 1_060, first.next_after);
        assert_eq!(second, Recovered { replayed: 10, remaining: 0, next_after: None });
        let left: u64 = keys.0.borrow().values().map(|l| l.len() as u64).sum();
        assert_eq!(left, 120 + 60, "the letters before `since` are kept");
        assert!(keys.0.borrow().iter().all(|(k, l)| l.contains(&500) && (k.as_str() < "k060") == (l.len() == 2)));
        assert_eq!(world.dead_keys.borrow().len(), 120, "every key still holds a dead letter");
        // Everything since the start: each key's last letter goes, and the key is forgotten.
        let mut after = None;
        let mut replayed = 0;
        loop {
            let done = run(&parts, &keys, 0, after);
            replayed += done.replayed;
            if done.remaining == 0 {
                break;
            }
            after = done.next_after;
        }
        assert_eq!(replayed, 180);
        assert!(world.dead_keys.borrow().is_empty(), "keys holding no dead letter are forgotten");
    }
}
