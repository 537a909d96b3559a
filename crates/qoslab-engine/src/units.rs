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

    /// Time to put `bytes` on the wire, rounded to the nearest picosecond.
    #[inline]
    pub fn serialization(&self, bytes: u32) -> Time {
        (bytes as f64 * self.ps_per_byte).round() as Time
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
    fn credits_round_up_to_64_byte_blocks() {
        assert_eq!(credits_for(4122), 65);
        assert_eq!(credits_for(64), 1);
        assert_eq!(credits_for(65), 2);
    }
}
