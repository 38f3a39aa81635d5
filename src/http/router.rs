//! The route table: method and path to a [`Route`] with its path parameters percent-decoded, and the
//! access level each route needs (contract §1.1 auth column).
//!
//! Routes the contract marks skip/optional (cluster-internal, migration, streams, `/analytics/*`,
//! shared-state, the dashboard SPA) are not here and answer 404 `no_such_route`.

use super::auth::Access;
use super::error::HttpError;
use super::query::percent_decode;

/// A recognised route and its decoded path parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Route {
    /// `OPTIONS /*`: CORS preflight.
    Preflight,
    /// `POST /api/v1/push`.
    Push,
    /// `GET /api/v1/pop/queue/:queue`.
    PopQueue { queue: String },
    /// `GET /api/v1/pop/queue/:queue/partition/:partition`.
    PopPartition { queue: String, partition: String },
    /// `GET /api/v1/pop?namespace=&task=`.
    PopDiscovery,
    /// `POST /api/v1/ack`.
    Ack,
    /// `POST /api/v1/ack/batch`.
    AckBatch,
    /// `POST /api/v1/lease/:leaseId/extend`.
    LeaseExtend { lease_id: String },
    /// `POST /api/v1/transaction`.
    Transaction,
    /// `POST /api/v1/configure`.
    Configure,
    /// `GET /api/v1/resources/queues`.
    ListQueues,
    /// `GET /api/v1/resources/queues/:queue`.
    GetQueue { queue: String },
    /// `DELETE /api/v1/resources/queues/:queue`.
    DeleteQueue { queue: String },
    /// `GET /api/v1/resources/overview`.
    Overview,
    /// `GET /api/v1/resources/namespaces`.
    Namespaces,
    /// `GET /api/v1/resources/tasks`.
    Tasks,
    /// `GET /api/v1/dlq`.
    ListDlq,
    /// `POST /api/v1/dlq/:id/replay`.
    ReplayDlq { id: String },
    /// `POST /api/v1/dlq/replay`: bulk, by filter (issue 16).
    ReplayDlqBulk,
    /// `POST /api/v1/dlq/delete`: bulk, by filter (issue 16).
    DeleteDlqBulk,
    /// `GET /api/v1/deliveries`: the delivery log (issue 16).
    Deliveries,
    /// `POST /api/v1/messages/:partitionId/:transactionId/retry`.
    RetryMessage {
        partition_id: String,
        transaction_id: String,
    },
    /// `DELETE /api/v1/messages/:partitionId/:transactionId`.
    DeleteMessage {
        partition_id: String,
        transaction_id: String,
    },
    /// `GET /api/v1/messages`.
    ListMessages,
    /// `GET /api/v1/messages/:partitionId/:transactionId`.
    GetMessage {
        partition_id: String,
        transaction_id: String,
    },
    /// `DELETE /api/v1/consumer-groups/:group`.
    DeleteGroup { group: String },
    /// `DELETE /api/v1/consumer-groups/:group/queues/:queue`.
    DeleteGroupQueue { group: String, queue: String },
    /// `POST /api/v1/consumer-groups/:group/subscription`.
    UpdateSubscription { group: String },
    /// `POST /api/v1/consumer-groups/:group/queues/:queue/seek`.
    Seek { group: String, queue: String },
    /// `POST /api/v1/consumer-groups/:group/queues/:queue/partitions/:partition/seek`.
    SeekPartition {
        group: String,
        queue: String,
        partition: String,
    },
    /// `POST /api/v1/stats/refresh`.
    StatsRefresh,
    /// `POST /api/v1/traces`.
    PostTrace,
    /// `GET /health`.
    Health,
    /// `GET /metrics`.
    Metrics,
    /// `GET /metrics/prometheus`.
    Prometheus,
    /// `GET /api/v1/status`.
    Status,
    /// `GET /api/v1/consumer-groups`.
    ListGroups,
    /// `GET /api/v1/consumer-groups/lagging?minLagSeconds=`.
    LaggingGroups,
    /// `GET /api/v1/consumer-groups/:group`.
    GetGroup { group: String },
    /// `GET /api/v1/resources/queues/:queue/depth?group=`.
    QueueDepth { queue: String },
    /// `GET /api/v1/resources/partitions`.
    ListPartitions,
    /// `GET /api/v1/status/queues`.
    StatusQueues,
    /// `GET /api/v1/status/queues/:queue`.
    StatusQueue { queue: String },
    /// `GET /api/v1/status/queues/:queue/messages`.
    StatusQueueMessages { queue: String },
    /// `GET /api/v1/status/queues/:queue/history?minutes=`.
    QueueHistory { queue: String },
    /// `GET /api/v1/status/analytics`.
    StatusAnalytics,
    /// `GET /api/v1/status/buffers`.
    StatusBuffers,
    /// `GET /api/v1/traces/:partitionId/:transactionId`.
    MessageTraces {
        partition_id: String,
        transaction_id: String,
    },
    /// `GET /api/v1/traces/by-name/:name`.
    TracesByName { name: String },
    /// `GET /api/v1/traces/names`.
    TraceNames,
    /// `GET /api/v1/system/maintenance`.
    GetMaintenance,
    /// `POST /api/v1/system/maintenance`.
    SetMaintenance,
    /// `GET /api/v1/system/maintenance/pop`.
    GetPopMaintenance,
    /// `POST /api/v1/system/maintenance/pop`.
    SetPopMaintenance,
}

