//! Backoff policy: exponential with full jitter, `Retry-After` honoured but capped.
//! Pure arithmetic — the caller supplies the random fraction — so it is unit-tested.

use std::time::Duration;

/// Exponential backoff bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Backoff {
    /// Ceiling of the first retry's delay.
    pub base: Duration,
    /// No delay ever exceeds this, `Retry-After` included.
    pub max: Duration,
}

impl Backoff {
    /// Upper bound for retry number `retry` (0 = first retry): `base * 2^retry`, capped at `max`.
    pub(crate) fn ceiling(&self, retry: u32) -> Duration {
        let factor = 1u32.checked_shl(retry.min(31)).unwrap_or(u32::MAX);
        self.base.saturating_mul(factor).min(self.max)
    }

    /// Delay before retry number `retry`. A server-given `retry_after` wins (capped at `max`);
    /// otherwise full jitter: `unit` (in `[0, 1)`) times the ceiling.
    pub(crate) fn delay(&self, retry: u32, retry_after: Option<Duration>, unit: f64) -> Duration {
        if let Some(after) = retry_after {
            return after.min(self.max);
        }
        let unit = if unit.is_finite() {
            unit.clamp(0.0, 1.0)
        } else {
            0.0
        };
        self.ceiling(retry).mul_f64(unit)
    }
}

/// Parse `Retry-After` (delta-seconds, fractions tolerated) or `retry-after-ms`.
/// HTTP-date values are ignored (the jittered backoff applies instead).
pub(crate) fn parse_retry_after(seconds: Option<&str>, millis: Option<&str>) -> Option<Duration> {
    if let Some(ms) = millis.and_then(|v| v.trim().parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    let secs = seconds?.trim().parse::<f64>().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(1e9)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const B: Backoff = Backoff {
        base: Duration::from_millis(500),
        max: Duration::from_secs(30),
    };

    #[test]
    fn ceiling_doubles_then_caps() {
        assert_eq!(B.ceiling(0), Duration::from_millis(500));
        assert_eq!(B.ceiling(1), Duration::from_secs(1));
        assert_eq!(B.ceiling(3), Duration::from_secs(4));
        assert_eq!(B.ceiling(6), Duration::from_secs(30));
        assert_eq!(B.ceiling(200), Duration::from_secs(30));
    }

    #[test]
    fn full_jitter_stays_in_range() {
        assert_eq!(B.delay(2, None, 0.0), Duration::ZERO);
        assert_eq!(B.delay(2, None, 0.5), Duration::from_secs(1));
        assert!(B.delay(2, None, 0.999) < Duration::from_secs(2));
        assert_eq!(B.delay(2, None, f64::NAN), Duration::ZERO);
        assert_eq!(B.delay(2, None, 7.0), Duration::from_secs(2));
    }

    #[test]
    fn retry_after_wins_but_is_capped() {
        assert_eq!(
            B.delay(0, Some(Duration::from_secs(3)), 0.1),
            Duration::from_secs(3)
        );
        assert_eq!(
            B.delay(0, Some(Duration::from_secs(600)), 0.1),
            Duration::from_secs(30)
        );
    }

    #[test]
    fn parses_retry_after_headers() {
        assert_eq!(
            parse_retry_after(Some("2"), None),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            parse_retry_after(Some(" 1.5 "), None),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            parse_retry_after(Some("9"), Some("250")),
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            parse_retry_after(Some("Wed, 21 Oct 2015 07:28:00 GMT"), None),
            None
        );
        assert_eq!(parse_retry_after(Some("-1"), None), None);
        assert_eq!(parse_retry_after(None, None), None);
    }
}
