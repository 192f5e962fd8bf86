//! A caller's value as JavaScript read it once: JSON data, and for anything JSON cannot
//! carry, what it is.
//!
//! Why not JSON alone? Options and records hold functions (`moduleLoader`,
//! `capacity.getCapacity`), class instances (a mapping store, a meter provider) and data,
//! and a rule needs to know which is which to say "must be a function", "must be a
//! string", "must be JSON data (a function is not)". JSON would drop a function and write
//! `NaN` as `null`; so `lib/facts.js` reads the value once, inside a guard, and writes
//! [`Fact`]s, and the rules (`core::factory`, `core::records`, `core::store_options`,
//! `core::telemetry`) read those. JavaScript decides nothing about them.

use crate::core::json::{join, FieldError};
use serde_json::{Map, Value};

/// A caller value as a rule reads it: JSON data, or what a value JSON cannot carry is.
///
/// Written by JavaScript (`lib/facts.js`) as JSON: `null`, booleans, finite numbers, strings and arrays as
/// themselves; an object as `{"o": [[key, fact], …]}` (its own enumerable keys, in order);
/// anything else as `{"t": kind}` with `kind` one of `undefined`, `function`, `symbol`,
/// `bigint`, `NaN`, `Infinity`, `-Infinity`, `instance` (an object of a class, not read)
/// or `cycle` (an object that contains itself).
#[derive(Debug, Clone, PartialEq)]
pub enum Fact {
    /// `null`.
    Null,
    /// A boolean.
    Bool(bool),
    /// A finite number.
    Number(f64),
    /// A string.
    Text(String),
    /// An array.
    List(Vec<Fact>),
    /// A plain object: its own enumerable keys, in order.
    Object(Vec<(String, Fact)>),
    /// Anything JSON cannot carry.
    Other(Other),
}

/// A value JSON cannot carry, by kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Other {
    /// `undefined` (a key set to it counts as absent, except that it is a key).
    Undefined,
    /// A function.
    Function,
    /// A symbol.
    Symbol,
    /// A BigInt.
    BigInt,
    /// `NaN`.
    NaN,
    /// `Infinity`.
    Infinity,
    /// `-Infinity`.
    NegInfinity,
    /// An object of a class (not read).
    Instance,
    /// An object that contains itself.
    Cycle,
}

impl Other {
    fn parse(kind: &str) -> Option<Other> {
        Some(match kind {
            "undefined" => Other::Undefined,
            "function" => Other::Function,
            "symbol" => Other::Symbol,
            "bigint" => Other::BigInt,
            "NaN" => Other::NaN,
            "Infinity" => Other::Infinity,
            "-Infinity" => Other::NegInfinity,
            "instance" => Other::Instance,
            "cycle" => Other::Cycle,
            _ => return None,
        })
    }

    /// What it is, as a refusal says it (`lib/serialize.js` names them the same way).
    fn what(self) -> &'static str {
        match self {
            Other::Undefined => "undefined",
            Other::Function => "a function",
            Other::Symbol => "a symbol",
            Other::BigInt => "a BigInt",
            Other::NaN => "NaN",
            Other::Infinity => "Infinity",
            Other::NegInfinity => "-Infinity",
            Other::Instance => "an object of a class",
            Other::Cycle => "a cycle",
        }
    }
}

/// Why a value is not JSON data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// A value JSON cannot carry, at its field.
    At(FieldError),
    /// An object that contains itself: the value cannot be written at all.
    Cycle,
}

impl Fact {
    /// Reads facts from their JSON text; None when the text is not facts (a bug).
    pub fn parse(text: &str) -> Option<Fact> {
        Fact::of(serde_json::from_str(text).ok()?)
    }

    /// Reads facts from their JSON value; None when it is not facts.
    pub fn of(v: Value) -> Option<Fact> {
        Some(match v {
            Value::Null => Fact::Null,
            Value::Bool(b) => Fact::Bool(b),
            Value::Number(n) => Fact::Number(n.as_f64()?),
            Value::String(s) => Fact::Text(s),
            Value::Array(items) => Fact::List(items.into_iter().map(Fact::of).collect::<Option<_>>()?),
            Value::Object(mut m) => match (m.remove("o"), m.remove("t"), m.is_empty()) {
                (Some(Value::Array(pairs)), None, true) => Fact::Object(
                    pairs
                        .into_iter()
                        .map(|pair| match pair {
                            Value::Array(kv) if kv.len() == 2 => {
                                let mut kv = kv.into_iter();
                                match (kv.next(), kv.next()) {
                                    (Some(Value::String(k)), Some(v)) => Some((k, Fact::of(v)?)),
                                    _ => None,
                                }
                            }
                            _ => None,
                        })
                        .collect::<Option<_>>()?,
                ),
                (None, Some(Value::String(kind)), true) => Fact::Other(Other::parse(&kind)?),
                _ => return None,
            },
        })
    }

