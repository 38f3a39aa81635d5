//! The Worker's variables and secrets, read from its `Env`: plain values ([`var`], [`flag`]) and the
//! settings made from them ([`WorkerConfig::from_env`], [`shard_count`]). What the values mean is decided
//! without I/O in [`crate::config`] and [`crate::shards`].

use worker::Env;

use crate::config::{is_true, WorkerConfig};
use crate::shards::parse_shard_count;

/// The string value of a plain variable or a secret named `name`, if set and non-empty.
pub fn var(env: &Env, name: &str) -> Option<String> {
    env.var(name)
        .map(|v| v.to_string())
        .or_else(|_| env.secret(name).map(|v| v.to_string()))
        .ok()
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// True when the variable `name` is `true` or `1` (the contract's boolean rule, [`is_true`]).
pub fn flag(env: &Env, name: &str) -> bool {
    is_true(var(env, name).as_deref())
}

/// The shard count from the var `SHARDS` ([`parse_shard_count`]).
pub fn shard_count(env: &Env) -> Result<u16, String> {
    parse_shard_count(var(env, "SHARDS").as_deref())
}

impl WorkerConfig {
    /// Reads the settings from `env` ([`WorkerConfig::from_vars`]); `worker_id` is reported by `/health`,
    /// `now_ms` starts the uptime.
    pub fn from_env(env: &Env, worker_id: String, now_ms: i64) -> Self {
        WorkerConfig::from_vars(|name| var(env, name), worker_id, now_ms)
    }
}
