//! Strict, path-aware reading of JSON objects.
//!
//! Why not `#[derive(Deserialize)]` with `deny_unknown_fields`? The router must name the
//! exact field in every validation error (`requires.timeout.maxReadyLatencyMs`), suggest
//! the intended key for a misspelling (`requiredCapabilites`), treat `null` as an error
//! rather than "absent" (JSON turns `NaN` into `null`, and a silently dropped requirement
//! would widen eligibility), and never echo a value (values may be secrets). A small
//! reader does all four with less machinery than custom serde visitors.

use serde_json::{Map, Value};

/// A field that failed validation: its dotted path and what it must be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// Dotted path, e.g. `routing.strategy`.
    pub field: String,
    /// What the field must be, e.g. `must be one of cost, latency, reliability, balanced`.
    pub expectation: String,
}

impl FieldError {
    /// Builds a field error.
    pub fn new(field: impl Into<String>, expectation: impl Into<String>) -> Self {
        FieldError { field: field.into(), expectation: expectation.into() }
    }
}

/// Longest caller-supplied key (in characters) that a field path echoes; the rest is cut
/// and the cut marked, so reporting a multi-megabyte key costs nothing.
pub const MAX_ECHO: usize = 64;

/// `key` as a field path may show it: at most [`MAX_ECHO`] characters, then `…[+N bytes]`.
pub fn shown(key: &str) -> std::borrow::Cow<'_, str> {
    match key.char_indices().nth(MAX_ECHO) {
        None => std::borrow::Cow::Borrowed(key),
        Some((cut, _)) => std::borrow::Cow::Owned(format!("{}…[+{} bytes]", &key[..cut], key.len() - cut)),
    }
}

/// Joins a parent path and a (caller-supplied, so [`shown`]) key.
pub fn join(path: &str, key: &str) -> String {
    let key = shown(key);
    if path.is_empty() {
        key.into_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// A JSON object whose keys were checked against an allowlist.
pub struct Obj<'a> {
    map: &'a Map<String, Value>,
    path: String,
}

/// Reads `value` as an object whose keys all belong to `allowed`.
pub fn object<'a>(value: &'a Value, path: &str, allowed: &[&str]) -> Result<Obj<'a>, FieldError> {
    let map = match value {
        Value::Object(map) => map,
        _ => return Err(FieldError::new(display_path(path), "must be an object")),
    };
    for key in map.keys() {
        if !allowed.contains(&key.as_str()) {
            let mut expectation = String::from("is not a known field");
            if let Some(s) = suggest(key, allowed) {
                expectation.push_str(&format!(" (did you mean {s}?)"));
            }
            return Err(FieldError::new(join(path, key), expectation));
        }
    }
    Ok(Obj { map, path: path.to_string() })
}

fn display_path(path: &str) -> String {
    if path.is_empty() {
        "(root)".to_string()
    } else {
        path.to_string()
    }
}

/// The closest allowed key within an edit distance of 3, if any.
///
/// Suggestions are for typos: a key more than 3 characters longer than every allowed key
/// cannot be within distance 3 of any, so it is skipped after reading at most that many
/// characters. The work is bounded by the allowed keys' lengths, whatever the key's size.
fn suggest<'k>(key: &str, allowed: &[&'k str]) -> Option<&'k str> {
    let longest = allowed.iter().map(|a| a.chars().count()).max().unwrap_or(0);
    if key.chars().nth(longest + MAX_SUGGEST_DISTANCE).is_some() {
        return None;
    }
    allowed
        .iter()
        .map(|a| (edit_distance(key, a), *a))
        .filter(|(d, _)| *d <= MAX_SUGGEST_DISTANCE)
        .min()
        .map(|(_, a)| a)
}

/// Largest edit distance at which an unknown key gets a suggestion.
const MAX_SUGGEST_DISTANCE: usize = 3;

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

impl<'a> Obj<'a> {
    /// The dotted path of this object.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The dotted path of one of its keys.
    pub fn field(&self, key: &str) -> String {
        join(&self.path, key)
    }

