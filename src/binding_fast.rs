//! The two calls every provision makes (`beginAcquisition`, `acquisitionSucceeded`) and
//! the one every `router.route()` makes (`registryOrder`), registered without the per-call
//! glue that `#[napi]` generates.
//!
//! Why? napi-rs 3.16 (the version this builds with) wraps every `#[napi]` call that takes
//! arguments in a "native borrow scope" (an `Arc<Mutex<…>>`, thread-local pushes and pops,
//! a barrier), so that borrowed values can be rooted if the call hands them to async work.
//! These calls never do. Measured under callgrind (bench section b's 10,000-concurrent
//! child), registering the provision's two directly took a provision from 53.8k to 51.5k
//! instructions; `router.route()` at 6 pools spends about a third of its time in that glue.
//!
//! What stays the same: the `#[napi]` functions in `binding.rs` and
//! `binding_acquisition.rs` keep their signatures (they generate `binding.d.ts`, which
//! `lib/` is type-checked against) and their bodies (the entry points below call them).
//! Only the argument conversion moves here, and it uses napi-rs's own `FromNapiValue` /
//! `ToNapiValue` conversions, so a wrong argument fails the same way. At load, the
//! exports of those names are replaced with the functions below.
//! `__test__/binding-fast.test.mjs` calls both with good and bad arguments.

use crate::binding::{begin_acquisition_with, registry_order};
use crate::binding_acquisition::acquisition_succeeded_with;
use napi::bindgen_prelude::{FromNapiValue, JsObjectValue, Object, ToNapiValue, Uint32ArraySlice};
use napi::{sys, Env, JsError, Result};
use napi_derive::napi;
use std::borrow::Cow;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

/// The first `N` arguments of a call (missing ones are `undefined`).
///
/// # Safety
/// `env` and `info` must be those of the callback being run.
unsafe fn args<const N: usize>(env: sys::napi_env, info: sys::napi_callback_info) -> Result<[sys::napi_value; N]> {
    let mut argv = [ptr::null_mut(); N];
    let mut argc = N;
    let status =
        unsafe { sys::napi_get_cb_info(env, info, &mut argc, argv.as_mut_ptr(), ptr::null_mut(), ptr::null_mut()) };
    if status != sys::Status::napi_ok {
        return Err(napi::Error::from_reason("internal error: could not read the call's arguments"));
    }
    if argc < N {
        let mut undefined = ptr::null_mut();
        unsafe { sys::napi_get_undefined(env, &mut undefined) };
        for slot in &mut argv[argc..] {
            *slot = undefined;
        }
    }
    Ok(argv)
}

/// Room for a string argument read in one call (labels' text, a provider sandbox id).
const STR_BUF: usize = 1024;

/// A string argument, or None for `undefined` / `null` when `optional`: read into `buf`
/// in one call when it fits (no length pass, no allocation), else by napi-rs's own
/// conversion, which also makes the error for a value that is not a string.
///
/// # Safety
/// `env` and `v` must be the callback's.
unsafe fn str_arg<'b>(
    env: sys::napi_env,
    v: sys::napi_value,
    buf: &'b mut [u8; STR_BUF],
    optional: bool,
) -> Result<Option<Cow<'b, str>>> {
    if optional {
        let mut ty = 0;
        let status = unsafe { sys::napi_typeof(env, v, &mut ty) };
        if status == sys::Status::napi_ok && (ty == sys::ValueType::napi_undefined || ty == sys::ValueType::napi_null) {
            return Ok(None);
        }
    }
    let mut written = 0;
    let status = unsafe { sys::napi_get_value_string_utf8(env, v, buf.as_mut_ptr().cast(), STR_BUF, &mut written) };
    // Fewer bytes than the room left for the terminator: the whole string was read.
    if status == sys::Status::napi_ok && written < STR_BUF - 1 {
        if let Ok(text) = std::str::from_utf8(&buf[..written]) {
            return Ok(Some(Cow::Borrowed(text)));
        }
    }
    Ok(Some(Cow::Owned(unsafe { String::from_napi_value(env, v)? })))
}

