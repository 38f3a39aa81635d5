//! Settings read from the Worker's environment (`[vars]` in `wrangler.toml`, secrets via `wrangler secret`).
//!
//! Every setting has a default, so a missing variable never stops the broker; the defaults are the ones in the
//! wire contract (§1.3, §1.12, §7.3 of `docs/wire-contract.md`). A variable that is set but cannot be read
//! stops the broker (every request answers 503 saying why), so that a misspelt setting is never run as the
//! default or taken for another: a number that is not a whole number (`MAX_STORED_BYTES`,
//! `SEGMENT_CACHE_BYTES`, `MAX_BODY_BYTES`, `DEFAULT_TIMEOUT`, `MAX_TIMEOUT`, `TXN_TIMEOUT_MS`; a size too
//! large for the target), a `DEFAULT_SUBSCRIPTION_MODE` other than `new` (or Queen's `new-only`) or `all`, a `QUEEN_ENCRYPTION_KEY` that is not 64 hex characters (running without it would
//! refuse or misread encrypted queues), and a `COMMIT_SHARING` other than `off`, `on` or `auto`
//! ([`CommitSharing`]).
//!
//! The values are read from the `Env` by `crate::vars` (wasm32); what they mean is decided here, without I/O.

use queen_edge::core::BrokerConfig;
use queen_edge::http::jwt::{JwtConfig, JwtSettings};
use queen_edge::http::{AuthConfig, AuthToken, EncryptionKey, HttpConfig, Role};

/// Secrets that hold bearer tokens, and the role each grants.
pub const TOKEN_SECRETS: [(&str, Role); 3] = [
    ("API_TOKEN", Role::Admin),
    ("API_TOKEN_READ_WRITE", Role::ReadWrite),
    ("API_TOKEN_READ_ONLY", Role::ReadOnly),
];

/// The JWT settings (contract §1.12), read when `JWT_ENABLED` is `true` or `1`. A setting that cannot work
/// (no key, an unknown algorithm, a bad PEM) makes authenticated routes answer 503 with the reason.
pub const JWT_VARS: [&str; 9] = [
    "JWT_ALGORITHM",
    "JWT_SECRET",
    "JWT_PUBLIC_KEY",
    "JWT_JWKS_URL",
    "JWT_ISSUER",
    "JWT_AUDIENCE",
    "JWT_CLOCK_SKEW",
    "JWT_ROLES_CLAIM",
    "JWT_SKIP_PATHS",
];

/// The storage quota when `MAX_STORED_BYTES` is not set: 8 GiB of segments, under the 10 GB a Durable
/// Object stores, leaving room for lanes, dead letters and indexes.
pub const DEFAULT_MAX_STORED_BYTES: u64 = 8 * 1024 * 1024 * 1024;
/// The secret holding the AES-256-GCM key of encrypted queues: 64 hex characters (contract §2.4).
pub const ENCRYPTION_KEY_SECRET: &str = "QUEEN_ENCRYPTION_KEY";

/// The variable that says whether concurrent requests share Durable Object commits ([`CommitSharing`]).
pub const COMMIT_SHARING_VAR: &str = "COMMIT_SHARING";

/// The variable that bounds how long a transaction across shards may stay undecided, or a part of it
/// prepared, in ms ([`txn_timeout_ms`]).
pub const TXN_TIMEOUT_VAR: &str = "TXN_TIMEOUT_MS";
/// The transaction timeout when [`TXN_TIMEOUT_VAR`] is not set.
pub const DEFAULT_TXN_TIMEOUT_MS: i64 = 10_000;
/// The shortest transaction timeout taken: a smaller value is raised to it.
pub const MIN_TXN_TIMEOUT_MS: i64 = 100;

