//! Integer handles for the objects the provision path names on every call.
//!
//! Why? `beginAcquisition` and `router.route()` need a router, a registry and a compiled
//! request. Passed as class references, napi-rs checks each one's type tag and unwraps it:
//! about 2k instructions per reference (callgrind, bench section b's 10,000-concurrent
//! child), 6.6k of a provision's ~78k, and most of a 6-pool `route`. A `u32` costs nothing
//! to pass. The classes stay the owners: each takes a handle when it is made and gives it
//! back when JavaScript collects it (`Drop`), so a handle never outlives its object; a stale
//! or unknown handle is a typed internal error, never a crash.

use crate::binding::error::{internal, Failure};

/// A table of objects by handle; freed handles are reused.
pub(crate) struct Handles<T> {
    items: Vec<Option<T>>,
    free: Vec<u32>,
}

impl<T: Clone> Handles<T> {
    pub(crate) const fn new() -> Self {
        Handles { items: Vec::new(), free: Vec::new() }
    }

    /// Stores `t`; returns its handle.
    pub(crate) fn insert(&mut self, t: T) -> u32 {
        match self.free.pop() {
            Some(h) => {
                self.items[h as usize] = Some(t);
                h
            }
            None => {
                self.items.push(Some(t));
                (self.items.len() - 1) as u32
            }
        }
    }

    /// The object behind `handle` (`what` names it in the error).
    pub(crate) fn get(&self, handle: u32, what: &str) -> Result<T, Failure> {
        self.items
            .get(handle as usize)
            .and_then(Clone::clone)
            .ok_or_else(|| internal(&format!("(an unknown {what} handle)")))
    }

    /// Frees `handle` (its object is being dropped).
    pub(crate) fn remove(&mut self, handle: u32) {
        if let Some(slot) = self.items.get_mut(handle as usize) {
            if slot.take().is_some() {
                self.free.push(handle);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_freed_handle_must_not_answer_and_is_reused() {
        let mut h = Handles::new();
        let a = h.insert("a");
        let b = h.insert("b");
        h.remove(a);
        assert!(h.get(a, "test").is_err(), "a freed handle answers nothing");
        assert_eq!(h.get(b, "test").ok(), Some("b"), "must not fire: a live handle keeps its object");
        assert_eq!(h.insert("c"), a, "freed handles are reused");
        h.remove(a);
        h.remove(a);
        assert_eq!(h.insert("d"), a, "freeing twice frees once");
        assert_ne!(h.insert("e"), a);
    }
}
