//! SL to VL mapping: one table per port type, with optional per-(input, output) tables on switches.

use std::collections::HashMap;

pub type Sl2VlTable = [u8; 16];

pub struct Sl2Vl {
    pub ca: Sl2VlTable,
    pub swe: Sl2VlTable,
    /// Per switch with overrides: its (input, output) tables.
    pairs: HashMap<u32, PairTables>,
    has_pairs: bool,
}

/// Switches up to this radix keep a table for every (input, output) pair (`radix^2 x 16` bytes,
/// 16 MiB at most); wider ones only the pairs given, searched, so that a few overrides on a
/// switch with tens of thousands of ports do not allocate gigabytes.
const DENSE_RADIX: u32 = 1024;

enum PairTables {
    /// Indexed by input * radix + output.
    Dense { radix: u32, tables: Vec<Sl2VlTable> },
    /// The given pairs, sorted by (input, output).
    Sparse(Vec<((u32, u32), Sl2VlTable)>),
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
        let entry = self.pairs.entry(switch).or_insert_with(|| {
            if radix <= DENSE_RADIX {
                PairTables::Dense { radix, tables: vec![swe; (radix * radix) as usize] }
            } else {
                PairTables::Sparse(Vec::new())
            }
        });
        match entry {
            PairTables::Dense { radix, tables } => tables[(input * *radix + output) as usize] = t,
            PairTables::Sparse(given) => match given.binary_search_by_key(&(input, output), |e| e.0) {
                Ok(i) => given[i].1 = t,
                Err(i) => given.insert(i, ((input, output), t)),
            },
        }
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
        let table = match self.pairs.get(&switch) {
            Some(PairTables::Dense { radix, tables }) => &tables[(input * radix + output) as usize],
            Some(PairTables::Sparse(given)) => match given.binary_search_by_key(&(input, output), |e| e.0) {
                Ok(i) => &given[i].1,
                Err(_) => &self.swe,
            },
            None => &self.swe,
        };
        table[sl as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wide_switch_keeps_only_the_pairs_given_and_reads_them_like_a_narrow_one() {
        let swe = [0u8; 16];
        let mut table = [1u8; 16];
        table[3] = 2;
        for radix in [8, DENSE_RADIX + 1, 40_000] {
            let mut s = Sl2Vl::new(swe, swe);
            s.set_pair(0, radix, 5, 7, [3; 16]);
            s.set_pair(0, radix, 5, 7, table); // the later one wins
            s.set_pair(0, radix, 1, 2, [2; 16]);
            assert_eq!(s.switch_vl(0, 5, 7, 3), 2);
            assert_eq!(s.switch_vl(0, 5, 7, 0), 1);
            assert_eq!(s.switch_vl(0, 1, 2, 9), 2);
            assert_eq!(s.switch_vl(0, 7, 5, 3), 0, "an unlisted pair reads the switch table");
            assert_eq!(s.switch_vl(1, 5, 7, 3), 0, "a switch without overrides reads the switch table");
            if let Some(PairTables::Sparse(given)) = s.pairs.get(&0) {
                assert!(radix > DENSE_RADIX && given.len() == 2);
            } else {
                assert!(radix <= DENSE_RADIX);
            }
        }
    }
}