    /// The member `key` of an object, unless it is absent or `undefined`.
    pub fn get(&self, key: &str) -> Option<&Fact> {
        match self {
            Fact::Object(members) => {
                members.iter().find(|(k, _)| k == key).map(|(_, v)| v).filter(|v| **v != Fact::Other(Other::Undefined))
            }
            _ => None,
        }
    }

    /// Its own keys (none for anything but a plain object).
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        let members: &[(String, Fact)] = match self {
            Fact::Object(members) => members,
            _ => &[],
        };
        members.iter().map(|(k, _)| k.as_str())
    }

    /// Whether it is an object: not null, not an array, not a function.
    pub fn is_object(&self) -> bool {
        matches!(self, Fact::Object(_) | Fact::Other(Other::Instance | Other::Cycle))
    }

    /// Whether it is a function.
    pub fn is_function(&self) -> bool {
        matches!(self, Fact::Other(Other::Function))
    }

    /// The value as JSON data, strictly: a value JSON cannot carry is refused at its field
    /// (`path`, `must be JSON data (a function is not)`), and an object that contains itself
    /// cannot be read at all. As `JSON.stringify` writes it: an `undefined` member is left
    /// out, an `undefined` element is `null`.
    pub fn to_json(&self, path: &str) -> Result<Value, Refused> {
        Ok(match self {
            Fact::Null => Value::Null,
            Fact::Bool(b) => Value::Bool(*b),
            Fact::Number(n) => serde_json::Number::from_f64(*n).map_or(Value::Null, Value::Number),
            Fact::Text(s) => Value::String(s.clone()),
            Fact::List(items) => Value::Array(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, f)| match f {
                        Fact::Other(Other::Undefined) => Ok(Value::Null),
                        f => f.to_json(&format!("{path}[{i}]")),
                    })
                    .collect::<Result<_, _>>()?,
            ),
            Fact::Object(members) => {
                let mut out = Map::new();
                for (k, v) in members {
                    if *v != Fact::Other(Other::Undefined) {
                        out.insert(k.clone(), v.to_json(&join(path, k))?);
                    }
                }
                Value::Object(out)
            }
            Fact::Other(Other::Cycle) => return Err(Refused::Cycle),
            Fact::Other(other) => {
                return Err(Refused::At(FieldError::new(path, format!("must be JSON data ({} is not)", other.what()))))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_read_every_kind_and_must_not_fire_on_text_that_is_not_facts() {
        let f = Fact::parse(r#"{"o":[["a",{"t":"function"}],["b",[1,null]],["c",{"t":"undefined"}]]}"#).unwrap();
        assert!(f.get("a").unwrap().is_function());
        assert_eq!(f.get("b"), Some(&Fact::List(vec![Fact::Number(1.0), Fact::Null])));
        assert_eq!(f.get("c"), None, "undefined is absent");
        assert_eq!(f.keys().collect::<Vec<_>>(), ["a", "b", "c"], "keys keep their order");
        for bad in [r#"{"a":1}"#, r#"{"t":"nope"}"#, r#"{"o":[["a"]]}"#, "not json"] {
            assert_eq!(Fact::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn must_fire_json_data_refuses_what_json_cannot_carry_at_its_field() {
        let f = Fact::parse(r#"{"o":[["a",{"o":[["b",[1,{"t":"NaN"}]]]}]]}"#).unwrap();
        let e = FieldError::new("x.a.b[1]", "must be JSON data (NaN is not)");
        assert_eq!(f.to_json("x"), Err(Refused::At(e)));
        assert_eq!(Fact::parse(r#"{"o":[["a",{"t":"cycle"}]]}"#).unwrap().to_json("x"), Err(Refused::Cycle));
    }

    #[test]
    fn must_not_fire_json_data_is_written_as_json_stringify_writes_it() {
        let f =
            Fact::parse(r#"{"o":[["a",[{"t":"undefined"},"s",true]],["u",{"t":"undefined"}],["n",null]]}"#).unwrap();
        assert_eq!(f.to_json("x").unwrap(), serde_json::json!({ "a": [null, "s", true], "n": null }));
    }
}
