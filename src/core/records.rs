//! What a mapping record and an intent record must hold when a caller hands one to a
//! store's `put` or `intent` (the router's own records are written natively).
//!
//! Why check before the write? A durable store commits the writes of one turn of the event
//! loop as one transaction (`lib/mappings.js`), so a record must be refused before it is
//! queued: one bad record never fails its neighbours. The same rule then guards the batch
//! itself (`binding/sqlite.rs` `checked_op`), so the two cannot drift apart. Errors name the
//! field, never its value.

use crate::core::facts::{Fact, Refused};
use crate::core::ids::{validate_provider_id, SandboxKey};
use crate::core::json::FieldError;

/// The message of a refused record: `invalid mapping record: <field> <expectation>`
/// (`INVALID_INPUT`).
pub fn message(e: &FieldError) -> String {
    format!("invalid mapping record: {} {}", e.field, e.expectation)
}

/// The fields of a record that must be strings.
const TEXT_FIELDS: [&str; 4] = ["id", "providerId", "providerSandboxId", "createdAt"];

fn unreadable(field: &str) -> FieldError {
    FieldError::new(field, "could not be read (a property access threw)")
}

fn text<'a>(record: &'a Fact, field: &str, expectation: &str) -> Result<&'a str, FieldError> {
    match record.get(field) {
        Some(Fact::Text(s)) => Ok(s),
        _ => Err(FieldError::new(field, expectation)),
    }
}

/// A record's own fields (None: it could not be read): an object whose `id`, `providerId`,
/// `providerSandboxId` and `createdAt` are strings. The in-memory store checks the rest
/// itself.
pub fn record(record: Option<&Fact>) -> Result<(), FieldError> {
    let r = record.ok_or_else(|| unreadable("record"))?;
    if !(r.is_object() || matches!(r, Fact::List(_))) {
        return Err(FieldError::new("record", "must be a string"));
    }
    for field in TEXT_FIELDS {
        text(r, field, "must be a string")?;
    }
    Ok(())
}

/// A record for the in-memory store: [`record`], and its labels JSON data.
pub fn memory_record(r: Option<&Fact>) -> Result<(), FieldError> {
    record(r)?;
    match r.and_then(|r| r.get("labels")).map(|l| l.to_json("labels")) {
        None | Some(Ok(_)) => Ok(()),
        Some(Err(Refused::At(e))) => Err(e),
        Some(Err(Refused::Cycle)) => {
            Err(FieldError::new("labels", "could not be read (a cycle, a throwing getter or toJSON)"))
        }
    }
}

/// A record for a durable store's batch: [`record`], its labels an object of strings
/// (absent: none), a well-formed `sbx_` id, a non-empty provider sandbox id.
pub fn put(r: Option<&Fact>) -> Result<(), FieldError> {
    record(r)?;
    let Some(r) = r else { return Err(unreadable("record")) };
    let labels_ok = match r.get("labels") {
        None | Some(Fact::Null) => true,
        Some(Fact::Object(members)) => members.iter().all(|(_, v)| matches!(v, Fact::Text(_))),
        Some(Fact::List(items)) => items.iter().all(|v| matches!(v, Fact::Text(_))),
        Some(_) => false,
    };
    if !labels_ok {
        return Err(FieldError::new("labels", "must be an object of strings"));
    }
    sandbox_id(text(r, "id", "must be a string")?)?;
    provider_sandbox_id(text(r, "providerSandboxId", "must be a string")?)
}

/// An intent record (None: it could not be read): an object with an `sbx_` id, a provider
/// id, the state `launching` or `failed`, finite times and pid, and string owner fields.
pub fn intent(i: Option<&Fact>) -> Result<(), FieldError> {
    let i = i.ok_or_else(|| unreadable("intent"))?;
    if !(i.is_object() || matches!(i, Fact::List(_))) {
        return Err(FieldError::new("intent", "must be an object"));
    }
    sandbox_id(text(i, "id", "must be an sbx_ id")?)?;
    provider_id(text(i, "providerId", "must be a provider id")?)?;
    intent_state(text(i, "state", "must be launching or failed")?)?;
    for field in ["startedAt", "expiresAt", "ownerPid"] {
        if !matches!(i.get(field), Some(Fact::Number(_))) {
            return Err(FieldError::new(field, "must be a finite number"));
        }
    }
    for field in ["ownerHost", "ownerSession"] {
        text(i, field, "must be a string")?;
    }
    Ok(())
}

