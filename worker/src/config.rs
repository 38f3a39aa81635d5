//! Settings read from the Worker's environment (`[vars]` in `wrangler.toml`, secrets via `wrangler secret`).
//!
//! Every setting has a default, so a missing or unparsable variable never stops the broker; the defaults are
//! the ones in the wire contract (§1.3, §2, §7.3 of `shared/spec/wire-contract.md`).

use worker::Env;

/// Broker-wide limits and defaults handed to the engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerConfig {
    /// `DEFAULT_SUBSCRIPTION_MODE`: `new` (product default) or `all` (what Queen 0.15's tests need).
    pub default_subscription_mode: String,
    /// `DEFAULT_BATCH_SIZE`: pop batch when the client sends none (default 1).
    pub default_batch_size: u32,
    /// `DEFAULT_TIMEOUT`: long-poll deadline in ms when the client sends none (default 30000).
    pub default_timeout_ms: u64,
    /// `MAX_TIMEOUT`: long-poll deadlines are clamped to this many ms (default 60000).
    pub max_timeout_ms: u64,
    /// `RETENTION_INTERVAL`: ms between retention sweeps (default 300000).
    pub retention_interval_ms: u64,
    /// `EVICTION_INTERVAL`: ms between eviction sweeps (default 60000).
    pub eviction_interval_ms: u64,
    /// `MAX_BODY_BYTES`: largest request body accepted, in bytes (default 16 MiB).
    pub max_body_bytes: usize,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        BrokerConfig {
            default_subscription_mode: "new".into(),
            default_batch_size: 1,
            default_timeout_ms: 30_000,
            max_timeout_ms: 60_000,
            retention_interval_ms: 300_000,
            eviction_interval_ms: 60_000,
            max_body_bytes: 16 * 1024 * 1024,
        }
    }
}

impl BrokerConfig {
    /// Reads the settings from `env`, falling back to [`BrokerConfig::default`] field by field.
    pub fn from_env(env: &Env) -> Self {
        let d = BrokerConfig::default();
        let mode = var(env, "DEFAULT_SUBSCRIPTION_MODE")
            .filter(|m| m == "new" || m == "all")
            .unwrap_or(d.default_subscription_mode);
        BrokerConfig {
            default_subscription_mode: mode,
            default_batch_size: parsed(env, "DEFAULT_BATCH_SIZE").unwrap_or(d.default_batch_size),
            default_timeout_ms: parsed(env, "DEFAULT_TIMEOUT").unwrap_or(d.default_timeout_ms),
            max_timeout_ms: parsed(env, "MAX_TIMEOUT").unwrap_or(d.max_timeout_ms),
            retention_interval_ms: parsed(env, "RETENTION_INTERVAL")
                .unwrap_or(d.retention_interval_ms),
            eviction_interval_ms: parsed(env, "EVICTION_INTERVAL")
                .unwrap_or(d.eviction_interval_ms),
            max_body_bytes: parsed(env, "MAX_BODY_BYTES").unwrap_or(d.max_body_bytes),
        }
    }
}

/// The string value of a plain variable or a secret named `name`, if set and non-empty.
pub fn var(env: &Env, name: &str) -> Option<String> {
    env.var(name)
        .map(|v| v.to_string())
        .or_else(|_| env.secret(name).map(|v| v.to_string()))
        .ok()
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// True when the variable `name` is `true` or `1` (the contract's boolean rule).
pub fn flag(env: &Env, name: &str) -> bool {
    matches!(var(env, name).as_deref(), Some("true") | Some("1"))
}

fn parsed<T: std::str::FromStr>(env: &Env, name: &str) -> Option<T> {
    var(env, name).and_then(|v| v.parse().ok())
}
