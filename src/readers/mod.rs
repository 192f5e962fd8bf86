//! Builtin, read-only capacity readers: list a provider account's sandboxes over HTTP and
//! turn the inventory into a [`Measurement`] of account-wide usage against a *configured*
//! limit.
//!
//! Why do readers need a configured limit at all? No provider here exposes a quota that an
//! ordinary API key can read (Daytona's usage endpoint is undocumented for API keys; E2B,
//! Microsandbox and Agent37 have none), and published tiers change with billing. So an
//! inventory only ever yields `used`; the `limit` comes from the caller's verified
//! configuration. A missing limit is `unknown: LIMIT_NOT_CONFIGURED`, decided before any
//! HTTP: never zero, never a guessed tier.
//!
//! Why Rust and tokio rather than JS `fetch`? A Daytona organization can hold ten thousand
//! sandboxes across fifty pages; parsing those bodies with serde into structs that keep only
//! the few needed fields runs on tokio's workers, so the Node event loop never stalls on a
//! read. The caller bounds each read with a deadline by dropping this future, which drops
//! the in-flight request and closes its connection (see `src/binding/capacity.rs`).
//!
//! Error policy: a reader never fails and never panics on provider input. Every problem is a
//! measurement: `unknown` with a reason ([`UnknownReason`]). Its configuration was validated
//! once, when the reader was made ([`config`]: negative, non-finite or mistyped numbers,
//! unknown keys, a dimension the provider cannot measure are refused there, naming the
//! field), so a read never meets an invalid one. Nothing produced here contains the API
//! key: it only ever becomes a sensitive header value.
//!
//! Layout, one way (an arrow is "uses"; this file is the dispatch on top, [`read`] and
//! [`find`], and no reader uses it):
//!
//! ```text
//! config ← list, slots        http, stamp
//! config, list, http, stamp, slots ← daytona, e2b, microsandbox, agent37 ← (this file)
//! ```
//!
//! - `config`: the kinds and a reader's configuration, validated once;
//! - `http`: the shared client, status mapping, and the [`http::Fetch`] seam that unit tests
//!   replace with in-memory pages;
//! - `list`: what every list call shares (URL, page size, the page guard, body parsing);
//! - `slots`: the instance-counting readers' plan and measurement;
//! - `stamp`: the stamp rule the finders share;
//! - one file per provider wire shape (each with its reader and its finder);
//! - `daytona_summary`: the display helpers, which are not used for admission.

pub mod agent37;
pub mod config;
pub mod daytona;
pub mod daytona_summary;
pub mod e2b;
pub mod http;
pub mod list;
pub mod microsandbox;
pub mod slots;
pub mod stamp;
#[cfg(test)]
pub(crate) mod test_support;

use crate::core::capacity::{Measurement, UnknownReason};
use config::{Kind, ReaderConfig};
use stamp::Found;

/// Reads one provider account's capacity with its validated configuration; `api_key` is
/// only ever sent as the provider's auth header.
///
/// Never fails: Vercel and Freestyle are `NOT_SUPPORTED` (no request), missing limits or
/// demand are decided before any request. This future has no deadline of its own: the
/// caller drops it to cancel the read.
pub async fn read(cfg: &ReaderConfig, api_key: &str) -> Measurement {
    match cfg.kind {
        Kind::Daytona => daytona::read(cfg, api_key).await,
        Kind::E2b => e2b::read(cfg, api_key).await,
        Kind::Microsandbox => microsandbox::read(cfg, api_key).await,
        Kind::Agent37 => agent37::read(cfg, api_key).await,
        Kind::Vercel | Kind::Freestyle => Measurement::Unknown(UnknownReason::NotSupported),
    }
}

/// Lists the stamped sandboxes of one account with its validated configuration (limits and
/// demand do not apply). Vercel and Freestyle are `NOT_SUPPORTED` (the caller falls back to
/// the runtime's own label search). No deadline here: the caller drops the future to cancel.
pub async fn find(cfg: &ReaderConfig, api_key: &str, fleet: &str) -> Result<Vec<Found>, UnknownReason> {
    match cfg.kind {
        Kind::Daytona => daytona::find(cfg, api_key, fleet).await,
        Kind::E2b => e2b::find(cfg, api_key, fleet).await,
        Kind::Microsandbox => microsandbox::find(cfg, api_key, fleet).await,
        Kind::Agent37 => agent37::find(cfg, api_key, fleet).await,
        Kind::Vercel | Kind::Freestyle => Err(UnknownReason::NotSupported),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn must_fire_vercel_and_freestyle_are_not_supported_without_a_request() {
        for kind in ["vercel", "freestyle"] {
            // Nothing listens on port 9: a request would be READ_FAILED.
            let cfg = test_support::config(kind, json!({"baseUrl": "http://127.0.0.1:9", "limits": {"sandboxes": 5}}));
            let m = test_support::block_on(read(&cfg, "k"));
            assert_eq!(m, Measurement::Unknown(UnknownReason::NotSupported), "{kind}");
            assert_eq!(test_support::block_on(find(&cfg, "k", "f")), Err(UnknownReason::NotSupported), "{kind}");
        }
    }

    #[test]
    fn must_not_fire_a_reader_with_a_list_api_asks_its_account() {
        for kind in ["daytona", "e2b", "microsandbox", "agent37"] {
            let limits = if kind == "daytona" { json!({"cpu": 1}) } else { json!({"sandboxes": 1}) };
            let cfg = test_support::config(
                kind,
                json!({"baseUrl": "http://127.0.0.1:9", "limits": limits, "demand": limits}),
            );
            let m = test_support::block_on(read(&cfg, "k"));
            assert_eq!(m, Measurement::Unknown(UnknownReason::ReadFailed), "{kind}");
        }
    }
}
