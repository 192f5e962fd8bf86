//! An in-memory [`Fetch`](super::http::Fetch): pages keyed by the full URL, with a log of
//! the URLs requested.
use super::config::{ReaderConfig, ReaderOptions};
use super::http::{Fetch, Fetched};
use crate::core::capacity::UnknownReason;
use reqwest::header::HeaderMap;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::future::Future;

/// Computes an answer for a URL.
pub type Responder = Box<dyn Fn(&str) -> Result<Fetched, UnknownReason> + Send>;

#[derive(Default)]
pub struct MemoryFetch {
    pub pages: HashMap<String, Result<Fetched, UnknownReason>>,
    pub log: Vec<String>,
    /// Answer for URLs not in `pages` (a server that always answers the same page).
    pub fallback: Option<Responder>,
}

impl MemoryFetch {
    pub fn page(mut self, url: &str, body: &str) -> Self {
        self.pages.insert(url.into(), Ok(Fetched { body: body.as_bytes().to_vec(), headers: HeaderMap::new() }));
        self
    }

    pub fn page_with_header(mut self, url: &str, body: &str, name: &'static str, value: &str) -> Self {
        let mut headers = HeaderMap::new();
        headers.insert(name, value.parse().unwrap());
        self.pages.insert(url.into(), Ok(Fetched { body: body.as_bytes().to_vec(), headers }));
        self
    }
}

impl Fetch for MemoryFetch {
    fn get(&mut self, url: reqwest::Url) -> impl Future<Output = Result<Fetched, UnknownReason>> + Send {
        let key = url.to_string();
        self.log.push(key.clone());
        let out = match self.pages.get(&key) {
            Some(r) => r.clone(),
            None => match &self.fallback {
                Some(f) => f(&key),
                None => Err(UnknownReason::ReadFailed),
            },
        };
        std::future::ready(out)
    }
}

/// Runs a future to completion on a fresh current-thread runtime.
pub fn block_on<F: Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
}

/// The configuration a reader of `provider` gets from `options` (JSON as JavaScript passes
/// it; a key is added when none is given), through the one options rule.
pub fn config(provider: &str, mut options: Value) -> ReaderConfig {
    if options.get("apiKey").is_none() {
        options["apiKey"] = json!("k");
    }
    ReaderOptions::read(Some(&json!({"provider": provider, "options": options}))).expect("valid options").config
}
