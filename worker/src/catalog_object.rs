//! The catalog object's routes ([`handle`]) on its storage: the label list of [`crate::catalog`] (what the
//! routes are and when they are called is there).

use serde::Deserialize;
use worker::worker_sys::web_sys;
use worker::{Method, Request, Result, State};

use crate::catalog::{matching, Label, LABELS_KEY};
use crate::respond;
use crate::routing::query_param;

#[derive(Deserialize)]
struct Register {
    labels: Vec<Label>,
}

/// Answers a catalog route on the catalog object's storage.
pub async fn handle(state: &State, req: web_sys::Request) -> Result<web_sys::Response> {
    // Internal and rare (one register per new label per isolate): read through workers-rs's request.
    let mut req = Request::from(req);
    let storage = state.storage();
    let mut labels: Vec<Label> = storage.get(LABELS_KEY).await?.unwrap_or_default();
    match (req.method(), req.path().as_str()) {
        (Method::Post, "/__shard/catalog/register") => {
            let Ok(body) = req.json::<Register>().await else {
                return respond::error(
                    400,
                    "catalog register wants {\"labels\": [[ns, task, shard]]}",
                );
            };
            let before = labels.len();
            for label in body.labels {
                if !labels.contains(&label) {
                    labels.push(label);
                }
            }
            if labels.len() != before {
                storage.put(LABELS_KEY, &labels).await?;
            }
            respond::json(200, &serde_json::json!({ "labels": labels.len() }))
        }
        (Method::Get, "/__shard/catalog/lookup") => {
            let query = req.url()?.query().unwrap_or("").to_string();
            let namespace = query_param(&query, "namespace");
            let task = query_param(&query, "task");
            respond::json(
                200,
                &serde_json::json!({ "shards": matching(&labels, namespace.as_deref(), task.as_deref()) }),
            )
        }
        _ => respond::error(404, "no such catalog route"),
    }
}
