//! Views (status, depth, consumer groups, queue details) answer only committed state: under group commit a
//! view that ran while a commit was in flight showed that commit's changes, and when the commit then failed
//! the answer had claimed messages that never existed. docs/decisions.md, "Views read only committed state
//! (session 10) — audit2".

use crate::support;

use futures::executor::block_on;
use queen_edge::core::BrokerConfig;
use queen_edge::engine::Engine;
use queen_edge::http::{handle, HttpConfig, HttpRequest};
use support::{SlowStore, TestHost};

fn request(method: &str, target: &str, body: Option<serde_json::Value>) -> HttpRequest {
    let mut r = HttpRequest::new(method, target);
    if let Some(body) = body {
        r.headers
            .push(("content-type".into(), "application/json".into()));
        r.body = serde_json::to_vec(&body).unwrap();
    }
    r
}

/// A push whose commit fails, and views asked while that commit is in flight: none may show the push.
#[test]
fn a_view_during_a_commit_that_fails_shows_nothing_of_it() {
    let store = SlowStore::new(1);
    let engine = block_on(Engine::open(
        store.clone(),
        TestHost::new(),
        BrokerConfig::default(),
    ))
    .unwrap();
    let config = HttpConfig::default();
    let push = |payload: &str| {
        request(
            "POST",
            "/api/v1/push",
            Some(serde_json::json!({"items": [{"queue": "q", "payload": payload}]})),
        )
    };
    assert_eq!(
        block_on(handle(&engine, &config, push("committed"))).status,
        201
    );
    store.fail_next();
    let views = [
        "/api/v1/resources/queues/q",
        "/api/v1/status/queues",
        "/api/v1/resources/overview",
    ];
    // The push is polled first: it applies, its commit goes in flight; then the views run.
    let (pushed, answers) = block_on(futures::future::join(
        handle(&engine, &config, push("refused")),
        futures::future::join_all(
            views
                .iter()
                .map(|v| handle(&engine, &config, request("GET", v, None))),
        ),
    ));
    assert_eq!(pushed.status, 500, "the push's commit failed");
    for (view, answer) in views.iter().zip(answers) {
        let text = String::from_utf8_lossy(&answer.body).to_string();
        assert_eq!(answer.status, 200, "{view}: {text}");
        let body: serde_json::Value = serde_json::from_slice(&answer.body).unwrap();
        let totals = format!("{body}");
        assert!(
            !totals.contains("\"total\":2") && !totals.contains("\"pending\":2"),
            "{view} counts the refused push: {text}"
        );
        assert!(
            totals.contains("\"pending\":1") || totals.contains("\"total\":1"),
            "{view} shows the committed message: {text}"
        );
    }
}
