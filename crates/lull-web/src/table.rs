//! Engines by handle: the module's only state.

use alloc::vec::Vec;

use spin::mutex::{SpinMutex, SpinMutexGuard};

/// Slots of engines; a freed slot is reused by the next engine created.
/// The lock is never contended (one thread, never held across a call out):
/// found taken, it was left so by a trap (out of memory) mid-call, and the
/// table answers as for a bad handle instead of spinning forever.
pub(crate) struct Table<T>(SpinMutex<Vec<Option<T>>>);

impl<T> Table<T> {
    pub(crate) const fn new() -> Self {
        Table(SpinMutex::new(Vec::new()))
    }

    /// The slots, locked (`None` if a trap left them locked): one copy of
    /// the locking code, not one per export.
    #[inline(never)]
    fn slots(&self) -> Option<SpinMutexGuard<'_, Vec<Option<T>>>> {
        self.0.try_lock()
    }

    /// Keep `engine`; its handle (`None`: the table is unusable, see above).
    pub(crate) fn add(&self, engine: T) -> Option<u32> {
        let mut slots = self.slots()?;
        match slots.iter().position(Option::is_none) {
            Some(at) => {
                slots[at] = Some(engine);
                Some(at as u32)
            }
            None => {
                slots.push(Some(engine));
                Some((slots.len() - 1) as u32)
            }
        }
    }

    /// Drop the engine behind `handle` (a bad handle is ignored).
    pub(crate) fn free(&self, handle: u32) {
        if let Some(slot) = self.slots().as_mut().and_then(|s| s.get_mut(handle as usize)) {
            *slot = None;
        }
    }

    /// `f` on the engine behind `handle`, or `absent` for a bad handle.
    pub(crate) fn with<R>(&self, handle: u32, absent: R, f: impl FnOnce(&mut T) -> R) -> R {
        match self.slots().as_mut().and_then(|s| s.get_mut(handle as usize)) {
            Some(Some(engine)) => f(engine),
            _ => absent,
        }
    }

    /// How many engines are alive.
    pub(crate) fn live(&self) -> u32 {
        self.slots().map_or(0, |s| s.iter().filter(|s| s.is_some()).count() as u32)
    }
}