/// Reads [`TXN_TIMEOUT_VAR`]'s value: unset is [`DEFAULT_TXN_TIMEOUT_MS`]; a whole number is taken, raised
/// to [`MIN_TXN_TIMEOUT_MS`] when smaller; anything else is an error naming the variable.
pub fn txn_timeout_ms(value: Option<&str>) -> Result<i64, String> {
    match value {
        None => Ok(DEFAULT_TXN_TIMEOUT_MS),
        Some(text) => text
            .trim()
            .parse::<i64>()
            .map(|ms| ms.max(MIN_TXN_TIMEOUT_MS))
            .map_err(|_| {
                format!("{TXN_TIMEOUT_VAR} is {text:?}; it takes a whole number of milliseconds")
            }),
    }
}

/// Whether a commit's leader waits for the requests workerd holds so that they ride in its commit
/// (`queen_edge::engine::Host::gather`; the engine's group commit, *Gathering*). It pays where a commit
/// blocks the object (SQLite's `fsync` on a self-hosted workerd with its state on disk) and costs where a
/// commit is nearly free (state on tmpfs); docs/decisions.md, "Sharing commits when they block", has the
/// measurements. `auto` decides per object at run time ([`crate::auto_sharing`]); `wrangler.toml` sets it
/// (docs/decisions.md, "Sharing commits automatically").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CommitSharing {
    /// Every request's changes commit at once, alone unless a commit is in flight (unset: off).
    #[default]
    Off,
    /// A commit's leader gathers the requests workerd holds before it commits.
    On,
    /// Each object tries both and keeps the one that answers more requests ([`crate::auto_sharing`]).
    Auto,
}

impl CommitSharing {
    /// Reads the variable's value: `off`, `on`, `auto`, or unset (off). Anything else is an error naming
    /// the variable and the values it takes.
    pub fn parse(value: Option<&str>) -> Result<Self, String> {
        match value {
            None | Some("off") => Ok(CommitSharing::Off),
            Some("on") => Ok(CommitSharing::On),
            Some("auto") => Ok(CommitSharing::Auto),
            Some(other) => Err(format!(
                "{COMMIT_SHARING_VAR} is {other:?}; it takes \"off\", \"on\" or \"auto\""
            )),
        }
    }
}

/// Everything the Durable Object hands to the engine and the HTTP layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerConfig {
    /// Core settings: `DEFAULT_SUBSCRIPTION_MODE` (`new`, the default, or `all`), `MAX_STORED_BYTES`
    /// (the storage quota, [`DEFAULT_MAX_STORED_BYTES`] unless set; `0` turns it off) and
    /// `SEGMENT_CACHE_BYTES` (the decoded-segment cache, `queen_edge::core::DEFAULT_CACHE_BYTES` unless set).
    pub broker: BrokerConfig,
    /// HTTP settings: `MAX_BODY_BYTES`, `DEFAULT_TIMEOUT` (long-poll ms when `wait=true` comes without
    /// `timeout`), `MAX_TIMEOUT` (cap on long-polls), the bearer tokens of [`TOKEN_SECRETS`] (auth is on
    /// when at least one is set), JWT ([`JWT_VARS`], on with `JWT_ENABLED`), and the key of
    /// [`ENCRYPTION_KEY_SECRET`] (none: encrypted queues are refused).
    pub http: HttpConfig,
    /// `COMMIT_SHARING` ([`CommitSharing`]).
    pub commit_sharing: CommitSharing,
    /// Why the broker must not start (the first variable that is set but cannot be read: see the module
    /// doc), if it must not.
    pub startup_error: Option<String>,
}

