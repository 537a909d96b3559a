//! The engine config's `congestion_control` object (InfiniBand CC, IBA Annex A10; see
//! docs/design/congestion-control.md section 4). Absent: congestion control is off and the run is
//! exactly the run without it. Python resolves the scenario's `[congestion_control]` table into
//! these plain numbers; the engine re-checks every range and names the key of a bad one.

use crate::config::ConfigError;
use serde::Deserialize;

/// Service levels: one CA setting per SL.
pub const CC_SLS: usize = 16;
/// Largest CCT the engine takes: CongestionInfo's 255 blocks of 64 entries (OpenSM sends at most
/// 128 entries; Python refuses more, the spec allows this many).
pub const MAX_CCT_ENTRIES: usize = 255 * 64;
/// Largest local (0-based) switch port number a victim bit can name: IB ports 1..254.
pub const MAX_VICTIM_PORT: u32 = 253;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CongestionControlConfig {
    /// SwitchCongestionSetting.Threshold, 0..15: a (port, VL) is congested when the credits its
    /// filed requests still ask for after a grant reach ceil((16 - t) x VL buffer credits / 16);
    /// 0 never marks.
    pub threshold: u8,
    /// Packets smaller than this many 64-byte credits are never marked (0..255).
    pub packet_size_credits: u32,
    /// Every (marking_rate + 1)-th marking-eligible packet in congestion is marked (0..65535).
    pub marking_rate: u32,
    /// Switch ports (local, 0-based: IB port i + 1, i.e. Victim_Mask bit i + 1) that also mark
    /// as victims (while credit-blocked). The same set on every switch, as OpenSM programs it.
    #[serde(default)]
    pub victim_ports: Vec<u32>,
    /// CACongestionSetting.Port_Control bit 0: CCTI per (host, SL) instead of per send queue.
    pub sl_based: bool,
    /// The CA settings of SL 0..15, exactly 16 entries.
    pub sls: Vec<CcSlConfig>,
    /// The Congestion Control Table: `[shift, multiplier]` per index (CCTI_Limit = len - 1).
    pub cct: Vec<[u32; 2]>,
    /// Keep a trace of every CCTI change and of each BECN's delay (validation; off by default).
    #[serde(default)]
    pub trace: bool,
}

/// CACongestionEntry of one SL.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CcSlConfig {
    /// The SL's Control_Map bit: without it, its flows keep no CCTI and are never throttled.
    pub enabled: bool,
    /// CCTI_Timer in 1.024 µs units (1..65535 when enabled).
    pub ccti_timer: u32,
    pub ccti_increase: u32,
    pub ccti_min: u32,
    /// A CCTI reaching this value (>=, when not 0) counts a trigger event.
    pub trigger_threshold: u32,
}

impl CongestionControlConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        let key = |k: &str| format!("congestion_control.{k}");
        if self.threshold > 15 {
            return Err(ConfigError::new(key("threshold"), format!("expected 0..15, got {}", self.threshold)));
        }
        if self.packet_size_credits > 255 {
            return Err(ConfigError::new(
                key("packet_size_credits"),
                format!("expected 0..255 credits, got {}", self.packet_size_credits),
            ));
        }
        if self.marking_rate > u16::MAX as u32 {
            return Err(ConfigError::new(key("marking_rate"), format!("expected 0..65535, got {}", self.marking_rate)));
        }
        for (i, &p) in self.victim_ports.iter().enumerate() {
            if p > MAX_VICTIM_PORT {
                return Err(ConfigError::new(
                    format!("congestion_control.victim_ports[{i}]"),
                    format!("expected a local port 0..{MAX_VICTIM_PORT} (IB ports 1..254), got {p}"),
                ));
            }
        }
        if self.cct.is_empty() || self.cct.len() > MAX_CCT_ENTRIES {
            return Err(ConfigError::new(
                key("cct"),
                format!("expected 1..{MAX_CCT_ENTRIES} entries, got {}", self.cct.len()),
            ));
        }
        for (i, &[shift, mult]) in self.cct.iter().enumerate() {
            if shift > 3 || mult > 16383 {
                return Err(ConfigError::new(
                    format!("congestion_control.cct[{i}]"),
                    format!("expected [shift 0..3, multiplier 0..16383], got [{shift}, {mult}]"),
                ));
            }
        }
        if self.sls.len() != CC_SLS {
            return Err(ConfigError::new(
                key("sls"),
                format!("expected {CC_SLS} entries (SL0..SL15), got {}", self.sls.len()),
            ));
        }
        let limit = self.cct.len() as u32 - 1;
        for (sl, s) in self.sls.iter().enumerate() {
            let k = |f: &str| format!("congestion_control.sls[{sl}].{f}");
            if s.ccti_timer > u16::MAX as u32 || (s.enabled && s.ccti_timer == 0) {
                return Err(ConfigError::new(
                    k("ccti_timer"),
                    format!("expected 1..65535 (units of 1.024 us), got {}", s.ccti_timer),
                ));
            }
            if s.ccti_increase > 255 {
                return Err(ConfigError::new(k("ccti_increase"), format!("expected 0..255, got {}", s.ccti_increase)));
            }
            for (f, v) in [("ccti_min", s.ccti_min), ("trigger_threshold", s.trigger_threshold)] {
                if v > 255 || v > limit {
                    return Err(ConfigError::new(
                        k(f),
                        format!("expected 0..{} (255 and the CCT's last index), got {v}", limit.min(255)),
                    ));
                }
            }
        }
        Ok(())
    }
}
