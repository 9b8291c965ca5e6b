// One Analytics Engine data point (runtime/points.rs), built here in one call
// from plain arguments rather than field by field from the wasm: the index
// (the topic), three blobs and two doubles, in the order the dashboard's SQL
// reads them (the manual's *Metrics*).
export function writePoint(dataset, topic, what, outcome, reason, count, latencyMs) {
  dataset.writeDataPoint({ indexes: [topic], blobs: [what, outcome, reason], doubles: [count, latencyMs] });
}
