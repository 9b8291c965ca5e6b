//! [`Points`]: the [`Metrics`] port over Workers Analytics Engine — one
//! `writeDataPoint` per [`Point`] to the dataset bound as `LULL_METRICS`
//! (index: the topic; blobs: what, outcome, reason; doubles: count, latency
//! in ms), at most [`POINTS_PER_INVOCATION`] per invocation (each request or
//! alarm calls [`Points::begin`]). Without the binding (local workerd, a
//! deploy that does not want them) nothing is written.

use std::cell::{Cell, OnceCell};

use wasm_bindgen::prelude::*;
use worker::{AnalyticsEngineDataset, Env};

use crate::config::METRICS_BINDING;
use crate::metrics::{Metrics, POINTS_PER_INVOCATION, Point};

#[wasm_bindgen(module = "/js/points.mjs")]
extern "C" {
    /// `dataset.writeDataPoint(…)` with the point's index, blobs and doubles (`js/points.mjs`).
    #[wasm_bindgen(catch, js_name = writePoint)]
    fn write_point(
        dataset: &JsValue,
        topic: &str,
        what: &str,
        outcome: &str,
        reason: &str,
        count: f64,
        latency_ms: f64,
    ) -> Result<(), JsValue>;
}

/// Data points to Analytics Engine, counted per invocation.
pub(super) struct Points {
    env: Env,
    /// The dataset, looked up once (`None`: not bound).
    dataset: OnceCell<Option<AnalyticsEngineDataset>>,
    written: Cell<u32>,
}

impl Points {
    /// Points over `env`'s `LULL_METRICS` binding.
    pub(super) fn new(env: Env) -> Points {
        Points { env, dataset: OnceCell::new(), written: Cell::new(0) }
    }

    /// A new invocation starts: its own [`POINTS_PER_INVOCATION`].
    pub(super) fn begin(&self) {
        self.written.set(0);
    }
}

impl Metrics for Points {
    fn point(&self, point: Point) {
        if self.written.get() >= POINTS_PER_INVOCATION {
            return;
        }
        let dataset = self.dataset.get_or_init(|| self.env.analytics_engine(METRICS_BINDING).ok());
        let Some(dataset) = dataset else { return };
        let written = write_point(
            dataset.as_ref(),
            &point.topic,
            point.what.as_str(),
            &point.outcome,
            &point.reason,
            point.count,
            point.latency_ms,
        );
        if written.is_ok() {
            self.written.set(self.written.get() + 1);
        }
    }
}