    /// The raw value of `key`, if present (a `null` is present).
    pub fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key)
    }

    /// A nested object, if present.
    pub fn object(&self, key: &str, allowed: &[&str]) -> Result<Option<Obj<'a>>, FieldError> {
        match self.map.get(key) {
            None => Ok(None),
            Some(v) => object(v, &self.field(key), allowed).map(Some),
        }
    }

    /// An optional finite, non-negative number.
    pub fn non_negative(&self, key: &str) -> Result<Option<f64>, FieldError> {
        match self.map.get(key) {
            None => Ok(None),
            Some(Value::Number(n)) => match n.as_f64() {
                Some(x) if x.is_finite() && x >= 0.0 => Ok(Some(x)),
                _ => Err(FieldError::new(self.field(key), "must be a finite number >= 0")),
            },
            Some(_) => Err(FieldError::new(
                self.field(key),
                "must be a finite number >= 0 (null, NaN and Infinity are refused)",
            )),
        }
    }

    /// An optional integer within `[min, max]`.
    pub fn integer_in(&self, key: &str, min: i64, max: i64) -> Result<Option<i64>, FieldError> {
        let expectation = || format!("must be an integer from {min} to {max}");
        match self.map.get(key) {
            None => Ok(None),
            Some(Value::Number(n)) => {
                let x = n.as_f64().filter(|x| x.fract() == 0.0 && x.is_finite());
                match x {
                    Some(x) if x >= min as f64 && x <= max as f64 => Ok(Some(x as i64)),
                    _ => Err(FieldError::new(self.field(key), expectation())),
                }
            }
            Some(_) => Err(FieldError::new(self.field(key), expectation())),
        }
    }

    /// An optional boolean.
    pub fn boolean(&self, key: &str) -> Result<Option<bool>, FieldError> {
        match self.map.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(FieldError::new(self.field(key), "must be a boolean")),
        }
    }

    /// An optional non-empty string.
    pub fn string(&self, key: &str) -> Result<Option<&'a str>, FieldError> {
        match self.map.get(key) {
            None => Ok(None),
            Some(Value::String(s)) if !s.is_empty() => Ok(Some(s)),
            Some(_) => Err(FieldError::new(self.field(key), "must be a non-empty string")),
        }
    }

    /// An optional string drawn from `choices`.
    pub fn choice(&self, key: &str, choices: &[&'static str]) -> Result<Option<&'static str>, FieldError> {
        match self.map.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => match choices.iter().find(|c| **c == s.as_str()) {
                Some(c) => Ok(Some(c)),
                None => Err(FieldError::new(self.field(key), one_of(choices))),
            },
            Some(_) => Err(FieldError::new(self.field(key), one_of(choices))),
        }
    }

    /// An optional array of non-empty strings (duplicates removed, order kept).
    pub fn strings(&self, key: &str) -> Result<Option<Vec<String>>, FieldError> {
        match self.map.get(key) {
            None => Ok(None),
            Some(Value::Array(items)) => {
                let mut out: Vec<String> = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    match item {
                        Value::String(s) if !s.is_empty() => {
                            if !out.iter().any(|o| o == s) {
                                out.push(s.clone());
                            }
                        }
                        _ => {
                            return Err(FieldError::new(
                                format!("{}[{i}]", self.field(key)),
                                "must be a non-empty string",
                            ))
                        }
                    }
                }
                Ok(Some(out))
            }
            Some(_) => Err(FieldError::new(self.field(key), "must be an array of strings")),
        }
    }

    /// An optional array of strings, each drawn from `choices`.
    pub fn choices(&self, key: &str, choices: &[&'static str]) -> Result<Option<Vec<&'static str>>, FieldError> {
        let Some(items) = self.strings(key)? else { return Ok(None) };
        let mut out = Vec::with_capacity(items.len());
        for (i, s) in items.iter().enumerate() {
            match choices.iter().find(|c| **c == s.as_str()) {
                Some(c) => out.push(*c),
                None => return Err(FieldError::new(format!("{}[{i}]", self.field(key)), one_of(choices))),
            }
        }
        Ok(Some(out))
    }

    /// An optional object of string values (keys kept in input order).
    pub fn string_map(&self, key: &str) -> Result<Option<Vec<(String, String)>>, FieldError> {
        match self.map.get(key) {
            None => Ok(None),
            Some(Value::Object(map)) => {
                let mut out = Vec::with_capacity(map.len());
                for (k, v) in map {
                    match v {
                        Value::String(s) => out.push((k.clone(), s.clone())),
                        _ => return Err(FieldError::new(join(&self.field(key), k), "must be a string")),
                    }
                }
                Ok(Some(out))
            }
            Some(_) => Err(FieldError::new(self.field(key), "must be an object of strings")),
        }
    }
}

/// A caller's input value read as JSON (`text`; None: the value had no JSON form), or
/// `INVALID_INPUT` naming `field`.
pub fn input(text: Option<&str>, field: &str) -> Result<Value, crate::core::error::Failure> {
    let refused = |expectation: &str| -> crate::core::error::Failure {
        crate::core::CoreError::InvalidInput { field: field.to_string(), expectation: expectation.to_string() }.into()
    };
    let text = text.ok_or_else(|| refused("is not JSON-serializable"))?;
    serde_json::from_str(text).map_err(|_| refused("is not JSON"))
}

/// `must be one of a, b, c`.
pub fn one_of(choices: &[&str]) -> String {
    format!("must be one of {}", choices.join(", "))
}

/// One step of a field path: a key, or an array index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    /// An object's key.
    Key(String),
    /// An array's index.
    Index(u64),
}

