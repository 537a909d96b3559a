//! SL to VL mapping: one table per port type, with optional per-(input, output) tables on switches.

use std::collections::HashMap;

pub type Sl2VlTable = [u8; 16];

pub struct Sl2Vl {
    pub ca: Sl2VlTable,
    pub swe: Sl2VlTable,
    /// Per switch: `radix * radix` tables indexed by (input * radix + output), when overridden.
    pairs: HashMap<u32, (u32, Vec<Sl2VlTable>)>,
    has_pairs: bool,
}

pub fn table(v: &[u8]) -> Sl2VlTable {
    let mut t = [0u8; 16];
    t.copy_from_slice(&v[..16]);
    t
}

impl Sl2Vl {
    pub fn new(ca: Sl2VlTable, swe: Sl2VlTable) -> Sl2Vl {
        Sl2Vl { ca, swe, pairs: HashMap::new(), has_pairs: false }
    }

    /// Sets the table of one (input, output) pair of a switch with `radix` ports.
    pub fn set_pair(&mut self, switch: u32, radix: u32, input: u32, output: u32, t: Sl2VlTable) {
        let swe = self.swe;
        let entry = self.pairs.entry(switch).or_insert_with(|| (radix, vec![swe; (radix * radix) as usize]));
        entry.1[(input * radix + output) as usize] = t;
        self.has_pairs = true;
    }

    /// VL for `sl` on a switch, from local input port to local output port.
    #[inline]
    pub fn switch_vl(&self, switch: u32, input: u32, output: u32, sl: u8) -> u8 {
        if self.has_pairs {
            return self.pair_vl(switch, input, output, sl);
        }
        self.swe[sl as usize]
    }

    /// The lookup through per-pair tables, kept out of line so the common case inlines.
    #[inline(never)]
    fn pair_vl(&self, switch: u32, input: u32, output: u32, sl: u8) -> u8 {
        match self.pairs.get(&switch) {
            Some((radix, tables)) => tables[(input * radix + output) as usize][sl as usize],
            None => self.swe[sl as usize],
        }
    }
}
