//! Time, sizes and rates: integer picoseconds inside the engine, converted once at the edges.

/// Simulated time in picoseconds.
pub type Time = u64;

/// Sentinel for "no time scheduled".
pub const NEVER: Time = u64::MAX;

/// Bytes per flow-control credit (InfiniBand counts buffer space in 64-byte blocks).
pub const CREDIT_BYTES: u32 = 64;

pub fn ns_to_ps(ns: f64) -> Time {
    (ns * 1000.0).round() as Time
}

pub fn us_to_ps(us: f64) -> Time {
    (us * 1_000_000.0).round() as Time
}

pub fn ps_to_ns(ps: Time) -> f64 {
    ps as f64 / 1000.0
}

/// Credits needed to hold `bytes` in a receive buffer (rounded up to whole 64-byte blocks).
pub fn credits_for(bytes: u32) -> u32 {
    bytes.div_ceil(CREDIT_BYTES)
}

/// `x.round() as Time`, exactly, for every x (NaN, negatives and overflow included), without
/// the libm call `f64::round` is on baseline x86_64: this runs once per packet-hop.
#[inline]
pub fn round_to_time(x: f64) -> Time {
    // Signed conversions are single instructions (unsigned ones are not); the rare values
    // outside [0, 2^62), NaN included, take the slow path.
    if !(0.0..4.6e18).contains(&x) {
        return x.round() as Time;
    }
    let t = x as i64;
    // Exact: below 2^53 the fraction x - t is representable; above, x is an integer.
    (if x - t as f64 >= 0.5 { t + 1 } else { t }) as Time
}

/// A link's data rate, kept as picoseconds per byte so serialization is one multiply.
#[derive(Clone, Copy, Debug)]
pub struct Rate {
    ps_per_byte: f64,
    gbps: f64,
}

impl Rate {
    pub fn from_gbps(gbps: f64) -> Rate {
        Rate { ps_per_byte: 8000.0 / gbps, gbps }
    }

    pub fn gbps(&self) -> f64 {
        self.gbps
    }

    /// Picoseconds a byte takes on the wire, unrounded (mean gaps of traffic sources).
    pub fn ps_per_byte(&self) -> f64 {
        self.ps_per_byte
    }

    /// Time to put `bytes` on the wire, rounded to the nearest picosecond.
    #[inline]
    pub fn serialization(&self, bytes: u32) -> Time {
        round_to_time(bytes as f64 * self.ps_per_byte)
    }

    /// Bytes the link carries in `ps` picoseconds.
    pub fn capacity_bytes(&self, ps: Time) -> f64 {
        ps as f64 / self.ps_per_byte
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edr_serializes_4kib_packet_in_329_76_ns() {
        // 4096 B payload + 26 B header at 100 Gb/s = 4122 * 80 ps.
        assert_eq!(Rate::from_gbps(100.0).serialization(4122), 329_760);
    }

    #[test]
    fn round_to_time_matches_f64_round() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(3);
        let special = [
            0.0,
            -0.0,
            0.5,
            1.5,
            2.5,
            -0.5,
            -0.7,
            0.49999999999999994,
            4503599627370495.5,
            4503599627370496.0,
            9007199254740993.0,
            1.8446744073709552e19,
            1e30,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            f64::MIN_POSITIVE,
            f64::MAX,
        ];
        for x in special {
            assert_eq!(round_to_time(x), x.round() as Time, "{x}");
        }
        for _ in 0..1_000_000 {
            let x = match rng.gen_range(0..4) {
                0 => rng.gen_range(0.0..10.0),
                1 => rng.gen_range(0.0..1e7),
                2 => rng.gen::<u32>() as f64 + 0.5,
                _ => f64::from_bits(rng.gen::<u64>()),
            };
            assert_eq!(round_to_time(x), x.round() as Time, "{x}");
        }
    }

    #[test]
    fn credits_round_up_to_64_byte_blocks() {
        assert_eq!(credits_for(4122), 65);
        assert_eq!(credits_for(64), 1);
        assert_eq!(credits_for(65), 2);
    }
}
