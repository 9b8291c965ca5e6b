//! [`SortedMap`] and [`SortedSet`]: ordered collections on a sorted `Vec`.
//!
//! Binary search to find, a shift to insert or remove. For the sizes a
//! [`Keyed`](crate::Keyed) group holds (keys in the thousands, values boxed so
//! a shift moves pointers) that is quick, and it is far less code than a
//! B-tree, which matters in a wasm module shipped to browsers.

use alloc::vec::Vec;

/// A map ordered by key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SortedMap<K, V>(Vec<(K, V)>);

impl<K: Ord, V> SortedMap<K, V> {
    pub(crate) fn new() -> Self {
        SortedMap(Vec::new())
    }

    fn find(&self, key: &K) -> Result<usize, usize> {
        self.0.binary_search_by(|(k, _)| k.cmp(key))
    }

    pub(crate) fn get(&self, key: &K) -> Option<&V> {
        self.find(key).ok().map(|at| &self.0[at].1)
    }

    /// Insert or replace.
    pub(crate) fn insert(&mut self, key: K, value: V) {
        match self.find(&key) {
            Ok(at) => self.0[at].1 = value,
            Err(at) => self.0.insert(at, (key, value)),
        }
    }

    pub(crate) fn remove(&mut self, key: &K) -> Option<V> {
        self.find(key).ok().map(|at| self.0.remove(at).1)
    }

    pub(crate) fn keys(&self) -> impl Iterator<Item = &K> {
        self.0.iter().map(|(k, _)| k)
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.0.iter().map(|(k, v)| (k, v))
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<K: Ord, V> FromIterator<(K, V)> for SortedMap<K, V> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(items: I) -> Self {
        let mut map = SortedMap::new();
        for (k, v) in items {
            map.insert(k, v);
        }
        map
    }
}

/// A set in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SortedSet<T>(Vec<T>);

impl<T: Ord> SortedSet<T> {
    pub(crate) fn new() -> Self {
        SortedSet(Vec::new())
    }

    /// Add `item`; false if it was there.
    pub(crate) fn insert(&mut self, item: T) -> bool {
        match self.0.binary_search(&item) {
            Ok(_) => false,
            Err(at) => {
                self.0.insert(at, item);
                true
            }
        }
    }

    /// Take `item` out; false if it was not there.
    pub(crate) fn remove(&mut self, item: &T) -> bool {
        match self.0.binary_search(item) {
            Ok(at) => {
                self.0.remove(at);
                true
            }
            Err(_) => false,
        }
    }

    pub(crate) fn first(&self) -> Option<&T> {
        self.0.first()
    }

    pub(crate) fn pop_first(&mut self) -> Option<T> {
        (!self.0.is_empty()).then(|| self.0.remove(0))
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
}

impl<T: Ord> FromIterator<T> for SortedSet<T> {
    fn from_iter<I: IntoIterator<Item = T>>(items: I) -> Self {
        let mut set = SortedSet::new();
        for item in items {
            set.insert(item);
        }
        set
    }
}