/// Runs one entry point: its result, or its error thrown (a panic is a typed
/// `INTERNAL_ERROR`, as `binding::guard` makes it).
///
/// # Safety
/// `env` must be the callback's live env.
unsafe fn run(env: sys::napi_env, f: impl FnOnce() -> Result<sys::napi_value>) -> sys::napi_value {
    let result = catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| Err(crate::binding::panicked()));
    match result {
        Ok(v) => v,
        Err(e) => {
            unsafe { JsError::from(e).throw_into(env) };
            ptr::null_mut()
        }
    }
}

/// `beginAcquisition(registryKey, requestKey, detached, observe, labelsJson?, step, health?, now?)`.
unsafe extern "C" fn begin_acquisition_entry(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    unsafe {
        run(env, || {
            let a = args::<8>(env, info)?;
            let mut buf = [0u8; STR_BUF];
            let r = begin_acquisition_with(
                u32::from_napi_value(env, a[0])?,
                u32::from_napi_value(env, a[1])?,
                bool::from_napi_value(env, a[2])?,
                bool::from_napi_value(env, a[3])?,
                str_arg(env, a[4], &mut buf, true)?.as_deref(),
                // Written during this synchronous call only (begin_acquisition's contract).
                Uint32ArraySlice::from_napi_value(env, a[5])?,
                Option::<u32>::from_napi_value(env, a[6])?,
                Option::<f64>::from_napi_value(env, a[7])?,
            )?;
            ToNapiValue::to_napi_value(env, r)
        })
    }
}

/// `acquisitionSucceeded(key, storeKey?, providerSandboxId, detached, fleet, now?)`.
unsafe extern "C" fn acquisition_succeeded_entry(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    unsafe {
        run(env, || {
            let a = args::<6>(env, info)?;
            let mut buf = [0u8; STR_BUF];
            let provider_sandbox_id = str_arg(env, a[2], &mut buf, false)?.unwrap_or_default();
            let r = acquisition_succeeded_with(
                u32::from_napi_value(env, a[0])?,
                Option::<u32>::from_napi_value(env, a[1])?,
                &provider_sandbox_id,
                bool::from_napi_value(env, a[3])?,
                u32::from_napi_value(env, a[4])?,
                Option::<f64>::from_napi_value(env, a[5])?,
            )?;
            ToNapiValue::to_napi_value(env, r)
        })
    }
}

/// `registryOrder(registryKey, requestKey, detached, out, health?, now?)`.
unsafe extern "C" fn registry_order_entry(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    unsafe {
        run(env, || {
            let a = args::<6>(env, info)?;
            let r = registry_order(
                u32::from_napi_value(env, a[0])?,
                u32::from_napi_value(env, a[1])?,
                bool::from_napi_value(env, a[2])?,
                // Written during this synchronous call only (registry_order's contract).
                Uint32ArraySlice::from_napi_value(env, a[3])?,
                Option::<u32>::from_napi_value(env, a[4])?,
                Option::<f64>::from_napi_value(env, a[5])?,
            )?;
            ToNapiValue::to_napi_value(env, r)
        })
    }
}

/// At load: the exports `beginAcquisition`, `acquisitionSucceeded` and `registryOrder`
/// become the entry points above.
#[napi(module_exports)]
pub fn fast_entry_points(mut exports: Object, env: Env) -> Result<()> {
    type Entry = unsafe extern "C" fn(sys::napi_env, sys::napi_callback_info) -> sys::napi_value;
    let entries: [(&str, Entry); 3] = [
        ("beginAcquisition", begin_acquisition_entry),
        ("acquisitionSucceeded", acquisition_succeeded_entry),
        ("registryOrder", registry_order_entry),
    ];
    for (name, entry) in entries {
        let mut f = ptr::null_mut();
        // SAFETY: `env` is the module's env during its registration; `name` outlives the call.
        let status = unsafe {
            sys::napi_create_function(
                env.raw(),
                name.as_ptr().cast(),
                name.len() as isize,
                Some(entry),
                ptr::null_mut(),
                &mut f,
            )
        };
        if status != sys::Status::napi_ok {
            return Err(napi::Error::from_reason(format!("could not register {name}")));
        }
        // SAFETY: `f` is a function value just created in `env`.
        exports.set_named_property(name, unsafe { napi::bindgen_prelude::Unknown::from_napi_value(env.raw(), f)? })?;
    }
    Ok(())
}
