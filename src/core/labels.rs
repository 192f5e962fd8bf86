//! A request's launch labels as the router keeps them: sorted by key, each key once, every
//! key and value in one buffer. A provision's labels live as long as its mapping record, so
//! they are kept in two heap blocks (this value, shared by `Arc`, and its buffer) whatever
//! their number, instead of one per string (docs/performance.md: allocations a provision).

use smallvec::SmallVec;

/// Labels, sorted by key (byte order), each key once.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Labels {
    /// Every key and value, in order: key 0, value 0, key 1, …
    text: Box<str>,
    /// Where each of them ends in `text` (two entries a label).
    ends: SmallVec<[u32; 8]>,
}

impl Labels {
    /// The labels of `pairs` (sorted here, in place), sorted by key; of a repeated key, the
    /// last value is kept (as a JSON object's repeated key reads).
    pub fn new<K: AsRef<str>, V: AsRef<str>>(pairs: &mut [(K, V)]) -> Labels {
        // A stable sort keeps repeats in input order; the last of each run is kept.
        pairs.sort_by(|a, b| a.0.as_ref().cmp(b.0.as_ref()));
        let mut text = String::with_capacity(pairs.iter().map(|(k, v)| k.as_ref().len() + v.as_ref().len()).sum());
        let mut ends = SmallVec::with_capacity(pairs.len() * 2);
        for (i, (k, v)) in pairs.iter().enumerate() {
            if pairs.get(i + 1).is_some_and(|next| next.0.as_ref() == k.as_ref()) {
                continue;
            }
            text.push_str(k.as_ref());
            ends.push(text.len() as u32);
            text.push_str(v.as_ref());
            ends.push(text.len() as u32);
        }
        Labels { text: text.into_boxed_str(), ends }
    }

    /// Each label, sorted by key.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &str)> + '_ {
        self.ends.chunks_exact(2).enumerate().map(move |(i, e)| {
            let start = if i == 0 { 0 } else { self.ends[2 * i - 1] as usize };
            (&self.text[start..e[0] as usize], &self.text[e[0] as usize..e[1] as usize])
        })
    }

    /// How many labels.
    pub fn len(&self) -> usize {
        self.ends.len() / 2
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    /// Owned pairs, sorted by key.
    pub fn to_vec(&self) -> Vec<(String, String)> {
        self.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }
}

impl From<Vec<(String, String)>> for Labels {
    fn from(mut pairs: Vec<(String, String)>) -> Labels {
        Labels::new(&mut pairs)
    }
}

impl std::fmt::Debug for Labels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl serde::Serialize for Labels {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(pairs: &[(&str, &str)]) -> Labels {
        Labels::new(&mut pairs.to_vec())
    }

    #[test]
    fn labels_must_read_back_sorted_and_must_not_change_a_value() {
        let l = of(&[("team", "a"), ("", ""), ("env", "prod ✓")]);
        assert_eq!(l.iter().collect::<Vec<_>>(), vec![("", ""), ("env", "prod ✓"), ("team", "a")]);
        assert_eq!((l.len(), l.get("env"), l.get("nope")), (3, Some("prod ✓"), None));
        assert!(of(&[]).is_empty() && of(&[]).iter().next().is_none());
    }

    #[test]
    fn a_repeated_key_must_keep_its_last_value_and_distinct_keys_must_not_merge() {
        let l = of(&[("k", "1"), ("j", "x"), ("k", "2")]);
        assert_eq!(l.to_vec(), vec![("j".into(), "x".into()), ("k".into(), "2".into())]);
        let distinct = of(&[("k", "1"), ("kk", "2")]);
        assert_eq!(distinct.len(), 2, "a key that is a prefix of another is its own");
    }

    #[test]
    fn more_labels_than_inline_must_read_back_whole() {
        let pairs: Vec<(String, String)> = (0..40).map(|i| (format!("k{i:02}"), "v".repeat(i))).collect();
        let l = Labels::from(pairs.clone());
        assert_eq!(l.to_vec(), pairs);
        assert_eq!(serde_json::to_value(&l).unwrap()["k03"], "vvv");
    }
}