/// A field path as the native readers name fields: keys dotted (each shown at most 64
/// characters), an array element as `name[i]`, `prefix` first; the root is `(root)`.
pub fn field_path(prefix: &str, segments: &[Segment]) -> String {
    let mut out = prefix.to_string();
    for s in segments {
        match s {
            Segment::Index(i) => out.push_str(&format!("[{i}]")),
            Segment::Key(k) if out.is_empty() => out.push_str(&shown(k)),
            Segment::Key(k) => {
                out.push('.');
                out.push_str(&shown(k));
            }
        }
    }
    if out.is_empty() {
        "(root)".to_string()
    } else {
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn must_fire_a_huge_unknown_key_is_cut_in_the_field_and_gets_no_suggestion() {
        let key = format!("requiredCapabilities{}", "x".repeat(1_000_000));
        let v = json!({ key.clone(): 1 });
        let err = object(&v, "requires", &["requiredCapabilities"]).err().unwrap();
        assert!(err.field.len() < 200, "field echoes {} bytes", err.field.len());
        assert!(err.field.ends_with(&format!("…[+{} bytes]", key.len() - MAX_ECHO)), "{}", err.field);
        assert!(!err.expectation.contains("did you mean"), "{}", err.expectation);
    }

    #[test]
    fn must_not_fire_a_key_of_max_echo_characters_is_shown_whole_and_typos_still_get_suggestions() {
        let key = "é".repeat(MAX_ECHO);
        assert_eq!(shown(&key), key.as_str());
        assert!(shown(&"é".repeat(MAX_ECHO + 1)).ends_with("…[+2 bytes]"));
        assert_eq!(suggest("requiredCapabilitiesxxx", &["requiredCapabilities"]), Some("requiredCapabilities"));
        assert_eq!(suggest("requiredCapabilitiesxxxx", &["requiredCapabilities"]), None);
    }

    #[test]
    fn unknown_key_is_named_with_a_suggestion() {
        let v = json!({"requiredCapabilites": ["pty"]});
        let err = object(&v, "requires", &["requiredCapabilities", "forbiddenCapabilities"]).err().unwrap();
        assert_eq!(err.field, "requires.requiredCapabilites");
        assert!(err.expectation.contains("did you mean requiredCapabilities"), "{}", err.expectation);
    }

    #[test]
    fn known_keys_pass() {
        let v = json!({"requiredCapabilities": ["pty"]});
        assert!(object(&v, "requires", &["requiredCapabilities"]).is_ok());
    }

    #[test]
    fn null_numbers_are_refused_not_dropped() {
        let v = json!({"cpu": null});
        let o = object(&v, "resources", &["cpu"]).unwrap();
        assert_eq!(o.non_negative("cpu").unwrap_err().field, "resources.cpu");
        let v = json!({"cpu": -1});
        let o = object(&v, "resources", &["cpu"]).unwrap();
        assert!(o.non_negative("cpu").is_err());
        let v = json!({"cpu": 2.5});
        let o = object(&v, "resources", &["cpu"]).unwrap();
        assert_eq!(o.non_negative("cpu").unwrap(), Some(2.5));
    }

    #[test]
    fn integer_range_is_inclusive() {
        let v = json!({"a": 1, "b": 10, "c": 0, "d": 11, "e": 2.5});
        let o = object(&v, "", &["a", "b", "c", "d", "e"]).unwrap();
        assert_eq!(o.integer_in("a", 1, 10).unwrap(), Some(1));
        assert_eq!(o.integer_in("b", 1, 10).unwrap(), Some(10));
        assert!(o.integer_in("c", 1, 10).is_err());
        assert!(o.integer_in("d", 1, 10).is_err());
        assert!(o.integer_in("e", 1, 10).is_err());
    }
}
