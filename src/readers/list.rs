//! What every list call shares: its URL, the bound on its pages, and the parse of its body.
//! (Its page size is the configuration's: [`ReaderConfig::page_size`].)
//!
//! Why bound pages and cursors? A paginator that never ends (or hands out a cursor twice)
//! would keep a read on tokio forever; [`PageGuard`] ends it with `PAGE_LIMIT_EXCEEDED`.

use super::config::ReaderConfig;
use crate::core::capacity::UnknownReason;

/// Builds `{base}{path}` as a URL.
pub(crate) fn endpoint(cfg: &ReaderConfig, default_base: &str, path: &str) -> Result<reqwest::Url, UnknownReason> {
    let base = cfg.base_url.as_deref().unwrap_or(default_base);
    reqwest::Url::parse(&format!("{base}{path}")).map_err(|_| UnknownReason::Malformed)
}

/// Tracks pages fetched and cursors seen so that no paginator can run forever: more than
/// `max_pages` pages, or a cursor the server already handed out, is `PAGE_LIMIT_EXCEEDED`.
pub(crate) struct PageGuard {
    max_pages: u32,
    fetched: u32,
    seen: std::collections::HashSet<String>,
}

impl PageGuard {
    pub(crate) fn new(max_pages: u32) -> Self {
        PageGuard { max_pages, fetched: 0, seen: Default::default() }
    }

    /// Call before each request.
    pub(crate) fn before_fetch(&mut self) -> Result<(), UnknownReason> {
        if self.fetched >= self.max_pages {
            return Err(UnknownReason::PageLimitExceeded);
        }
        self.fetched += 1;
        Ok(())
    }

    /// Call with each continuation token; a repeat means the server is looping.
    pub(crate) fn cursor(&mut self, cursor: &str) -> Result<(), UnknownReason> {
        if self.seen.insert(cursor.to_string()) {
            Ok(())
        } else {
            Err(UnknownReason::PageLimitExceeded)
        }
    }
}

/// A page body parsed with serde into a typed struct; any syntax or type error is `MALFORMED`.
pub(crate) fn parse_body<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, UnknownReason> {
    serde_json::from_slice(body).map_err(|_| UnknownReason::Malformed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_guard_bounds_pages_and_detects_repeated_cursors() {
        let mut g = PageGuard::new(2);
        assert!(g.before_fetch().is_ok());
        assert!(g.before_fetch().is_ok());
        assert_eq!(g.before_fetch(), Err(UnknownReason::PageLimitExceeded));
        let mut g = PageGuard::new(10);
        assert!(g.cursor("a").is_ok());
        assert!(g.cursor("b").is_ok());
        assert_eq!(g.cursor("a"), Err(UnknownReason::PageLimitExceeded));
    }
}
