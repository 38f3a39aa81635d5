//! The operations routes beyond Queen (issue 16): `GET /api/v1/deliveries` (module `deliveries`) and the
//! bulk dead-letter routes `POST /api/v1/dlq/replay` and `/dlq/delete` (module `dlq_bulk`).
//!
//! Like the view routes they are built with the `views` cargo feature: the npm module's default build
//! (what `Queen.open` loads, whose download size is budgeted) answers them 501 saying how to get them;
//! the Worker, native builds and `Queen.open({ views: true })` (the page) have them. Every queue option
//! (`reclaimLimit`, `retryBackoff`, `deliveryLog`) works in every build: only these routes are left out.

use super::error::HttpError;
#[cfg(feature = "views")]
use super::{query::Query, router::Route, HttpConfig, HttpResponse};
#[cfg(feature = "views")]
use crate::{
    engine::{Engine, Host},
    store::Store,
};

/// Answers an operations route.
#[cfg(feature = "views")]
pub(super) async fn answer<S: Store, H: Host>(
    engine: &Engine<S, H>,
    config: &HttpConfig,
    route: Route,
    query: &Query,
    body: &[u8],
) -> Result<HttpResponse, HttpError> {
    use super::dlq_bulk::{answer as bulk, BulkAction};
    match route {
        Route::ReplayDlqBulk => bulk(engine, config, body, BulkAction::Replay).await,
        Route::DeleteDlqBulk => bulk(engine, config, body, BulkAction::Delete).await,
        Route::Deliveries => super::deliveries::answer(engine, config, query).await,
        _ => Err(HttpError::no_such_route()),
    }
}

/// The answer to an operations route in a build without views: 501 with what to do instead (a plain
/// function, not an async one: no future for the browser module to carry).
#[cfg(not(feature = "views"))]
pub(super) fn unavailable() -> HttpError {
    HttpError::not_in_default_build("The delivery log and bulk dead-letter routes are")
}
