//! A local fake of Cloudflare's Queues HTTP pull API for one queue (its
//! request and answer shapes): pull leases visible messages for their
//! visibility timeout, ack removes them, a retry makes a message visible
//! again after its delay, and a lease not settled in time runs out.
//! Served on 127.0.0.1 (a free port) under a path, as a base URL may have one.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub const ACCOUNT: &str = "acc";
pub const QUEUE: &str = "q1";
pub const TOKEN: &str = "cf-token";

/// One message on the queue.
#[derive(Clone, Debug)]
pub struct Held {
    pub id: String,
    pub key: String,
    pub body: String,
    pub attempts: u32,
    pub visible_at: Instant,
    pub lease: Option<String>,
}

/// What the queue was asked, and when (since the fake started).
#[derive(Clone, Debug)]
pub enum Op {
    Pull { at: Duration, batch: u64, visibility_ms: u64, keys: Vec<String> },
    Ack { at: Duration, acked: Vec<String>, retried: Vec<(String, Option<u64>)> },
}

#[derive(Default)]
struct State {
    messages: Vec<Held>,
    acked: Vec<String>,
    leases: u64,
    ids: u64,
    log: Vec<Op>,
}

pub struct FakeQueue {
    /// The base URL (`CLOUDFLARE_API_BASE_URL`), with a path.
    pub base: String,
    pub started: Instant,
    state: Arc<Mutex<State>>,
}

/// lull's message for the window of `key`, as lull-edge queues it.
pub fn window(key: &str, attempt: u32) -> String {
    json!({
        "topic": "orders",
        "idempotency_key": format!("orders/{key}/w.1"),
        "attempt": attempt,
        "body": {"topic": "orders", "key": key, "window": 1, "reason": "quiet", "count": 1, "events": [{"key": key}]},
    })
    .to_string()
}

impl FakeQueue {
    pub fn start() -> FakeQueue {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let state = Arc::new(Mutex::new(State::default()));
        let started = Instant::now();
        let shared = state.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let state = shared.clone();
                std::thread::spawn(move || serve(stream, &state, started));
            }
        });
        FakeQueue { base: format!("http://127.0.0.1:{port}/client/v4"), started, state }
    }

    /// Put the window of `key` on the queue (its message id is new).
    pub fn add(&self, key: &str) {
        self.add_body(key, window(key, 1));
    }

    pub fn add_body(&self, key: &str, body: String) {
        let mut state = self.state.lock().expect("lock");
        state.ids += 1;
        let id = format!("m{}", state.ids);
        state.messages.push(Held { id, key: key.into(), body, attempts: 0, visible_at: Instant::now(), lease: None });
    }

    /// Messages a pull would get now.
    pub fn available_now(&self) -> usize {
        let now = Instant::now();
        self.state.lock().expect("lock").messages.iter().filter(|m| m.visible_at <= now).count()
    }

    /// Messages still on the queue (visible or not).
    pub fn remaining(&self) -> Vec<Held> {
        self.state.lock().expect("lock").messages.clone()
    }

    /// Keys acked, in order.
    pub fn acked(&self) -> Vec<String> {
        self.state.lock().expect("lock").acked.clone()
    }

    pub fn log(&self) -> Vec<Op> {
        self.state.lock().expect("lock").log.clone()
    }
}

fn serve(stream: TcpStream, state: &Mutex<State>, started: Instant) {
    let mut reader = BufReader::new(match stream.try_clone() {
        Ok(s) => s,
        Err(_) => return,
    });
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    let path = request_line.split_whitespace().nth(1).unwrap_or("").to_string();
    let (mut length, mut authorization) = (0usize, String::new());
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).is_err() || line == "\r\n" || line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':').unwrap_or((&line, ""));
        match name.to_ascii_lowercase().as_str() {
            "content-length" => length = value.trim().parse().unwrap_or(0),
            "authorization" => authorization = value.trim().to_string(),
            _ => {}
        }
    }
    let mut body = vec![0; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let (status, answer) = answer(&path, &authorization, &body, state, started);
    let text = answer.to_string();
    let mut stream = stream;
    let _ = write!(
        stream,
        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
        text.len()
    );
}

fn answer(path: &str, authorization: &str, body: &Value, state: &Mutex<State>, started: Instant) -> (u16, Value) {
    if authorization != format!("Bearer {TOKEN}") {
        return (
            401,
            json!({"success": false, "errors": [{"code": 10000, "message": "Authentication error"}], "result": null}),
        );
    }
    let messages = format!("/client/v4/accounts/{ACCOUNT}/queues/{QUEUE}/messages");
    let now = Instant::now();
    let at = now - started;
    let mut state = state.lock().expect("lock");
    if path == format!("{messages}/pull") {
        let batch = body["batch_size"].as_u64().unwrap_or(5);
        let visibility_ms = body["visibility_timeout_ms"].as_u64().unwrap_or(30_000);
        state.leases += 1;
        let lease_base = state.leases;
        let mut out = Vec::new();
        let mut keys = Vec::new();
        for (i, m) in state.messages.iter_mut().filter(|m| m.visible_at <= now).take(batch as usize).enumerate() {
            m.attempts += 1;
            m.lease = Some(format!("lease-{lease_base}-{i}"));
            m.visible_at = now + Duration::from_millis(visibility_ms);
            keys.push(m.key.clone());
            out.push(json!({"id": m.id, "body": m.body, "timestamp_ms": 1_700_000_000_000u64, "attempts": m.attempts, "lease_id": m.lease}));
        }
        let backlog = state.messages.len() - out.len();
        state.log.push(Op::Pull { at, batch, visibility_ms, keys });
        return (
            200,
            json!({"success": true, "errors": [], "result": {"messages": out, "message_backlog_count": backlog}}),
        );
    }
    if path == format!("{messages}/ack") {
        let lease = |v: &Value| v["lease_id"].as_str().unwrap_or("").to_string();
        let mut acked = Vec::new();
        for a in body["acks"].as_array().cloned().unwrap_or_default() {
            if let Some(i) = state.messages.iter().position(|m| m.lease.as_deref() == Some(lease(&a).as_str())) {
                let m = state.messages.remove(i);
                acked.push(m.key.clone());
                state.acked.push(m.key);
            }
        }
        let mut retried = Vec::new();
        for r in body["retries"].as_array().cloned().unwrap_or_default() {
            let delay = r["delay_seconds"].as_u64();
            if let Some(m) = state.messages.iter_mut().find(|m| m.lease.as_deref() == Some(lease(&r).as_str())) {
                m.lease = None;
                m.visible_at = now + Duration::from_secs(delay.unwrap_or(0));
                retried.push((m.key.clone(), delay));
            }
        }
        let (acks, retries) = (acked.len(), retried.len());
        state.log.push(Op::Ack { at, acked, retried });
        return (
            200,
            json!({"success": true, "errors": [], "result": {"ackCount": acks, "retryCount": retries, "warnings": {}}}),
        );
    }
    (404, json!({"success": false, "errors": [{"code": 7003, "message": "No route for the URI"}], "result": null}))
}
