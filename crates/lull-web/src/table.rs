//! Engines by handle: the module's only state.

use spin::mutex::{SpinMutex, SpinMutexGuard};

/// Where the slots live: for the lite module, an array in pages of its own
/// (see [`crate::slab`]); otherwise a `Vec` on the heap.
#[cfg(all(feature = "module", feature = "lite", target_arch = "wasm32"))]
type Slots<T> = crate::slab::Slab<T>;
#[cfg(not(all(feature = "module", feature = "lite", target_arch = "wasm32")))]
type Slots<T> = heap::Slots<T>;

/// Slots of engines; a freed slot is reused by the next engine created.
/// The lock is never contended (one thread, never held across a call out):
/// found taken, it was left so by a trap (out of memory) mid-call, and the
/// table answers as for a bad handle instead of spinning forever.
pub(crate) struct Table<T>(SpinMutex<Engines<T>>);

/// The slots, and how many hold an engine.
struct Engines<T> {
    slots: Slots<T>,
    live: u32,
}

impl<T> Table<T> {
    pub(crate) const fn new() -> Self {
        Table(SpinMutex::new(Engines { slots: Slots::new(), live: 0 }))
    }

    /// The engines, locked (`None` if a trap left them locked): one copy of
    /// the locking code, not one per export.
    #[inline(never)]
    fn lock(&self) -> Option<SpinMutexGuard<'_, Engines<T>>> {
        self.0.try_lock()
    }

    /// Keep `engine`; its handle (`None`: out of memory, or the table is unusable, see above).
    pub(crate) fn add(&self, engine: T) -> Option<u32> {
        let mut engines = self.lock()?;
        let slots = &mut engines.slots;
        let at = match (0..slots.len()).find(|&at| matches!(slots.slot(at), Some(None))) {
            Some(at) => {
                *slots.slot(at)? = Some(engine);
                at
            }
            None => slots.push(engine)?,
        };
        engines.live += 1;
        Some(at as u32)
    }

    /// Drop the engine behind `handle` (a bad handle is ignored).
    pub(crate) fn free(&self, handle: u32) {
        let Some(mut engines) = self.lock() else { return };
        if let Some(slot @ Some(_)) = engines.slots.slot(handle as usize) {
            *slot = None;
            engines.live -= 1;
        }
    }

    /// `f` on the engine behind `handle`, or `absent` for a bad handle.
    pub(crate) fn with<R>(&self, handle: u32, absent: R, f: impl FnOnce(&mut T) -> R) -> R {
        match self.lock().as_mut().and_then(|e| e.slots.slot(handle as usize)) {
            Some(Some(engine)) => f(engine),
            _ => absent,
        }
    }

    /// How many engines are alive.
    pub(crate) fn live(&self) -> u32 {
        self.lock().map_or(0, |e| e.live)
    }
}

/// Slots in a `Vec`, with the [`Slab`](crate::slab::Slab)'s methods.
#[cfg(not(all(feature = "module", feature = "lite", target_arch = "wasm32")))]
mod heap {
    use alloc::vec::Vec;

    pub(crate) struct Slots<T>(Vec<Option<T>>);

    impl<T> Slots<T> {
        pub(crate) const fn new() -> Self {
            Slots(Vec::new())
        }
        pub(crate) fn len(&self) -> usize {
            self.0.len()
        }
        pub(crate) fn slot(&mut self, at: usize) -> Option<&mut Option<T>> {
            self.0.get_mut(at)
        }
        pub(crate) fn push(&mut self, value: T) -> Option<usize> {
            self.0.push(Some(value));
            Some(self.0.len() - 1)
        }
    }
}
