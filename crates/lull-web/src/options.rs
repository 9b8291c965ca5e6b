//! Reading JavaScript option objects. The timing options and `wait` are read
//! as lodash reads them — never refused: a non-object `options` is ignored,
//! flags are truthy or falsy, numbers go through `Number()` (`NaN` is 0), and
//! unknown keys are ignored. One difference: a key present but `undefined`
//! counts as missing (lodash takes `{ maxWait: undefined }` as `maxWait: 0`,
//! lodash#5857). lull's own options get clear `TypeError`s.

use js_sys::Reflect;
use lull_core::{Adaptive, MAX_DURATION_MS, PolicyConfig, Wait};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;

use crate::js::type_error;

/// `{ leading, trailing, maxWait, flushOnHide }`, as lodash reads them.
#[derive(Default)]
pub(crate) struct TimingOptions {
    pub(crate) leading: Option<bool>,
    pub(crate) trailing: Option<bool>,
    pub(crate) max_wait: Option<f64>,
    pub(crate) flush_on_hide: bool,
}

impl TimingOptions {
    /// Read them from `options` (anything: lodash ignores what is not an object).
    pub(crate) fn read(options: &JsValue) -> Result<TimingOptions, JsValue> {
        let flag = |key| Ok::<_, JsValue>(get(options, key)?.map(|v| v.is_truthy()));
        Ok(TimingOptions {
            leading: flag("leading")?,
            trailing: flag("trailing")?,
            max_wait: get(options, "maxWait")?.map(|v| to_number(&v)),
            flush_on_hide: flag("flushOnHide")?.unwrap_or(false),
        })
    }
}

// The limit as the messages spell it.
const _: () = assert!(MAX_DURATION_MS == 9_007_199_254_740_991);

/// "`name` rule": an error message about an option, built without `format!`
/// (the formatting machinery would cost kilobytes of wasm).
fn about(name: &str, rule: &str) -> String {
    let mut text = String::with_capacity(name.len() + rule.len() + 3);
    text.push('`');
    text.push_str(name);
    text.push_str("` ");
    text.push_str(rule);
    text
}

/// lodash's `isObject`: an object or a function.
fn is_object(value: &JsValue) -> bool {
    (value.is_object() && !value.is_null()) || value.is_function()
}

/// `options[key]`, `None` when absent or `undefined`, or when `options` is not
/// an object (lodash ignores those); a throwing getter throws.
pub(crate) fn get(options: &JsValue, key: &str) -> Result<Option<JsValue>, JsValue> {
    if !is_object(options) {
        return Ok(None);
    }
    let value = Reflect::get(options, &key.into())?;
    Ok((!value.is_undefined()).then_some(value))
}

/// lodash's `toNumber(value) || 0`: unary `+`'s reading, `NaN` (and symbols, bigints) as 0.
fn to_number(value: &JsValue) -> f64 {
    let n = if value.is_symbol() || value.is_bigint() { f64::NAN } else { value.unchecked_into_f64() };
    if n.is_nan() { 0.0 } else { n }
}

/// A number lodash accepts as milliseconds: negative is 0, and at most
/// [`MAX_DURATION_MS`] (~285,000 years).
fn clamp_ms(ms: f64) -> u64 {
    ms.clamp(0.0, MAX_DURATION_MS as f64).floor() as u64
}

/// `wait` as lodash reads it (`undefined` and non-numbers are 0).
pub(crate) fn lodash_wait(value: &JsValue) -> u64 {
    clamp_ms(to_number(value))
}

/// A function argument.
pub(crate) fn function(value: JsValue, name: &str) -> Result<js_sys::Function, JsValue> {
    value.dyn_into().map_err(|_| type_error(about(name, "must be a function")))
}

/// lull's own count option `key` (strict): absent, or a whole number from 0 to `u32::MAX`.
pub(crate) fn count(options: &JsValue, key: &str) -> Result<Option<u32>, JsValue> {
    let Some(value) = get(options, key)? else { return Ok(None) };
    match value.as_f64() {
        Some(n) if n.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(&n) => Ok(Some(n as u32)),
        _ => Err(type_error(about(key, "must be a whole number from 0 to 4294967295"))),
    }
}

/// lull's own duration option `key` (not lodash's: strict): absent, or a
/// number of milliseconds from 0 to [`MAX_DURATION_MS`].
pub(crate) fn duration(options: &JsValue, key: &str) -> Result<Option<u64>, JsValue> {
    let Some(value) = get(options, key)? else { return Ok(None) };
    match value.as_f64() {
        Some(ms) if (0.0..=MAX_DURATION_MS as f64).contains(&ms) => Ok(Some(ms.floor() as u64)),
        _ => Err(type_error(about(key, "must be a number of milliseconds from 0 to 9007199254740991"))),
    }
}

/// `wait`: milliseconds as lodash reads them, or `"auto"` for the learned quiet period.
pub(crate) fn wait(value: &JsValue) -> Wait {
    if value.as_string().as_deref() == Some("auto") {
        return Wait::Auto(Adaptive::default());
    }
    Wait::Fixed(lodash_wait(value))
}

/// lodash's debounce defaults: trailing on, leading off, `maxWait` raised to `wait`.
pub(crate) fn debounce_policy(wait: Wait, opts: &TimingOptions) -> PolicyConfig {
    let max_wait = opts.max_wait.map(clamp_ms);
    PolicyConfig {
        wait,
        max_wait,
        leading: opts.leading.unwrap_or(false),
        trailing: opts.trailing.unwrap_or(true),
        ..PolicyConfig::debounce(0)
    }
    .clamp_max_wait()
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
    config.build().map_err(|e| type_error(e.rule()))
}
