//! Values in flight by `u32` key (jobs, operations, reconcile runs and lanes, warm tasks):
//! the key is what JavaScript holds for the value and hands back with each report; a freed
//! key is reused. The `slab` crate keeps the free list; this file only fixes the key type.

/// A slab keyed by `u32`.
#[derive(Debug)]
pub(crate) struct Slab<T>(slab::Slab<T>);

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab(slab::Slab::new())
    }
}

impl<T> Slab<T> {
    pub(crate) fn insert(&mut self, value: T) -> u32 {
        self.0.insert(value) as u32
    }

    pub(crate) fn get(&self, key: u32) -> Option<&T> {
        self.0.get(key as usize)
    }

    pub(crate) fn get_mut(&mut self, key: u32) -> Option<&mut T> {
        self.0.get_mut(key as usize)
    }

    pub(crate) fn remove(&mut self, key: u32) -> Option<T> {
        self.0.try_remove(key as usize)
    }

    /// Drops the value of `key`, if any, without handing it back.
    pub(crate) fn discard(&mut self, key: u32) {
        self.0.try_remove(key as usize);
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// Every value with its key.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u32, &T)> {
        self.0.iter().map(|(k, v)| (k as u32, v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_freed_key_must_be_reused_and_a_live_one_must_not() {
        let mut s = Slab::default();
        let (a, b) = (s.insert('a'), s.insert('b'));
        assert_ne!(a, b, "must-not-fire: two live values, two keys");
        assert_eq!(s.remove(a), Some('a'));
        assert_eq!(s.remove(a), None, "a freed key holds nothing");
        assert_eq!(s.insert('c'), a, "must-fire: the freed key is reused");
        assert_eq!(s.get_mut(a).copied(), Some('c'));
        assert_eq!((s.len(), s.get(b)), (2, Some(&'b')));
        assert_eq!(s.iter().map(|(k, _)| k).collect::<Vec<_>>(), vec![a, b]);
    }

    #[test]
    fn discard_must_drop_a_live_value_and_free_its_key_and_must_not_touch_a_free_one() {
        let value = std::rc::Rc::new(());
        let mut s = Slab::default();
        let (a, b) = (s.insert(std::rc::Rc::clone(&value)), s.insert(std::rc::Rc::clone(&value)));
        s.discard(a);
        assert_eq!((std::rc::Rc::strong_count(&value), s.len()), (2, 1), "must-fire: dropped, its key free");
        s.discard(a);
        assert_eq!((std::rc::Rc::strong_count(&value), s.len()), (2, 1), "must-not-fire: a free key holds nothing");
        assert_eq!(s.insert(std::rc::Rc::clone(&value)), a, "the key is reused");
        assert!(s.get(b).is_some());
    }
}
