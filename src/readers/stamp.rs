//! The stamp rule the finders share: which listed sandbox carries the router's stamp, and
//! what a finder reports of it.
//!
//! Finders list a provider account's sandboxes that carry the router's stamp, through the
//! same list APIs (and credentials) the capacity readers use (each provider's file; the
//! dispatch is `readers::find`).
//!
//! Why not the adapters' `findAllByLabels`? Label search is not reliable on every adapter:
//! the published E2B adapter hands the SDK a pre-serialized metadata filter that the SDK
//! iterates as an object, so it finds nothing (`../shared/reference/sandbox-runtime-port.md`,
//! point 5). The list APIs return each sandbox's labels (Daytona, Microsandbox) or metadata
//! (E2B, Agent37), so the stamp can be filtered server-side where the API offers it and is
//! always checked again here, item by item.
//!
//! What counts as stamped: the fleet label equals the router's fleet AND the id label is a
//! well-formed `sbx_` id. A server that ignores the filter, or a sandbox that carries only
//! one of the two labels, yields nothing: reconcile can only ever act on sandboxes that
//! carry the whole stamp.
//!
//! Errors follow the readers' policy: never a failure, never provider text; an unlistable
//! account is `unknown` with a reason ([`UnknownReason`]).

use crate::core::capacity::UnknownReason;
use crate::core::ids::is_sandbox_id;
use crate::core::request::{SANDBOX_FLEET_LABEL, SANDBOX_ID_LABEL};
use serde_json::{Map, Value};

/// One stamped sandbox, as listed.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    /// The provider's own sandbox id.
    pub provider_sandbox_id: String,
    /// The router's `sbx_…` id from the id label.
    pub sandbox_id: String,
    /// Creation time in epoch ms, when the list reports one that parses.
    pub created_at_ms: Option<f64>,
}

/// Longest provider sandbox id accepted from a list (longer is `MALFORMED`).
const MAX_PROVIDER_ID_LEN: usize = 256;

/// The stamp's `sbx_` id when `labels` carry the whole stamp of `fleet`, else `None`.
pub fn stamped_id(labels: Option<&Map<String, Value>>, fleet: &str) -> Option<String> {
    let labels = labels?;
    if labels.get(SANDBOX_FLEET_LABEL).and_then(Value::as_str) != Some(fleet) {
        return None;
    }
    let id = labels.get(SANDBOX_ID_LABEL)?.as_str()?;
    is_sandbox_id(id).then(|| id.to_string())
}

/// Adds `(provider id, labels, created)` to `out` when stamped; a provider id that is empty,
/// too long or holds control characters makes the list `MALFORMED`.
pub(crate) fn collect(
    out: &mut Vec<Found>,
    provider_sandbox_id: &str,
    labels: Option<&Map<String, Value>>,
    fleet: &str,
    created_at_ms: Option<f64>,
) -> Result<(), UnknownReason> {
    let Some(sandbox_id) = stamped_id(labels, fleet) else { return Ok(()) };
    if provider_sandbox_id.is_empty()
        || provider_sandbox_id.len() > MAX_PROVIDER_ID_LEN
        || provider_sandbox_id.chars().any(char::is_control)
    {
        return Err(UnknownReason::Malformed);
    }
    out.push(Found { provider_sandbox_id: provider_sandbox_id.to_string(), sandbox_id, created_at_ms });
    Ok(())
}

/// One handle a runtime's own label search answered (the fallback finder of a pool without
/// a native one), as it is judged.
#[derive(Debug, Clone, PartialEq)]
pub struct Handle {
    /// The provider's own sandbox id.
    pub provider_sandbox_id: String,
    /// The stamp's `sbx_` id; `None` when the handle carried no labels to check.
    pub sandbox_id: Option<String>,
    /// Creation time in epoch ms, when the handle reports one.
    pub created_at_ms: Option<f64>,
    /// Whether the whole stamp was seen on the handle.
    pub verified: bool,
}

/// Judges a runtime's `findAllByLabels` answer, read by `lib/finders.js` into
/// `[{ id, labels, createdAtMs }, …]` (`null` for an item that is not an object; `labels`
/// null when the handle carried none). The port's handles carry no labels, so a handle is
/// trusted as stamped only when it carries `labels` with the whole stamp ([`stamped_id`]);
/// one whose labels show another stamp (a search that ignored the filter) is left out; one
/// without labels is kept unverified (it can be matched to a mapping by its provider id,
/// never reclaimed). Anything that is not a list of handles with a non-empty string id is
/// `MALFORMED`.
pub fn judge_handles(answer: &Value, fleet: &str) -> Result<Vec<Handle>, UnknownReason> {
    let Value::Array(items) = answer else { return Err(UnknownReason::Malformed) };
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let h = item.as_object().ok_or(UnknownReason::Malformed)?;
        let id = h.get("id").and_then(Value::as_str).filter(|s| !s.is_empty()).ok_or(UnknownReason::Malformed)?;
        let created_at_ms = h.get("createdAtMs").and_then(Value::as_f64).filter(|x| x.is_finite());
        let (sandbox_id, verified) = match h.get("labels").and_then(Value::as_object) {
            None => (None, false),
            Some(labels) => match stamped_id(Some(labels), fleet) {
                None => continue,
                Some(sbx) => (Some(sbx), true),
            },
        };
        out.push(Handle { provider_sandbox_id: id.to_string(), sandbox_id, created_at_ms, verified });
    }
    Ok(out)
}