impl WorkerConfig {
    /// Makes the settings from `var`, which gives the value of a variable or secret by name (`None` when it
    /// is unset or empty); `worker_id` is reported by `/health`, `now_ms` starts the uptime.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>, worker_id: String, now_ms: i64) -> Self {
        // The first setting that cannot be read: the broker refuses to start, saying why, rather than run on a
        // default it was not given.
        let mut startup_error: Option<String> = None;
        let mut broker = BrokerConfig {
            max_stored_bytes: match whole::<u64>(&var, "MAX_STORED_BYTES", &mut startup_error) {
                Some(0) => None,
                Some(n) => Some(n),
                None => Some(DEFAULT_MAX_STORED_BYTES),
            },
            ..BrokerConfig::default()
        };
        if let Some(v) = whole(&var, "SEGMENT_CACHE_BYTES", &mut startup_error) {
            broker.cache_bytes = v;
        }
        let mut http = HttpConfig {
            worker_id,
            started_at_ms: now_ms,
            ..HttpConfig::default()
        };
        if let Some(v) = whole(&var, "MAX_BODY_BYTES", &mut startup_error) {
            http.limits.max_body_bytes = v;
        }
        if let Some(v) = whole(&var, "DEFAULT_TIMEOUT", &mut startup_error) {
            http.limits.default_wait_ms = v;
        }
        if let Some(v) = whole(&var, "MAX_TIMEOUT", &mut startup_error) {
            http.limits.max_wait_ms = v;
        }
        match var("DEFAULT_SUBSCRIPTION_MODE").as_deref() {
            None | Some("new" | "new-only") => broker.default_subscription_new = true,
            Some("all") => broker.default_subscription_new = false,
            Some(other) => {
                startup_error.get_or_insert(format!(
                    "DEFAULT_SUBSCRIPTION_MODE is {other:?}; it takes \"new\" or \"all\""
                ));
            }
        }
        let tokens: Vec<AuthToken> = TOKEN_SECRETS
            .iter()
            .filter_map(|(name, role)| var(name).map(|t| AuthToken::new(t, *role)))
            .collect();
        if !tokens.is_empty() {
            http.auth = Some(AuthConfig { tokens });
        }
        if is_true(var("JWT_ENABLED").as_deref()) {
            http.jwt = Some(JwtConfig::from_settings(&JwtSettings {
                algorithm: var("JWT_ALGORITHM"),
                secret: var("JWT_SECRET"),
                public_key_pem: var("JWT_PUBLIC_KEY"),
                jwks_url: var("JWT_JWKS_URL"),
                issuer: var("JWT_ISSUER"),
                audience: var("JWT_AUDIENCE"),
                clock_skew: var("JWT_CLOCK_SKEW"),
                roles_claim: var("JWT_ROLES_CLAIM"),
                skip_paths: var("JWT_SKIP_PATHS"),
            }));
        }
        if let Some(hex) = var(ENCRYPTION_KEY_SECRET) {
            match EncryptionKey::from_hex(&hex) {
                Ok(key) => http.encryption = Some(key),
                Err(e) => {
                    startup_error.get_or_insert(format!("{ENCRYPTION_KEY_SECRET} is invalid: {e}"));
                }
            }
        }
        if let Err(e) = txn_timeout_ms(var(TXN_TIMEOUT_VAR).as_deref()) {
            startup_error.get_or_insert(e);
        }
        let commit_sharing = match CommitSharing::parse(var(COMMIT_SHARING_VAR).as_deref()) {
            Ok(sharing) => sharing,
            Err(e) => {
                startup_error.get_or_insert(e);
                CommitSharing::Off
            }
        };
        WorkerConfig {
            broker,
            http,
            commit_sharing,
            startup_error,
        }
    }
}

/// The variable `name` as a whole number of type `T`, `None` when it is unset; a value that is not one, or does
/// not fit `T` (a `usize` on wasm32 holds less than 4 GiB), is `None` too and is noted in `error` (the first
/// such note is kept).
fn whole<T: std::str::FromStr>(
    var: impl Fn(&str) -> Option<String>,
    name: &str,
    error: &mut Option<String>,
) -> Option<T> {
    let value = var(name)?;
    let parsed = value.trim().parse().ok();
    if parsed.is_none() {
        error.get_or_insert(format!(
            "{name} is {value:?}; it takes a whole number this runtime can hold"
        ));
    }
    parsed
}

