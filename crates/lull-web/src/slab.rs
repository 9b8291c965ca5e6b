//! The lite module's memory: its engines in one array of slots, in pages
//! the module grows past those it was instantiated with (its stack and
//! statics).
//!
//! A page that only debounces needs no heap: the lite engine allocates
//! nothing (lull-core's `Lite` is held in place), so its table is the one
//! thing that grows, and it grows as an array does, a page at a time. No
//! allocator, no `Vec`, and so none of their failure paths and messages:
//! hundreds of bytes of the module. Its global allocator refuses every
//! request, so nothing else can take pages the array grows into.
//!
//! How many pages the array needs is plain arithmetic ([`pages_for`]),
//! tested natively; reaching the slots is the shell, in wasm only.

#[cfg(all(feature = "module", feature = "lite", target_arch = "wasm32"))]
use core::marker::PhantomData;

/// A wasm page.
const PAGE: usize = 65_536;

/// The pages an array of `slots` slots of `size` bytes from `base` reaches
/// into, or `None` past the address space.
pub(crate) fn pages_for(base: usize, slots: usize, size: usize) -> Option<usize> {
    Some(base.checked_add(slots.checked_mul(size)?)?.div_ceil(PAGE))
}

/// Slots of `T`, `None` when free: from `base`, the first `len` written.
#[cfg(all(feature = "module", feature = "lite", target_arch = "wasm32"))]
pub(crate) struct Slab<T> {
    base: usize,
    len: usize,
    slots: PhantomData<T>,
}

#[cfg(all(feature = "module", feature = "lite", target_arch = "wasm32"))]
impl<T> Slab<T> {
    /// No slots yet; the first push places the array.
    pub(crate) const fn new() -> Self {
        Slab { base: 0, len: 0, slots: PhantomData }
    }

    /// Slots written so far.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

#[cfg(all(feature = "module", feature = "lite", target_arch = "wasm32"))]
impl<T> Slab<T> {
    /// The slot at `at`, if written.
    #[allow(unsafe_code)]
    pub(crate) fn slot(&mut self, at: usize) -> Option<&mut Option<T>> {
        // SAFETY: slots below `len` lie in pages this array grew (see `push`),
        // which nothing else uses, and were written; `&mut self` is the only
        // way to them (the table's lock holds it).
        (at < self.len).then(|| unsafe { &mut *(self.base as *mut Option<T>).add(at) })
    }

    /// Write a new slot holding `value`; its index, or `None` out of memory.
    #[allow(unsafe_code)]
    pub(crate) fn push(&mut self, value: T) -> Option<usize> {
        use core::arch::wasm32::{memory_grow, memory_size};
        if self.len == 0 {
            // Page-aligned, so aligned for any `T`.
            self.base = memory_size(0).checked_mul(PAGE)?;
        }
        let more =
            pages_for(self.base, self.len + 1, core::mem::size_of::<Option<T>>())?.saturating_sub(memory_size(0));
        if more > 0 && memory_grow(0, more) == usize::MAX {
            return None;
        }
        // SAFETY: the slot lies in pages just grown for the array, past every
        // slot written before, so nothing refers to it yet.
        unsafe { (self.base as *mut Option<T>).add(self.len).write(Some(value)) };
        self.len += 1;
        Some(self.len - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_array_reaches_into_as_many_pages_as_its_slots_need() {
        assert_eq!(pages_for(17 * PAGE, 0, 400), Some(17));
        assert_eq!(pages_for(17 * PAGE, 1, 400), Some(18));
        assert_eq!(pages_for(17 * PAGE, 163, 400), Some(17 + 1), "163 × 400 fits one page");
        assert_eq!(pages_for(17 * PAGE, 164, 400), Some(17 + 2));
        assert_eq!(pages_for(usize::MAX - 10, 1, 400), None, "past the address space");
        assert_eq!(pages_for(0, usize::MAX, 2), None);
    }
}
