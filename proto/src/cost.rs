//! `CostUsd`: an amount of US dollars, on the wire a JSON number (`costUsd`,
//! `sessionCostUsd`, `maxBudgetUsd`).
//!
//! Held as whole nano-dollars rather than as an `f64`: a session's total is the sum of
//! hundreds of calls, and integer sums are exact and independent of their order (a restored
//! total plus the next call equals the uninterrupted one); it also keeps `Usage` `Eq` and
//! `Copy`. A nano-dollar is far below any token price (a cached token of the cheapest
//! priced model costs tens of them), so the rounding of one call is invisible.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Nano-dollars per dollar.
const NANOS_PER_USD: f64 = 1e9;

/// A non-negative amount of US dollars.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct CostUsd {
    nanos: u64,
}

impl CostUsd {
    pub const ZERO: CostUsd = CostUsd { nanos: 0 };

    /// The amount nearest to `usd`; `None` for a negative, NaN or infinite one.
    pub fn from_usd(usd: f64) -> Option<CostUsd> {
        if !usd.is_finite() || usd < 0.0 {
            return None;
        }
        let nanos = (usd * NANOS_PER_USD).round();
        // Saturating: no real amount comes near 18 billion dollars.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let nanos = if nanos >= u64::MAX as f64 {
            u64::MAX
        } else {
            nanos as u64
        };
        Some(CostUsd { nanos })
    }

    pub fn from_nanos(nanos: u64) -> CostUsd {
        CostUsd { nanos }
    }

    pub fn nanos(self) -> u64 {
        self.nanos
    }

    #[allow(clippy::cast_precision_loss)]
    pub fn usd(self) -> f64 {
        self.nanos as f64 / NANOS_PER_USD
    }

    pub fn saturating_add(self, other: CostUsd) -> CostUsd {
        CostUsd {
            nanos: self.nanos.saturating_add(other.nanos),
        }
    }
}

impl std::ops::Add for CostUsd {
    type Output = CostUsd;

    fn add(self, other: CostUsd) -> CostUsd {
        self.saturating_add(other)
    }
}

impl std::ops::AddAssign for CostUsd {
    fn add_assign(&mut self, other: CostUsd) {
        *self = self.saturating_add(other);
    }
}

/// `$0.42`; amounts under a cent keep four decimals (`$0.0031`) so that a short session
/// does not read `$0.00`.
impl std::fmt::Display for CostUsd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let usd = self.usd();
        if usd < 0.01 && self.nanos > 0 {
            write!(f, "${usd:.4}")
        } else {
            write!(f, "${usd:.2}")
        }
    }
}

impl Serialize for CostUsd {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_f64(self.usd())
    }
}

impl<'de> Deserialize<'de> for CostUsd {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let usd = f64::deserialize(deserializer)?;
        CostUsd::from_usd(usd).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "an amount of US dollars must be a finite number >= 0, not {usd}"
            ))
        })
    }
}

#[cfg(test)]
mod tests {

    use super::*;

    #[test]
    fn amounts_round_trip_through_json_as_plain_numbers() {
        let cost = CostUsd::from_usd(0.012_345).unwrap();
        let json = serde_json::to_string(&cost).unwrap();
        assert_eq!(json, "0.012345");
        assert_eq!(serde_json::from_str::<CostUsd>(&json).unwrap(), cost);
        assert_eq!(
            serde_json::from_str::<CostUsd>("2").unwrap().nanos(),
            2_000_000_000
        );
    }

    #[test]
    fn negative_or_non_numeric_amounts_are_refused() {
        assert!(serde_json::from_str::<CostUsd>("-1").is_err());
        assert!(serde_json::from_str::<CostUsd>("\"1\"").is_err());
        assert_eq!(CostUsd::from_usd(f64::NAN), None);
    }

    #[test]
    fn sums_are_exact_whatever_their_order() {
        let a = CostUsd::from_usd(0.1).unwrap();
        let b = CostUsd::from_usd(0.2).unwrap();
        assert_eq!(a + b, CostUsd::from_usd(0.3).unwrap());
    }

    #[test]
    fn display_keeps_small_amounts_readable() {
        assert_eq!(CostUsd::from_usd(0.4213).unwrap().to_string(), "$0.42");
        assert_eq!(CostUsd::from_usd(0.003_14).unwrap().to_string(), "$0.0031");
        assert_eq!(CostUsd::ZERO.to_string(), "$0.00");
    }
}
