//! The one writer of the core's values into JavaScript objects: an event's documented
//! object and an error's own properties are both written field by field through the
//! core's sinks (`core::events::FieldSink`, `core::error::FaultSink`), so neither shape is
//! written twice (once in Rust, once in JavaScript). And the one reader of a field path
//! JavaScript hands over (`segments_of`). A leaf: it uses only the core.

use crate::core::error::{AttemptFact, FaultSink, PoolRejection, SkipFact};
use crate::core::events::{Emitted, FieldSink, PoolId, ReasonFact};
use napi::bindgen_prelude::{Array, JsObjectValue, Null, Object, ToNapiValue};
use napi::Env;

/// A JavaScript object being written; the first failure to set a property is kept.
pub struct JsFields<'env> {
    env: &'env Env,
    /// The object.
    pub object: Object<'env>,
    failed: Option<napi::Error>,
}

impl<'env> JsFields<'env> {
    /// Writes into `object`.
    pub fn into(env: &'env Env, object: Object<'env>) -> Self {
        JsFields { env, object, failed: None }
    }

    /// Writes into a new plain object.
    pub fn new(env: &'env Env) -> napi::Result<Self> {
        Ok(JsFields::into(env, Object::new(env)?))
    }

    /// The object, or the first failure.
    pub fn finish(self) -> napi::Result<Object<'env>> {
        match self.failed {
            Some(e) => Err(e),
            None => Ok(self.object),
        }
    }

    fn set<V: ToNapiValue>(&mut self, name: &str, value: V) {
        if self.failed.is_none() {
            if let Err(e) = self.object.set_named_property(name, value) {
                self.failed = Some(e);
            }
        }
    }

    fn array_of<T>(&mut self, values: &[T], item: impl Fn(&mut JsFields<'env>, &T)) -> napi::Result<Array<'env>> {
        let mut out = self.env.create_array(values.len() as u32)?;
        for (i, v) in values.iter().enumerate() {
            let mut o = JsFields::new(self.env)?;
            item(&mut o, v);
            out.set(i as u32, o.finish()?)?;
        }
        Ok(out)
    }

    fn set_array<T>(&mut self, name: &str, values: &[T], item: impl Fn(&mut JsFields<'env>, &T)) {
        match self.array_of(values, item) {
            Ok(a) => self.set(name, a),
            Err(e) => self.failed = self.failed.take().or(Some(e)),
        }
    }
}

impl FieldSink for JsFields<'_> {
    fn str(&mut self, name: &'static str, value: &str) {
        self.set(name, value);
    }
    fn num(&mut self, name: &'static str, value: f64) {
        self.set(name, value);
    }
    fn bool(&mut self, name: &'static str, value: bool) {
        self.set(name, value);
    }
    fn null(&mut self, name: &'static str) {
        self.set(name, Null);
    }
    fn strs(&mut self, name: &'static str, values: &[PoolId]) {
        let v: Vec<&str> = values.iter().map(|s| &**s).collect();
        self.set(name, v);
    }
    fn reasons(&mut self, name: &'static str, values: &[ReasonFact]) {
        self.set_array(name, values, |o, r| {
            o.str("code", r.code);
            o.str("detail", &r.detail);
        });
    }
    fn key(&mut self, name: &'static str, label: &str, value: &str) {
        match JsFields::new(self.env) {
            Ok(mut o) => {
                o.str("label", label);
                o.str("value", value);
                match o.finish() {
                    Ok(k) => self.set(name, k),
                    Err(e) => self.failed = self.failed.take().or(Some(e)),
                }
            }
            Err(e) => self.failed = self.failed.take().or(Some(e)),
        }
    }
}

impl FaultSink for JsFields<'_> {
    fn pool_rejections(&mut self, name: &'static str, values: &[PoolRejection]) {
        self.set_array(name, values, |o, r| {
            o.str("providerId", &r.provider_id);
            o.reasons("reasons", &r.reasons);
        });
    }
    fn attempts(&mut self, name: &'static str, values: &[AttemptFact]) {
        self.set_array(name, values, |o, a| {
            o.str("providerId", &a.provider_id);
            o.str("code", &a.code);
            o.bool("retryable", a.retryable);
        });
    }
    fn skips(&mut self, name: &'static str, values: &[SkipFact]) {
        self.set_array(name, values, |o, s| {
            o.str("providerId", &s.provider_id);
            o.str("status", s.status);
            o.str("reason", &s.reason);
        });
    }
}

/// The documented objects of `events`, in order.
pub fn events_array<'env>(env: &'env Env, events: &[Emitted]) -> napi::Result<Array<'env>> {
    let mut out = env.create_array(events.len() as u32)?;
    for (i, e) in events.iter().enumerate() {
        let mut o = JsFields::new(env)?;
        e.write(&mut o);
        out.set(i as u32, o.finish()?)?;
    }
    Ok(out)
}

/// One field of an event type (`core::events::FieldSchema`).
#[napi_derive::napi(object)]
pub struct EventFieldSchema {
    /// Its JavaScript name.
    pub name: String,
    /// Its TypeScript type.
    pub ts: String,
    /// Left out when it has no value (`?`).
    pub optional: bool,
    /// Its documentation.
    pub doc: String,
}

/// One event type (`core::events::TypeSchema`).
#[napi_derive::napi(object)]
pub struct EventTypeSchema {
    /// `type`.
    pub name: String,
    /// Its TypeScript interface.
    pub interface: String,
    /// Its documentation.
    pub doc: String,
    /// Whether it carries `sandboxId`.
    pub sandbox: bool,
    /// Its own fields, in order.
    pub fields: Vec<EventFieldSchema>,
}

/// Every event type the router emits, with its fields: what `scripts/event-types.mjs`
/// writes the event section of `index.d.ts` from.
#[napi_derive::napi]
pub fn event_schema() -> Vec<EventTypeSchema> {
    crate::core::events::schema()
        .into_iter()
        .map(|t| EventTypeSchema {
            name: t.name.to_string(),
            interface: t.interface.to_string(),
            doc: t.doc.trim().to_string(),
            sandbox: t.scope == crate::core::events::Scope::Sandbox,
            fields: t
                .fields
                .into_iter()
                .map(|f| EventFieldSchema {
                    name: f.name.to_string(),
                    ts: f.ts.to_string(),
                    optional: f.optional,
                    doc: f.doc.trim().to_string(),
                })
                .collect(),
        })
        .collect()
}

/// A field path's steps as JavaScript hands them (keys, and array indices as numbers).
pub fn segments_of(segments: Vec<napi::bindgen_prelude::Either<String, f64>>) -> Vec<crate::core::json::Segment> {
    use crate::core::json::Segment;
    use napi::bindgen_prelude::Either;
    segments
        .into_iter()
        .map(|s| match s {
            Either::A(k) => Segment::Key(k),
            Either::B(i) => Segment::Index(i.max(0.0) as u64),
        })
        .collect()
}