/// `{"agent-relay-sbx-fleet":"<fleet>"}`: the JSON label filter Daytona and Microsandbox take.
pub(crate) fn fleet_filter_json(fleet: &str) -> String {
    let mut m = Map::new();
    m.insert(SANDBOX_FLEET_LABEL.to_string(), Value::String(fleet.to_string()));
    Value::Object(m).to_string()
}

/// Epoch ms of an RFC 3339 timestamp (`2026-01-01T00:00:00Z`, fractions and offsets
/// allowed), whole milliseconds; `None` when it does not parse. One parser serves the
/// readers and the summary: the strict one of `core::clock`.
pub fn parse_rfc3339_ms(s: &str) -> Option<f64> {
    crate::core::clock::parse_rfc3339_ms(s).map(f64::floor)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const ID: &str = "sbx_0123456789abcdef0123456789abcdef";

    #[test]
    fn must_fire_the_whole_stamp_of_our_fleet_is_found() {
        let l = json!({SANDBOX_FLEET_LABEL: "prod", SANDBOX_ID_LABEL: ID, "team": "x"});
        assert_eq!(stamped_id(l.as_object(), "prod").as_deref(), Some(ID));
    }

    #[test]
    fn must_not_fire_a_partial_foreign_or_malformed_stamp_is_not_found() {
        for l in [
            json!({SANDBOX_ID_LABEL: ID}),
            json!({SANDBOX_FLEET_LABEL: "prod"}),
            json!({SANDBOX_FLEET_LABEL: "other", SANDBOX_ID_LABEL: ID}),
            json!({SANDBOX_FLEET_LABEL: "prod", SANDBOX_ID_LABEL: "sbx_NOT"}),
            json!({SANDBOX_FLEET_LABEL: "prod", SANDBOX_ID_LABEL: 7}),
            json!({}),
        ] {
            assert_eq!(stamped_id(l.as_object(), "prod"), None, "{l}");
        }
        assert_eq!(stamped_id(None, "prod"), None);
    }

    #[test]
    fn must_fire_a_handle_with_the_whole_stamp_is_verified_and_one_without_labels_is_kept_unverified() {
        let answer = json!([
            {"id": "a", "labels": {SANDBOX_FLEET_LABEL: "prod", SANDBOX_ID_LABEL: ID}, "createdAtMs": 1000},
            {"id": "b", "labels": null, "createdAtMs": null},
        ]);
        assert_eq!(
            judge_handles(&answer, "prod"),
            Ok(vec![
                Handle {
                    provider_sandbox_id: "a".into(),
                    sandbox_id: Some(ID.into()),
                    created_at_ms: Some(1000.0),
                    verified: true
                },
                Handle { provider_sandbox_id: "b".into(), sandbox_id: None, created_at_ms: None, verified: false },
            ])
        );
    }

    #[test]
    fn must_not_fire_a_handle_of_another_stamp_is_left_out_and_a_non_handle_is_malformed() {
        let other = json!([{"id": "a", "labels": {SANDBOX_FLEET_LABEL: "other", SANDBOX_ID_LABEL: ID}},
                           {"id": "b", "labels": {SANDBOX_FLEET_LABEL: "prod", SANDBOX_ID_LABEL: "sbx_x"}}]);
        assert_eq!(judge_handles(&other, "prod"), Ok(vec![]));
        for bad in [json!({}), json!([null]), json!([{"id": ""}]), json!([{"id": 5}]), json!([{"labels": null}])] {
            assert_eq!(judge_handles(&bad, "prod"), Err(UnknownReason::Malformed), "{bad}");
        }
    }

    #[test]
    fn rfc3339_parses_fractions_and_offsets() {
        assert_eq!(parse_rfc3339_ms("1970-01-01T00:00:00Z"), Some(0.0));
        assert_eq!(parse_rfc3339_ms("1970-01-01T00:00:01.5Z"), Some(1500.0));
        assert_eq!(parse_rfc3339_ms("2026-01-01T00:00:00.000Z"), Some(1_767_225_600_000.0));
        assert_eq!(parse_rfc3339_ms("2026-01-01T01:00:00+01:00"), Some(1_767_225_600_000.0));
        assert_eq!(parse_rfc3339_ms("2024-02-29T12:00:00.123456Z"), Some(1_709_208_000_123.0));
        for bad in ["", "yesterday", "2026-13-01T00:00:00Z", "2026-01-01T00:00:00", "2026-01-01T00:00:00.Z"] {
            assert_eq!(parse_rfc3339_ms(bad), None, "{bad}");
        }
    }

    #[test]
    fn must_fire_a_stamped_item_with_an_unusable_provider_id_is_malformed() {
        let l = json!({SANDBOX_FLEET_LABEL: "f", SANDBOX_ID_LABEL: ID});
        let mut out = vec![];
        assert_eq!(collect(&mut out, "", l.as_object(), "f", None), Err(UnknownReason::Malformed));
        assert_eq!(collect(&mut out, "a\nb", l.as_object(), "f", None), Err(UnknownReason::Malformed));
        assert_eq!(collect(&mut out, &"x".repeat(257), l.as_object(), "f", None), Err(UnknownReason::Malformed));
        assert_eq!(collect(&mut out, "ok", l.as_object(), "f", None), Ok(()));
        // An unstamped item is skipped whatever its id.
        assert_eq!(collect(&mut out, "", None, "f", None), Ok(()));
        assert_eq!(out.len(), 1);
    }
}