/// True for `true` and `1`: the contract's rule for a boolean variable.
pub fn is_true(value: Option<&str>) -> bool {
    matches!(value, Some("true") | Some("1"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_sharing_takes_off_on_and_auto_and_is_off_when_unset() {
        assert_eq!(CommitSharing::parse(None), Ok(CommitSharing::Off));
        assert_eq!(CommitSharing::parse(Some("off")), Ok(CommitSharing::Off));
        assert_eq!(CommitSharing::parse(Some("on")), Ok(CommitSharing::On));
        assert_eq!(CommitSharing::parse(Some("auto")), Ok(CommitSharing::Auto));
    }

    fn config_of(vars: &[(&str, &str)]) -> WorkerConfig {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        WorkerConfig::from_vars(
            |name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()),
            String::new(),
            0,
        )
    }

    #[test]
    fn readable_settings_are_taken_and_start_the_broker() {
        let new_only = config_of(&[("DEFAULT_SUBSCRIPTION_MODE", "new-only")]);
        assert_eq!(new_only.startup_error, None);
        assert!(new_only.broker.default_subscription_new);
        let config = config_of(&[
            ("DEFAULT_TIMEOUT", "1500"),
            ("MAX_TIMEOUT", "9000"),
            ("MAX_BODY_BYTES", "1024"),
            ("MAX_STORED_BYTES", "0"),
            ("DEFAULT_SUBSCRIPTION_MODE", "all"),
        ]);
        assert_eq!(config.startup_error, None);
        assert_eq!(config.http.limits.default_wait_ms, 1500);
        assert_eq!(config.http.limits.max_wait_ms, 9000);
        assert_eq!(config.http.limits.max_body_bytes, 1024);
        assert_eq!(config.broker.max_stored_bytes, None);
        assert!(!config.broker.default_subscription_new);
        assert_eq!(config_of(&[]).startup_error, None);
        assert!(config_of(&[]).broker.default_subscription_new);
    }

    #[test]
    fn a_setting_that_cannot_be_read_stops_the_broker_naming_it() {
        for (name, value) in [
            ("DEFAULT_TIMEOUT", "abc"),
            ("MAX_TIMEOUT", "-1"),
            ("MAX_BODY_BYTES", "16MB"),
            ("MAX_STORED_BYTES", "1e9"),
            ("SEGMENT_CACHE_BYTES", "lots"),
            ("DEFAULT_SUBSCRIPTION_MODE", "NEW"),
            ("COMMIT_SHARING", "yes"),
            ("QUEEN_ENCRYPTION_KEY", "abc"),
            ("TXN_TIMEOUT_MS", "10s"),
        ] {
            let error = config_of(&[(name, value)]).startup_error;
            assert!(
                error.as_deref().is_some_and(|e| e.contains(name)),
                "{name}={value}: {error:?}"
            );
        }
    }

    #[test]
    fn the_transaction_timeout_is_the_default_unset_and_at_least_the_minimum() {
        assert_eq!(txn_timeout_ms(None), Ok(DEFAULT_TXN_TIMEOUT_MS));
        assert_eq!(txn_timeout_ms(Some("2500")), Ok(2500));
        assert_eq!(txn_timeout_ms(Some("5")), Ok(MIN_TXN_TIMEOUT_MS));
        assert!(txn_timeout_ms(Some("2.5"))
            .unwrap_err()
            .contains(TXN_TIMEOUT_VAR));
        assert_eq!(config_of(&[(TXN_TIMEOUT_VAR, "2500")]).startup_error, None);
    }

    #[test]
    fn commit_sharing_refuses_any_other_value_naming_the_variable() {
        for bad in ["yes", "ON", "true", "1", "Auto", "automatic", "of"] {
            let err = CommitSharing::parse(Some(bad)).unwrap_err();
            assert!(
                err.contains(COMMIT_SHARING_VAR) && err.contains(bad),
                "{err}"
            );
        }
    }
}
