//! Faults injected mid-run, to show that the conservation check (`Simulation::conservation`)
//! catches a broken invariant: a summary can never say `ok: false` (a failed check fails the run),
//! so only breaking the state on purpose shows that the check can fail. Test builds only.

use super::*;
use crate::topology::NONE;

/// What a test breaks once `Simulation::fault`'s event count has run.
#[derive(Debug, Clone, Copy)]
pub(super) enum Fault {
    /// One credit of (port, VL) vanishes, as if a credit update were lost on the link.
    DropCredit { port: u32, vl: u32 },
    /// A packet queued behind another in a switch input buffer vanishes, credits and all.
    DropPacket,
}

impl Simulation {
    /// Applies the pending fault once its time has come and the state allows it (a credit to
    /// lose, a packet queued behind another); until then it tries again after every event.
    pub(super) fn inject_fault(&mut self) {
        let Some((after, fault)) = self.fault else {
            return;
        };
        if self.event_count < after {
            return;
        }
        match fault {
            Fault::DropCredit { port, vl } => {
                let pv = &mut self.port_vls[(port * self.vls + vl) as usize];
                if pv.credits == 0 {
                    return;
                }
                pv.credits -= 1;
            }
            Fault::DropPacket => {
                // Not a head: no request, routing decision or transmission refers to it.
                let switch_queues = self.ports.len() as u32 * self.vls;
                let Some(q) = (0..switch_queues).map(QueueId).find(|&q| {
                    let queue = &self.queues[q];
                    !self.queue_input(q).is_none() && queue.head != queue.tail
                }) else {
                    return;
                };
                let queue = &mut self.queues[q];
                let mut before = queue.head;
                while self.packets.items[before as usize].next != queue.tail {
                    before = self.packets.items[before as usize].next;
                }
                self.packets.items[before as usize].next = NONE;
                self.packets.remove(queue.tail);
                queue.tail = before;
            }
        }
        self.fault = None;
    }
}

/// The faults come after this many events, a fifth of the way into `saturated()`'s run.
const FAULT_AFTER_EVENTS: u64 = 1_500;

/// A 2:1 slimmed XGFT(2; 4,4; 1,2) with saturating uniform traffic on 4 SLs and VLs: every
/// buffer busy, packets queued behind others, credits coming and going.
fn saturated() -> EngineConfig {
    let sl2vl: Vec<u8> = (0..16).map(|s| s % 4).collect();
    let low = [[0, 255], [1, 255], [2, 255], [3, 255]];
    let port = serde_json::json!({"sl2vl": sl2vl, "vlarb_high": [], "vlarb_low": low, "high_limit": 0});
    let hosts: Vec<u32> = (0..16).collect();
    let traffic: Vec<serde_json::Value> = (0..4)
        .map(|sl| {
            serde_json::json!({"pattern": "uniform", "hosts": hosts, "destinations": hosts, "load": null,
                "message_bytes": 9000, "sl": sl, "arrival": "poisson", "shift": 0, "hotspot_hosts": [],
                "hotspot_fraction": 0.0, "saturate_depth": 2, "max_queued_messages": 64})
        })
        .collect();
    let v = serde_json::json!({
        "seed": 1,
        "fabric": {"link_gbps": 100.0, "link_latency_ns": 20.0, "switch_latency_ns": 100.0, "mtu_bytes": 4096,
                   "header_bytes": 26, "data_vls": 4, "vl_buffer_bytes": 32768, "hca_send_queues_per_sl": 8},
        "topology": {"kind": "xgft", "m": [4, 4], "w": [1, 2]},
        "routing": {"algorithm": "dmodk"},
        "qos": {"ca": port, "swe": port},
        "traffic": traffic,
        "run": {"duration_us": 40.0, "warmup_us": 5.0, "messages": false},
    });
    EngineConfig::from_json(&v.to_string()).unwrap()
}

fn run_with(fault: Option<Fault>) -> (Simulation, Result<RunOutput, String>) {
    let mut sim = Simulation::new(saturated()).unwrap();
    sim.fault = fault.map(|f| (FAULT_AFTER_EVENTS, f));
    sim.run(&mut || false);
    assert!(sim.fault.is_none(), "the fault was never injected");
    let out = sim.output(false);
    (sim, out)
}

#[test]
fn the_run_without_a_fault_balances() {
    let (_, out) = run_with(None);
    let summary = out.expect("a healthy run passes the check").summary;
    let events = summary["events"].as_u64().unwrap();
    assert!(events > 3 * FAULT_AFTER_EVENTS, "the faults would not be mid-run: {events} events");
    let c = &summary["conservation"];
    // Saturating sources leave packets in flight; every (link direction, VL) was checked.
    assert!(c["packets_in_flight"].as_u64().unwrap() > 0, "{c}");
    assert_eq!(c["credit_counters_checked"], 2 * 24 * 4, "{c}");
}

#[test]
fn a_credit_lost_mid_run_fails_the_run_naming_the_port_and_vl() {
    // Port 5 is host 5's HCA port; its VL1 carries SL1's traffic.
    let (_, out) = run_with(Some(Fault::DropCredit { port: 5, vl: 1 }));
    let err = out.err().expect("the check catches the lost credit");
    let named = err.starts_with("port 5 VL1: ") && err.ends_with(" != 512 credits");
    assert!(named, "{err}");
}

#[test]
fn a_packet_lost_mid_run_fails_the_run_naming_the_packet_counts() {
    let (sim, out) = run_with(Some(Fault::DropPacket));
    let err = out.err().expect("the check catches the lost packet");
    let (created, delivered) = (sim.packets_created, sim.packets_delivered_total);
    let live = sim.packets.live() as u64;
    let expected = format!("packets created {created} != delivered {delivered} + in flight {live}");
    assert_eq!(err, expected);
    assert_eq!(created, delivered + live + 1, "exactly one packet is missing");
}

#[test]
fn the_engine_reports_a_broken_invariant_as_an_internal_error() {
    let (_, out) = run_with(Some(Fault::DropCredit { port: 0, vl: 0 }));
    let err = crate::Error::Engine(out.err().expect("the check fails")).to_string();
    assert!(err.starts_with("internal engine error: port 0 VL0: "), "{err}");
}