impl Route {
    /// True for the pop routes (commands that claim messages, and may long-poll).
    pub(crate) fn is_pop(&self) -> bool {
        matches!(
            self,
            Route::PopQueue { .. } | Route::PopPartition { .. } | Route::PopDiscovery
        )
    }

    /// The access level the route needs when authentication is on.
    pub(crate) fn access(&self) -> Access {
        use Route::*;
        match self {
            Preflight | Health | Metrics => Access::Public,
            // The Prometheus text names every queue (dead letters per queue), so with authentication
            // on it needs a read-only token like the other views (docs/decisions.md).
            Prometheus => Access::ReadOnly,
            ListQueues
            | GetQueue { .. }
            | Overview
            | Namespaces
            | Tasks
            | ListDlq
            | Deliveries
            | ListMessages
            | GetMessage { .. }
            | Status
            | ListGroups
            | LaggingGroups
            | GetGroup { .. }
            | QueueDepth { .. }
            | ListPartitions
            | StatusQueues
            | StatusQueue { .. }
            | StatusQueueMessages { .. }
            | QueueHistory { .. }
            | StatusAnalytics
            | StatusBuffers
            | MessageTraces { .. }
            | TracesByName { .. }
            | TraceNames => Access::ReadOnly,
            Push
            | PopQueue { .. }
            | PopPartition { .. }
            | PopDiscovery
            | Ack
            | AckBatch
            | LeaseExtend { .. }
            | Transaction
            | Configure
            | ReplayDlq { .. }
            | ReplayDlqBulk
            | DeleteDlqBulk
            | RetryMessage { .. }
            | DeleteMessage { .. }
            | UpdateSubscription { .. }
            | Seek { .. }
            | SeekPartition { .. }
            | PostTrace => Access::ReadWrite,
            DeleteQueue { .. }
            | DeleteGroup { .. }
            | DeleteGroupQueue { .. }
            | StatsRefresh
            | GetMaintenance
            | SetMaintenance
            | GetPopMaintenance
            | SetPopMaintenance => Access::Admin,
        }
    }
}