/// A record's `id`: `sbx_` and 32 lowercase hex digits.
pub fn sandbox_id(id: &str) -> Result<(), FieldError> {
    SandboxKey::parse_checked(id).map(drop).map_err(|_| FieldError::new("id", "must be an sbx_ id"))
}

/// An intent's `providerId`: a valid provider id.
pub fn provider_id(id: &str) -> Result<(), FieldError> {
    validate_provider_id(id).map_err(|_| FieldError::new("providerId", "must be a provider id"))
}

/// A record's `providerSandboxId`: not empty.
pub fn provider_sandbox_id(id: &str) -> Result<(), FieldError> {
    if id.is_empty() {
        Err(FieldError::new("providerSandboxId", "must not be empty"))
    } else {
        Ok(())
    }
}

/// An intent's `state`: `launching` or `failed`.
pub fn intent_state(state: &str) -> Result<(), FieldError> {
    match state {
        "launching" | "failed" => Ok(()),
        _ => Err(FieldError::new("state", "must be launching or failed")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "sbx_0123456789abcdef0123456789abcdef";

    fn facts(text: &str) -> Fact {
        Fact::parse(text).unwrap()
    }

    fn put_of(labels: &str, id: &str, psid: &str) -> Fact {
        facts(&format!(
            r#"{{"o":[["id","{id}"],["providerId","p"],["providerSandboxId","{psid}"],["createdAt","t"],["labels",{labels}]]}}"#
        ))
    }

    #[test]
    fn must_fire_a_record_field_that_is_not_a_string_is_named() {
        let e = record(Some(&facts(r#"{"o":[["id",1]]}"#))).unwrap_err();
        assert_eq!(message(&e), "invalid mapping record: id must be a string");
        assert_eq!(record(Some(&Fact::Null)).unwrap_err().field, "record");
        assert_eq!(record(None).unwrap_err().expectation, "could not be read (a property access threw)");
    }

    #[test]
    fn must_not_fire_a_well_formed_record_passes_every_rule() {
        let r = put_of(r#"{"o":[["team","a"]]}"#, ID, "remote-1");
        assert_eq!(record(Some(&r)), Ok(()));
        assert_eq!(memory_record(Some(&r)), Ok(()));
        assert_eq!(put(Some(&r)), Ok(()));
        assert_eq!(put(Some(&put_of("null", ID, "remote-1"))), Ok(()));
    }

    #[test]
    fn must_fire_labels_that_are_not_data_or_not_strings_are_refused() {
        let e = memory_record(Some(&put_of(r#"{"o":[["team",{"t":"function"}]]}"#, ID, "r"))).unwrap_err();
        assert_eq!(
            (e.field.as_str(), e.expectation.as_str()),
            ("labels.team", "must be JSON data (a function is not)")
        );
        let e = memory_record(Some(&put_of(r#"{"t":"cycle"}"#, ID, "r"))).unwrap_err();
        assert_eq!(e.expectation, "could not be read (a cycle, a throwing getter or toJSON)");
        let e = put(Some(&put_of(r#"{"o":[["team",1]]}"#, ID, "r"))).unwrap_err();
        assert_eq!(message(&e), "invalid mapping record: labels must be an object of strings");
    }

    #[test]
    fn must_fire_a_durable_record_needs_an_sbx_id_and_a_provider_sandbox_id() {
        assert_eq!(put(Some(&put_of("null", "nope", "r"))).unwrap_err().field, "id");
        assert_eq!(put(Some(&put_of("null", ID, ""))).unwrap_err().expectation, "must not be empty");
    }

    #[test]
    fn must_fire_each_malformed_intent_field_and_must_not_fire_for_a_valid_intent() {
        let valid = format!(
            r#"[["id","{ID}"],["providerId","pool"],["state","launching"],["startedAt",1],["expiresAt",2],["ownerHost","h"],["ownerPid",3],["ownerSession","s"]]"#
        );
        assert_eq!(intent(Some(&facts(&format!(r#"{{"o":{valid}}}"#)))), Ok(()));
        for (field, bad) in [
            ("id", r#""x""#),
            ("providerId", r#""Bad Id""#),
            ("state", r#""done""#),
            ("ownerPid", r#"{"t":"NaN"}"#),
            ("ownerHost", "1"),
        ] {
            let text = valid.replacen(&format!(r#"["{field}","#), &format!(r#"["{field}",{bad}],["_{field}","#), 1);
            let e = intent(Some(&facts(&format!(r#"{{"o":{text}}}"#)))).unwrap_err();
            assert_eq!(e.field, field, "{text}");
        }
        assert_eq!(intent(Some(&facts("3"))).unwrap_err().field, "intent");
    }
}
