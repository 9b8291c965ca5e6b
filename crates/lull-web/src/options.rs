//! Reading JavaScript option objects: lodash's names and defaults, clear
//! `TypeError`s for wrong types, unknown keys ignored (as lodash does).

use lull_core::{Adaptive, MAX_DURATION_MS, PolicyConfig, Wait};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;

use crate::js::type_error;

/// `{ leading, trailing, maxWait }`, as lodash reads them.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TimingOptions {
    pub(crate) leading: Option<bool>,
    pub(crate) trailing: Option<bool>,
    pub(crate) max_wait: Option<f64>,
    #[serde(default)]
    pub(crate) flush_on_hide: bool,
}

/// A function argument.
pub(crate) fn function(value: JsValue, name: &str) -> Result<js_sys::Function, JsValue> {
    value.dyn_into().map_err(|_| type_error(format!("`{name}` must be a function")))
}

/// Read an options object; `undefined`/`null` give the defaults.
pub(crate) fn read<T: DeserializeOwned + Default>(value: &JsValue, what: &str) -> Result<T, JsValue> {
    if value.is_undefined() || value.is_null() {
        return Ok(T::default());
    }
    if !value.is_object() {
        return Err(type_error(format!("{what} must be an object")));
    }
    serde_wasm_bindgen::from_value(value.clone()).map_err(|e| type_error(format!("{what}: {e}")))
}

/// A duration in ms: a finite, non-negative number (`undefined` is 0, like lodash).
pub(crate) fn millis(value: &JsValue, name: &str) -> Result<u64, JsValue> {
    if value.is_undefined() {
        return Ok(0);
    }
    match value.as_f64() {
        Some(ms) => number(ms, name),
        None => Err(type_error(format!("`{name}` must be a number of milliseconds"))),
    }
}

pub(crate) fn number(ms: f64, name: &str) -> Result<u64, JsValue> {
    if ms.is_finite() && (0.0..=MAX_DURATION_MS as f64).contains(&ms) {
        Ok(ms.floor() as u64)
    } else {
        // The number is not echoed back: float formatting would add kilobytes to the module.
        Err(type_error(format!("`{name}` must be a finite number of milliseconds from 0 to {MAX_DURATION_MS}")))
    }
}

/// `wait`: milliseconds, or `"auto"` for the learned quiet period.
pub(crate) fn wait(value: &JsValue) -> Result<Wait, JsValue> {
    if value.as_string().as_deref() == Some("auto") {
        return Ok(Wait::Auto(Adaptive::default()));
    }
    millis(value, "wait").map(Wait::Fixed)
}

/// lodash's debounce defaults: trailing on, leading off, `maxWait` raised to `wait`.
pub(crate) fn debounce_policy(wait: Wait, opts: &TimingOptions) -> Result<PolicyConfig, JsValue> {
    let max_wait = opts.max_wait.map(|m| number(m, "maxWait")).transpose()?;
    Ok(PolicyConfig {
        wait,
        max_wait,
        leading: opts.leading.unwrap_or(false),
        trailing: opts.trailing.unwrap_or(true),
        ..PolicyConfig::debounce(0)
    }
    .clamp_max_wait())
}

/// lodash's throttle: leading and trailing on, `maxWait = wait`.
pub(crate) fn throttle_policy(wait: u64, opts: &TimingOptions) -> PolicyConfig {
    PolicyConfig {
        leading: opts.leading.unwrap_or(true),
        trailing: opts.trailing.unwrap_or(true),
        ..PolicyConfig::throttle(wait)
    }
}

/// Build a policy; a refusal becomes a `TypeError` naming the rule.
pub(crate) fn build(config: PolicyConfig) -> Result<lull_core::Policy, JsValue> {
    config.build().map_err(|e| type_error(e.to_string()))
}
