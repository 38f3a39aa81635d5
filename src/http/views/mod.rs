//! The read-only view routes, for dashboards: queue listings and details, the message browser,
//! overview, namespaces and tasks, status (`/status` and `/status/*`), each queue's recent history,
//! queue depth and the partition listing, the consumer-group views, and metrics (JSON and
//! Prometheus).
//!
//! They are a cargo feature, `views` (default on: the Worker and native builds have them). The npm
//! module ships two builds: without views for `Queen.open` (about 14 KB gzipped smaller, the size every
//! page downloads) and with them for `Queen.open({ views: true })`, which the dashboard page uses
//! (docs/decisions.md). A build without views answers these routes 501 with an error that says how to
//! get them; every other route works the same in both.

#[cfg(feature = "views")]
mod groups;
#[cfg(feature = "views")]
mod history;
#[cfg(feature = "views")]
mod prometheus;
#[cfg(feature = "views")]
mod render;
#[cfg(feature = "views")]
mod routes;
#[cfg(feature = "views")]
mod status;
#[cfg(feature = "views")]
mod traces;

/// Answers a view route (the routes `handlers` sends here).
#[cfg(feature = "views")]
pub(super) use routes::answer;

/// Answers a view route (the routes `handlers` sends here) in a build without views: 501 with what to
/// do instead.
#[cfg(not(feature = "views"))]
pub(super) async fn answer<S: crate::store::Store, H: crate::engine::Host>(
    _engine: &crate::engine::Engine<S, H>,
    _config: &super::HttpConfig,
    _route: super::router::Route,
    _query: &super::query::Query,
) -> Result<super::HttpResponse, super::error::HttpError> {
    Err(super::error::HttpError::not_in_default_build(
        "The view (dashboard) routes are",
    ))
}