/// Finds the route for `method` and the (still percent-encoded) `path`.
pub(crate) fn route(method: &str, path: &str) -> Result<Route, HttpError> {
    let method = method.to_ascii_uppercase();
    if method == "OPTIONS" {
        return Ok(Route::Preflight);
    }
    let Some(rest) = path.strip_prefix('/') else {
        return Err(HttpError::no_such_route());
    };
    let segs: Vec<&str> = rest.split('/').collect();
    let d = |s: &str| percent_decode(s, false);
    use Route::*;
    let route = match (method.as_str(), segs.as_slice()) {
        ("GET", ["health"]) => Health,
        ("GET", ["metrics"]) => Metrics,
        ("GET", ["metrics", "prometheus"]) => Prometheus,
        (m, ["api", "v1", tail @ ..]) => match (m, tail) {
            ("POST", ["push"]) => Push,
            ("GET", ["pop"]) => PopDiscovery,
            ("GET", ["pop", "queue", q]) => PopQueue { queue: d(q)? },
            ("GET", ["pop", "queue", q, "partition", p]) => PopPartition {
                queue: d(q)?,
                partition: d(p)?,
            },
            ("POST", ["ack"]) => Ack,
            ("POST", ["ack", "batch"]) => AckBatch,
            ("POST", ["lease", l, "extend"]) => LeaseExtend { lease_id: d(l)? },
            ("POST", ["transaction"]) => Transaction,
            ("POST", ["configure"]) => Configure,
            ("GET", ["resources", "queues"]) => ListQueues,
            ("GET", ["resources", "queues", q]) => GetQueue { queue: d(q)? },
            ("GET", ["resources", "queues", q, "depth"]) => QueueDepth { queue: d(q)? },
            ("GET", ["resources", "partitions"]) => ListPartitions,
            ("DELETE", ["resources", "queues", q]) => DeleteQueue { queue: d(q)? },
            ("GET", ["resources", "overview"]) => Overview,
            ("GET", ["resources", "namespaces"]) => Namespaces,
            ("GET", ["resources", "tasks"]) => Tasks,
            ("GET", ["dlq"]) => ListDlq,
            ("POST", ["dlq", "replay"]) => ReplayDlqBulk,
            ("POST", ["dlq", "delete"]) => DeleteDlqBulk,
            ("POST", ["dlq", id, "replay"]) => ReplayDlq { id: d(id)? },
            ("GET", ["deliveries"]) => Deliveries,
            ("GET", ["messages"]) => ListMessages,
            ("GET", ["messages", p, t]) => GetMessage {
                partition_id: d(p)?,
                transaction_id: d(t)?,
            },
            ("DELETE", ["messages", p, t]) => DeleteMessage {
                partition_id: d(p)?,
                transaction_id: d(t)?,
            },
            ("POST", ["messages", p, t, "retry"]) => RetryMessage {
                partition_id: d(p)?,
                transaction_id: d(t)?,
            },
            ("GET", ["consumer-groups"]) => ListGroups,
            ("GET", ["consumer-groups", "lagging"]) => LaggingGroups,
            ("GET", ["consumer-groups", g]) => GetGroup { group: d(g)? },
            ("DELETE", ["consumer-groups", g]) => DeleteGroup { group: d(g)? },
            ("DELETE", ["consumer-groups", g, "queues", q]) => DeleteGroupQueue {
                group: d(g)?,
                queue: d(q)?,
            },
            ("POST", ["consumer-groups", g, "subscription"]) => UpdateSubscription { group: d(g)? },
            ("POST", ["consumer-groups", g, "queues", q, "seek"]) => Seek {
                group: d(g)?,
                queue: d(q)?,
            },
            ("POST", ["consumer-groups", g, "queues", q, "partitions", p, "seek"]) => {
                SeekPartition {
                    group: d(g)?,
                    queue: d(q)?,
                    partition: d(p)?,
                }
            }
            ("POST", ["stats", "refresh"]) => StatsRefresh,
            ("POST", ["traces"]) => PostTrace,
            ("GET", ["traces", "names"]) => TraceNames,
            ("GET", ["traces", "by-name", n]) => TracesByName { name: d(n)? },
            ("GET", ["traces", p, t]) => MessageTraces {
                partition_id: d(p)?,
                transaction_id: d(t)?,
            },
            ("GET", ["system", "maintenance"]) => GetMaintenance,
            ("POST", ["system", "maintenance"]) => SetMaintenance,
            ("GET", ["system", "maintenance", "pop"]) => GetPopMaintenance,
            ("POST", ["system", "maintenance", "pop"]) => SetPopMaintenance,
            ("GET", ["status"]) => Status,
            ("GET", ["status", "queues"]) => StatusQueues,
            ("GET", ["status", "queues", q]) => StatusQueue { queue: d(q)? },
            ("GET", ["status", "queues", q, "messages"]) => StatusQueueMessages { queue: d(q)? },
            ("GET", ["status", "queues", q, "history"]) => QueueHistory { queue: d(q)? },
            ("GET", ["status", "analytics"]) => StatusAnalytics,
            ("GET", ["status", "buffers"]) => StatusBuffers,
            _ => return Err(HttpError::no_such_route()),
        },
        _ => return Err(HttpError::no_such_route()),
    };
    Ok(route)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_parameters() {
        assert_eq!(
            route(
                "POST",
                "/api/v1/consumer-groups/my%20group/queues/a%2Fb/seek"
            )
            .unwrap(),
            Route::Seek {
                group: "my group".into(),
                queue: "a/b".into()
            }
        );
        assert_eq!(
            route("GET", "/api/v1/consumer-groups/lagging").unwrap(),
            Route::LaggingGroups,
            "the literal wins over the :group parameter (as in Queen)"
        );
        assert_eq!(
            route("GET", "/api/v1/consumer-groups/a%2Fb").unwrap(),
            Route::GetGroup {
                group: "a/b".into()
            }
        );
        assert_eq!(
            route("get", "/api/v1/pop/queue/orders").unwrap(),
            Route::PopQueue {
                queue: "orders".into()
            }
        );
    }

    #[test]
    fn unknown_is_no_such_route() {
        for (m, p) in [
            ("GET", "/api/v1/push"),
            ("POST", "/api/v1/nope"),
            ("GET", "/"),
            ("GET", ""),
            ("DELETE", "/api/v1/queues/q/clear"),
            ("GET", "/api/v1/resources/partitions/x"),
            ("GET", "/api/v1/status/queues/q/x"),
        ] {
            assert_eq!(route(m, p).unwrap_err().message, "no_such_route", "{m} {p}");
        }
    }
}
