//! The demo's hooks without the `demo` cargo feature (built as `crate::demo`
//! in its place, see `demo/mod.rs`): the same names, empty — no path is the
//! demo's. The production worker is built so.

pub(crate) mod route {
    //! No demo route.

    use crate::error::ApiError;

    /// None: no path is the demo's.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub enum DemoRoute {}

    impl DemoRoute {
        /// Never asked.
        pub fn needs_admin(&self) -> bool {
            match *self {}
        }
    }

    /// No path is the demo's: the API's own paths answer.
    pub(crate) fn route(_method: &str, _path: &str) -> Option<Result<DemoRoute, ApiError>> {
        None
    }
}

/// Whether the demo is built in: not here, so `LULL_DEMO_SINK` switches nothing on.
pub(crate) const BUILT: bool = false;
