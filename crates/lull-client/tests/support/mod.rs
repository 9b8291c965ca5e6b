//! A tiny HTTP/1.1 server on 127.0.0.1 for the client's tests: it answers
//! each request with the next scripted reply (the last one again once the
//! script is spent) and records what it got. One request per connection.

// Each test file uses a part of it.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A reply: a status, headers and a body; or the connection closed unanswered.
#[derive(Clone, Debug)]
pub enum Reply {
    Answer { status: u16, headers: Vec<(String, String)>, body: String },
    Hangup,
}

impl Reply {
    pub fn json(status: u16, body: &str) -> Reply {
        Reply::Answer { status, headers: vec![("content-type".into(), "application/json".into())], body: body.into() }
    }

    pub fn header(mut self, name: &str, value: &str) -> Reply {
        if let Reply::Answer { headers, .. } = &mut self {
            headers.push((name.into(), value.into()));
        }
        self
    }
}

/// A request the server got.
#[derive(Clone, Debug)]
pub struct Seen {
    pub at: Instant,
    pub method: String,
    pub target: String,
    pub headers: BTreeMap<String, String>,
    pub body: String,
}

impl Seen {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap()
    }
}

pub struct Server {
    pub url: String,
    pub requests: Arc<Mutex<Vec<Seen>>>,
}

impl Server {
    pub async fn start(script: Vec<Reply>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let log = requests.clone();
        tokio::spawn(async move {
            let mut served = 0;
            loop {
                let Ok((stream, _)) = listener.accept().await else { return };
                let reply = script[served.min(script.len() - 1)].clone();
                served += 1;
                serve(stream, reply, log.clone()).await;
            }
        });
        Server { url, requests }
    }

    pub fn requests(&self) -> Vec<Seen> {
        self.requests.lock().unwrap().clone()
    }
}

async fn serve(mut stream: TcpStream, reply: Reply, log: Arc<Mutex<Vec<Seen>>>) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        let n = stream.read(&mut chunk).await.unwrap_or(0);
        if n == 0 {
            return;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or_default().split(' ');
    let (method, target) = (first.next().unwrap_or_default().to_string(), first.next().unwrap_or_default().to_string());
    let headers: BTreeMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let length: usize = headers.get("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
    while buf.len() < head_end + length {
        let n = stream.read(&mut chunk).await.unwrap_or(0);
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body = String::from_utf8_lossy(&buf[head_end..]).to_string();
    log.lock().unwrap().push(Seen { at: Instant::now(), method, target, headers, body });
    match reply {
        Reply::Hangup => drop(stream),
        Reply::Answer { status, headers, body } => {
            let mut text = format!("HTTP/1.1 {status} X\r\ncontent-length: {}\r\nconnection: close\r\n", body.len());
            for (k, v) in headers {
                text.push_str(&format!("{k}: {v}\r\n"));
            }
            text.push_str("\r\n");
            text.push_str(&body);
            let _ = stream.write_all(text.as_bytes()).await;
            let _ = stream.shutdown().await;
        }
    }
}
