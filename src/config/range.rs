//! Range checks for every numeric setting: config keys, environment variables, numbers in
//! requests. A value outside its range is an error naming the setting and the range, never a
//! silent clamp and never a panic further down (`Duration::from_secs_f64(1e300)` panics, so
//! does adding a huge duration to an `Instant`).

use std::time::Duration;

/// Thirty days: the longest timeout or delay any setting takes. Longer is a mistake (or
/// "infinite", which corral does not offer), and keeps every deadline far from overflow.
pub const MAX_SECS: f64 = 30.0 * 24.0 * 3600.0;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{name} must be {range}, got {got}")]
pub struct RangeError {
    pub name: String,
    pub range: String,
    pub got: String,
}

/// A number of seconds, finite, in `(0, MAX_SECS]`.
pub fn seconds(name: &str, secs: f64) -> Result<Duration, RangeError> {
    if secs.is_finite() && secs > 0.0 && secs <= MAX_SECS {
        Ok(Duration::from_secs_f64(secs))
    } else {
        Err(RangeError {
            name: name.to_string(),
            range: format!("a number of seconds above 0 and at most {MAX_SECS} (30 days)"),
            got: secs.to_string(),
        })
    }
}

/// An environment variable holding seconds; unset is `None`, anything unparsable or out of
/// range an error naming the variable.
pub fn env_seconds(name: &str) -> Result<Option<Duration>, RangeError> {
    let Some(raw) = std::env::var_os(name) else {
        return Ok(None);
    };
    let text = raw.to_string_lossy();
    match text.trim().parse::<f64>() {
        Ok(secs) => seconds(name, secs).map(Some),
        Err(_) => Err(RangeError {
            name: name.to_string(),
            range: "a number of seconds".into(),
            got: format!("{text:?}"),
        }),
    }
}

/// An integer in `[min, max]`; `None` passes.
pub fn int<T>(name: &str, value: Option<T>, min: u64, max: u64) -> Result<(), RangeError>
where
    T: Copy + TryInto<u64> + ToString,
{
    let Some(value) = value else {
        return Ok(());
    };
    match value.try_into() {
        Ok(v) if (min..=max).contains(&v) => Ok(()),
        _ => Err(RangeError {
            name: name.to_string(),
            range: format!("between {min} and {max}"),
            got: value.to_string(),
        }),
    }
}

/// A finite number in `[min, max]`; `None` passes.
pub fn float(name: &str, value: Option<f64>, min: f64, max: f64) -> Result<(), RangeError> {
    match value {
        Some(v) if !(v.is_finite() && (min..=max).contains(&v)) => Err(RangeError {
            name: name.to_string(),
            range: format!("a number between {min} and {max}"),
            got: v.to_string(),
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_refuse_what_would_panic_or_never_end() {
        for bad in [f64::NAN, f64::INFINITY, -1.0, 0.0, 1e300, MAX_SECS * 2.0] {
            let e = seconds("timeouts.idle_secs", bad).unwrap_err();
            assert!(
                e.to_string().starts_with("timeouts.idle_secs must be"),
                "{e}"
            );
        }
        assert_eq!(seconds("x", 2.5).unwrap(), Duration::from_millis(2500));
        assert!(seconds("x", MAX_SECS).is_ok());
    }

    #[test]
    fn ints_and_floats_name_the_setting() {
        assert!(int("max_steps", Some(0u32), 1, 10).is_err());
        assert!(int("max_steps", Some(10u32), 1, 10).is_ok());
        assert!(int::<u64>("max_steps", None, 1, 10).is_ok());
        assert!(int("cap", Some(usize::MAX), 1, 10).is_err());
        let e = float("temperature", Some(f64::NAN), 0.0, 2.0).unwrap_err();
        assert!(e.to_string().contains("temperature"), "{e}");
        assert!(float("temperature", Some(0.7), 0.0, 2.0).is_ok());
    }
}
